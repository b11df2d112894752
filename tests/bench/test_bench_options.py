"""Bad bench options fail with a message before any corpus is generated or loaded."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command


@pytest.mark.parametrize(
    ("rates", "message"),
    [("80,abc", "'abc' is not a number"), ("0", "0 is not in"), ("-5", "-5 is not in")],
)
def test_bad_load_rates_fail_before_anything_is_loaded(rates: str, message: str):
    with pytest.raises(CommandError, match=message):
        call_command("bench", "run", "--sizes", "1k", "--load-rates", rates)


def test_recall_checks_must_be_positive():
    with pytest.raises(CommandError, match="at least 1"):
        call_command("bench", "run", "--sizes", "1k", "--recall-checks", "0")
