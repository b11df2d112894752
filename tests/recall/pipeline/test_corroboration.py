"""A message takes a share of the best score among the rows drawn from it."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recall.pipeline.corroboration import corroborate
from recall.pipeline.types import FusedItem


def item(memory_id, score):
    return FusedItem(memory_id=memory_id, score=score, phase=2)


def test_the_source_takes_a_share_of_its_best_derived_row():
    items = [item(1, 0.02), item(2, 0.03), item(3, 0.01), item(4, 0.025)]
    # 2 and 3 are observations drawn from message 1; 4 stands alone.
    reranked = corroborate(items, {2: 1, 3: 1}, share=0.25)
    boosted = {i.memory_id: i.boosts for i in reranked if i.boosts}
    assert set(boosted) == {1}  # derived rows keep their scores
    assert boosted[1]["corroborated"] == pytest.approx((0.02 + 0.25 * 0.03) / 0.02)
    assert [i.memory_id for i in reranked] == [2, 1, 4, 3]  # 1 passes 4
    assert reranked[1].boosts == {"corroborated": pytest.approx(1.375)}
    assert reranked[1].corroborated_by == 2  # the best of its derived rows
    assert all(i.corroborated_by is None for i in reranked if i.memory_id != 1)


def test_nothing_happens_without_the_source_or_with_share_zero():
    items = [item(2, 0.03), item(3, 0.01)]
    assert corroborate(items, {2: 1, 3: 1}, share=0.25) == items
    with_source = [item(1, 0.02), *items]
    assert corroborate(with_source, {2: 1}, share=0) == with_source
    assert corroborate([], {}, share=0.25) == []


@given(
    scores=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=20),
    links=st.dictionaries(st.integers(0, 19), st.integers(0, 19), max_size=20),
    share=st.floats(0.0, 2.0),
)
def test_only_sources_are_boosted_and_never_down(scores, links, share):
    items = [item(i, s) for i, s in enumerate(scores)]
    out = {i.memory_id: i.boosts for i in corroborate(items, links, share=share)}
    present = {i.memory_id for i in items}
    for memory_id, factors in ((m, f) for m, f in out.items() if f):
        assert memory_id in present
        assert any(src == memory_id and d != memory_id for d, src in links.items())
        assert factors["corroborated"] >= 1.0
