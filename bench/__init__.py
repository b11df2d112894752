"""Speed and scale benchmarks: synthetic corpus, bulk load, latency, ingest and load.

Run with ``python manage.py bench`` (or ``make bench``); see docs/benchmarks.md.
"""
