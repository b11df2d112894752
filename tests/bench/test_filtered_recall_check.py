"""The filtered-recall check reports a principal who sees no row as such, not as 0."""

from __future__ import annotations

import pytest

from bench import runs
from bench.report import _recall_cell
from memory import embeddings

pytestmark = pytest.mark.django_db


def test_a_principal_who_sees_no_vector_has_no_recall_figure_rather_than_zero(world):
    vectors = embeddings.embed_queries(["pottery workshop", "the budget meeting"])
    [run] = runs.filtered_vector_recall(
        world.principal("carol"), vectors, ef_searches=(200,)
    )
    assert run["recall_at_k"] is None
    assert run["empty_exact"] == 2 and run["queries"] == 0
    assert _recall_cell(run) == "- (no rows visible, 2 queries)"
    assert _recall_cell({"recall_at_k": 0.9876, "empty_exact": 0}) == "0.988"
