"""Packing ranked memories into a token budget."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recall.pipeline.packing import PackInput, make_token_counter, pack_to_budget


def word_count(text):
    return len(text.split())


def words(n):
    return " ".join(["w"] * n)


def test_packer_skips_an_item_too_big_but_keeps_walking():
    items = [PackInput(1, words(5)), PackInput(2, words(8)), PackInput(3, words(3))]
    result = pack_to_budget(items, budget_tokens=9, limit=10, count_tokens=word_count)
    assert [p.memory_id for p in result.packed] == [1, 3]
    assert [(o.memory_id, o.reason, o.tokens) for o in result.omitted] == [
        (2, "budget", 8)
    ]
    assert result.total_tokens == 8
    assert [(p.position, p.rank) for p in result.packed] == [(0, 1), (1, 3)]


def test_packer_stops_at_the_limit():
    items = [PackInput(i, words(1)) for i in range(1, 5)]
    result = pack_to_budget(items, budget_tokens=100, limit=2, count_tokens=word_count)
    assert [p.memory_id for p in result.packed] == [1, 2]
    assert [(o.memory_id, o.reason) for o in result.omitted] == [
        (3, "limit"),
        (4, "limit"),
    ]


def test_a_digest_ranked_first_keeps_out_the_rows_it_covers():
    items = [
        PackInput(100, words(4), covers=frozenset({1, 2})),
        PackInput(1, words(2)),
        PackInput(3, words(2)),
    ]
    result = pack_to_budget(items, budget_tokens=50, limit=10, count_tokens=word_count)
    assert [p.memory_id for p in result.packed] == [100, 3]
    assert [(o.memory_id, o.reason) for o in result.omitted] == [
        (1, "covered_by_digest")
    ]


def test_a_row_ranked_first_keeps_out_the_digest_that_covers_it():
    items = [PackInput(1, words(2)), PackInput(100, words(4), covers=frozenset({1}))]
    result = pack_to_budget(items, budget_tokens=50, limit=10, count_tokens=word_count)
    assert [p.memory_id for p in result.packed] == [1]
    assert result.omitted[0].reason == "digest_overlaps_rows"


def test_a_digest_that_does_not_fit_does_not_block_its_rows():
    items = [PackInput(100, words(40), covers=frozenset({1})), PackInput(1, words(2))]
    result = pack_to_budget(items, budget_tokens=10, limit=10, count_tokens=word_count)
    assert [p.memory_id for p in result.packed] == [1]
    assert result.omitted[0].reason == "budget"


def test_a_repeated_memory_is_packed_once():
    items = [PackInput(1, "a"), PackInput(1, "a")]
    result = pack_to_budget(items, budget_tokens=10, limit=10, count_tokens=word_count)
    assert len(result.packed) == 1
    assert result.omitted[0].reason == "duplicate"


def test_packer_rejects_a_negative_budget():
    with pytest.raises(ValueError):
        pack_to_budget([], budget_tokens=-1, limit=1, count_tokens=word_count)


def test_token_counter_counts_exact_cl100k_tokens_and_tolerates_special_markers():
    count = make_token_counter()
    assert count("hello world") == 2
    assert count("") == 0
    assert count("<|endoftext|>") > 1
    assert make_token_counter("cl100k_base") is not count  # fresh closure, cached enc


def test_token_counter_remembers_short_texts_only_and_counts_the_same():
    from recall.pipeline.packing import TOKEN_CACHE_MAX_CHARS, _encoding

    count = make_token_counter()
    enc = _encoding("cl100k_base")
    short = "Caroline went to the pottery workshop in Boston " * 3
    long = "word " * (TOKEN_CACHE_MAX_CHARS // 5 + 1)
    for text in (short, short, long, long):
        assert count(text) == len(enc.encode_ordinary(text))
    info = count.cache_info()
    assert (info.hits, info.misses, info.currsize) == (1, 1, 1)


@st.composite
def pack_inputs(draw):
    ids = draw(st.lists(st.integers(1, 30), min_size=0, max_size=20))
    items = []
    for memory_id in ids:
        covers = draw(st.frozensets(st.integers(1, 30), max_size=3))
        covers = covers - {memory_id} if draw(st.booleans()) else frozenset()
        items.append(PackInput(memory_id, words(draw(st.integers(0, 12))), covers))
    return items


@given(pack_inputs(), st.integers(0, 60), st.integers(0, 12))
def test_packer_never_exceeds_budget_keeps_order_limit_and_digest_rule(
    items, budget, limit
):
    result = pack_to_budget(
        items, budget_tokens=budget, limit=limit, count_tokens=word_count
    )
    packed_ids = [p.memory_id for p in result.packed]
    assert result.total_tokens == sum(p.tokens for p in result.packed) <= budget
    assert len(result.packed) <= limit
    assert [p.rank for p in result.packed] == sorted(p.rank for p in result.packed)
    assert [p.position for p in result.packed] == list(range(len(result.packed)))
    assert len(set(packed_ids)) == len(packed_ids)
    covers = {}
    for item in items:  # a repeated id is judged by its first occurrence
        covers.setdefault(item.memory_id, item.covers)
    for memory_id in packed_ids:
        assert covers[memory_id].isdisjoint(packed_ids)
    assert len(result.packed) + len(result.omitted) == len(items)
