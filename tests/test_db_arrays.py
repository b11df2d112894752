"""IntArray / TextArray: one-pass array literals, read as psycopg's own lists are."""

from __future__ import annotations

import pytest
from django.db import connection
from psycopg.adapt import PyFormat

from config.db.arrays import IntArray, TextArray

pytestmark = pytest.mark.django_db


def test_text_arrays_round_trip_every_character_that_needs_quoting():
    values = ["raw", 'say "hi"', "back\\slash", "a,b", "{braces}", "NULL", "", " x "]
    with connection.cursor() as c:
        c.execute("SELECT %s::text[]", [TextArray(values)])
        assert c.fetchone()[0] == values
        c.execute("SELECT %s = ANY(%s::text[])", ['say "hi"', TextArray(values)])
        assert c.fetchone()[0] is True


def test_int_arrays_match_in_any_and_are_typed_by_their_context():
    with connection.cursor() as c:
        c.execute(
            "SELECT 5 = ANY(%s), 7 = ANY(%s), 3000000000::bigint = ANY(%s)",
            [IntArray([4, 5]), IntArray([]), IntArray([3000000000])],
        )
        assert c.fetchone() == (True, False, True)
        c.execute("SELECT pg_typeof(%s::bigint[])::text", [IntArray([1])])
        assert c.fetchone()[0] == "bigint[]"


def test_an_int_array_never_carries_anything_but_integers():
    with connection.cursor() as c, pytest.raises(ValueError):
        c.execute("SELECT 1 = ANY(%s)", [IntArray(["1}; DROP TABLE x; --"])])


def test_the_connection_binds_them_as_the_plain_list_would_be_read():
    """The same untyped literal as psycopg's list dumper (element quotes aside), from
    the one-pass dumpers every connection registers (config.db.base)."""
    with connection.cursor() as c:
        raw = c.cursor
        fast = raw.mogrify("x = ANY(%s)", [TextArray(["raw", "episodic"])])
        plain = raw.mogrify("x = ANY(%s)", [["raw", "episodic"]])
        assert plain == "x = ANY('{raw,episodic}')"
        assert fast == """x = ANY('{"raw","episodic"}')"""
        assert raw.mogrify("%s", [IntArray([1, 2])]) == "'{1,2}'"
        for cls in (IntArray, TextArray):
            dumper = raw.adapters.get_dumper(cls, PyFormat.TEXT)
            assert dumper.__module__ == "config.db.arrays"
