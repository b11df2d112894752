"""The evaluate command end to end on a small slice of the real benchmark files."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from accounts.models import Organization
from memory.models import Memory

pytestmark = pytest.mark.django_db

DATASETS = Path(settings.MNEMO_DATASETS_DIR)
needs_data = pytest.mark.skipif(
    not (DATASETS / "locomo").is_dir() or not (DATASETS / "longmemeval").is_dir(),
    reason=f"benchmark data not found under {DATASETS} (set MNEMO_DATASETS_DIR)",
)


@needs_data
def test_evaluate_locomo_on_a_slice_prints_a_table_and_writes_per_question_ranks(
    tmp_path,
):
    out = tmp_path / "locomo.json"
    stdout = StringIO()
    call_command(
        "evaluate",
        "locomo",
        "--questions",
        "20",
        "--conversations",
        "1",
        "--ablation",
        "lexical_only",
        "--out",
        str(out),
        stdout=stdout,
        stderr=StringIO(),
    )
    text = stdout.getvalue()
    assert "| overall | 20 |" in text
    assert "lexical_only" in text
    data = json.loads(out.read_text())
    full = data["runs"]["full"]
    assert len(full["questions"]) == 20
    overall = next(r for r in full["rows"] if r["group"] == "overall")
    # A working retriever finds a good share of the evidence even on 20 questions.
    assert overall["turn recall@10"] > 0.3
    assert Organization.objects.filter(slug__startswith="eval-").count() == 0
    assert Memory.objects.count() == 0


@needs_data
def test_evaluate_longmemeval_on_one_haystack(tmp_path):
    stdout = StringIO()
    call_command(
        "evaluate",
        "longmemeval",
        "--questions",
        "1",
        "--conversations",
        "1",
        stdout=stdout,
        stderr=StringIO(),
    )
    assert "| overall | 1 |" in stdout.getvalue()


def test_evaluate_names_a_missing_data_path():
    with pytest.raises(CommandError, match="no benchmark data"):
        call_command(
            "evaluate", "locomo", "--data", str(settings.BASE_DIR / "nope.json")
        )
