"""Instructions a recall costs in the web process, counted by callgrind.

Wall and CPU time on the 2-core bench VMs move by +-20% between rounds of the same
code, too much to see a change of a few percent. Instruction counts do not: callgrind
counts what the CPU executes whatever else the machine is doing (two runs of the same
code: 42,711,503 and 42,733,757 a recall, 0.05% apart; docs/benchmarks.md, session 25).

``manage.py bench instructions`` does it in two steps, each a child process on the
bench database of the size (``bench run`` has loaded it):

1. ``jobs``: sample questions from the corpus and issue API keys for their agents,
   written to a JSON file (the corpus generator would take minutes under valgrind);
2. ``replay`` under ``valgrind --tool=callgrind``: every question through the Django
   test client (middleware, DRF, auth, the recall, the JSON answer) twice to warm the
   caches, then once more inside one ``functools.reduce`` call. Collection is on only
   inside that call (``--toggle-collect=functools_reduce``), so start-up, imports and
   the model load are not counted.

What is counted is the web process's Python and C, not PostgreSQL's work (another
process) nor the network; it measures changes on the Python side of a recall.
"""

from __future__ import annotations

import functools
import json
import re
import shutil
from pathlib import Path
from typing import Any

TOGGLE = "functools_reduce"


def write_jobs(size: int, recalls: int, path: Path, *, seed: int = 42) -> int:
    """Questions and API keys of ``recalls`` recalls on the loaded corpus."""
    from bench import loader, suite
    from bench.corpus import CorpusGenerator, load_vocabulary, sample_queries

    vocab = load_vocabulary(suite.vocab_path(), size=6000)
    gen = CorpusGenerator(size, vocab, seed=seed)
    rows = list(gen.rows())
    if loader.existing_rows() != len(rows):
        raise SystemExit(
            f"the bench database holds {loader.existing_rows()} rows, not {len(rows)}:"
            f" load it first with `manage.py bench run --sizes {size}`"
        )
    _, _, agent_ids = loader.ensure_principals(gen)
    questions = sample_queries(rows, gen.orgs, recalls, seed=seed + 11)[:recalls]
    keys: dict[int, str] = {}
    for org, _ in questions:
        if org not in keys:
            keys[org] = loader.issue_key(agent_ids[org][1])
    path.write_text(json.dumps([(keys[o], q) for o, q in questions]))
    return len(questions)


def replay(path: Path, *, mode: str = "cascade") -> int:
    """Recall every job: twice to warm, then once inside ``functools.reduce``."""
    from django.test import Client

    jobs = [tuple(j) for j in json.loads(path.read_text())]
    client = Client()

    def one(total: int, job: tuple[str, str]) -> int:
        key, query = job
        response = client.post(
            "/api/v1/recall",
            data=json.dumps({"query": query, "mode": mode}),
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {key}",
        )
        if response.status_code != 200:
            raise SystemExit(
                f"recall failed: {response.status_code} {response.content[:200]!r}"
            )
        return total + len(response.content)

    for _ in range(2):
        for job in jobs:
            one(0, job)
    return functools.reduce(one, jobs, 0)


def valgrind_argv(out_file: Path, argv: list[str]) -> list[str]:
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise SystemExit("valgrind is not installed (Debian package valgrind)")
    return [
        valgrind,
        "--tool=callgrind",
        "--collect-atstart=no",
        f"--toggle-collect={TOGGLE}",
        f"--callgrind-out-file={out_file}",
        *argv,
    ]


def total_instructions(out_file: Path) -> int:
    """The ``summary:`` line of a callgrind output file."""
    match = re.search(r"^summary:\s+(\d+)", out_file.read_text(), re.MULTILINE)
    if match is None:
        raise SystemExit(f"no summary in {out_file}")
    return int(match.group(1))


def result(total: int, recalls: int, **extra: Any) -> dict[str, Any]:
    return {
        "instructions": total,
        "recalls": recalls,
        "instructions_per_recall": total // max(1, recalls),
        **extra,
    }
