"""Pure recall pipeline: intent, fusion, dedup, coverage, packing and explain.

Nothing in this package imports Django, DRF, Celery, pgvector or a database
driver. Callers pass candidates, configuration, the clock and a tokenizer in,
and get frozen dataclasses back, so every step is unit-testable without a DB.
"""
