"""Keep a row's embedding in the heap tuple instead of the TOAST table.

A 384-dimension vector is 1,544 bytes; with the content, its tsvector and the other
columns a typical message row is ~2.3 kB, just over PostgreSQL's 2 kB TOAST threshold,
so every vector went out of line (pgvector's storage is EXTERNAL). Each exact-scan or
re-scored row then cost a TOAST index probe and a chunk fetch: at 100k rows an exact
scan over a 7k-row tenant read ~6 buffers a row and took 43 ms; with the vectors inline,
22 ms (docs/benchmarks.md, session 3). ``toast_tuple_target`` 4080 lets tuples up to half
a page stay whole; long contents are still compressed and moved out as before.
Rows written before this migration keep their out-of-line vectors until rewritten.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("memory", "0005_recall_lookup_indexes")]

    operations = [
        migrations.RunSQL(
            "ALTER TABLE memory_memory SET (toast_tuple_target = 4080)",
            "ALTER TABLE memory_memory RESET (toast_tuple_target)",
        )
    ]
