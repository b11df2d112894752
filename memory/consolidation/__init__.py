"""Knowledge tiers: consolidation of raw messages into observations, episodes, facts,
procedures and topics, with lineage back to the quoted message span.

Public entry points (see ``docs/knowledge-tiers.md``):

* :func:`memory.consolidation.service.consolidate_session` - incremental, idempotent
* :func:`memory.consolidation.service.index_written_facts` - facts written via the API
* :func:`memory.consolidation.topics.topic_covers` - ids a topic/episode covers
"""
