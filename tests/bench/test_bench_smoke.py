"""The benchmark suite at smoke size (1k memories): it must run end to end, through the
real web server, worker and load generator. It is not timed and meets no target."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from bench.corpus import CorpusGenerator, org_sizes, small_and_large_org


def test_the_corpus_is_deterministic_and_shaped_like_agent_memory():
    vocab = [f"word{i}" for i in range(300)]
    a = list(CorpusGenerator(1000, vocab, seed=3).rows())
    b = list(CorpusGenerator(1000, vocab, seed=3).rows())
    assert [r.content for r in a] == [r.content for r in b]
    assert len(a) == 1000
    assert len({r.org for r in a}) == 50
    assert {r.visibility for r in a} == {"org", "team", "private"}
    assert {r.tier for r in a} >= {"raw", "episodic", "semantic"}
    lengths = sorted(len(r.content.split()) for r in a if r.kind == "message")
    assert 8 <= lengths[len(lengths) // 2] <= 25
    small, large = small_and_large_org(100_000)
    sizes = org_sizes(100_000)
    assert sizes[large] > 0.15 * 100_000 and 0.005 < sizes[small] / 100_000 < 0.015


@pytest.fixture
def shared_index_restored(settings):
    """The in-process run bulk-loads into the test database and leaves the shared
    HNSW index to the sync, which (by default) drops it: put back what the
    migrations built for the tests after this one."""
    yield
    from memory import vector_indexes

    settings.MNEMO_SHARED_HNSW = "full"
    vector_indexes.sync_tenant_indexes()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_bench_command_runs_at_smoke_size(tmp_path, capsys, shared_index_restored):
    call_command(
        "bench",
        "run",
        "--sizes",
        "1k",
        "--in-process",
        "--out",
        str(tmp_path),
        "--queries",
        "5",
        "--real-rows",
        "30",
        "--vocabulary",
        "400",
        "--load-clients",
        "2",
        "--load-seconds",
        "2",
        "--load-rates",
        "4,5",
        "--ingest-messages",
        "5",
        "--ingest-sustained-messages",
        "12",
        "--ingest-timeout",
        "15",
        "--recall-checks",
        "3",
        "--web-workers",
        "1",
        "--label",
        "smoke",
    )
    table = capsys.readouterr().out
    assert "| 1,000 |" in table
    [path] = tmp_path.glob("bench-smoke-*.json")
    [result] = json.loads(path.read_text())
    assert result["size"] == 1000
    for where in ("recall_service", "recall_http"):
        for mode in ("cascade", "direct"):
            assert result[where][mode]["latency_ms"]["n"] > 0
    assert result["recall_http"]["cascade"]["errors"] == 0
    assert result["load"]["errors"] == 0 and result["load"]["ok"] > 0
    assert [p["offered_rps"] for p in result["load_paced"]] == [4, 5]
    assert all(p["errors"] == 0 and p["ok"] > 0 for p in result["load_paced"])
    assert "5 -> " in table
    assert result["ingest"]["messages"] == 5
    assert result["ingest_sustained"]["messages"] == 12
    for run in ("ingest", "ingest_sustained"):
        cpu = result[run]["cpu_ms_per_message"]
        # every server and the embedded PostgreSQL is measured. The readings count
        # clock ticks (10 ms): one process's share of a few messages can read 0 (CI
        # saw PostgreSQL at 0.0 for 5 messages), their sum cannot.
        assert set(cpu) == {"web", "worker", "postgres"}, cpu
        assert all(ms >= 0 for ms in cpu.values()) and sum(cpu.values()) > 0, cpu
    assert "| sustained | 12 |" in table
    # The load vacuumed what it copied: autovacuum has nothing left to start inside
    # the timings (it did at 1M, docs/benchmarks.md session 22).
    assert result["corpus_load"]["timings_s"]["vacuum"] >= 0
    # The corpus was read into memory before anything was timed.
    assert result["prewarm"]["index_mib"] > 0 and result["prewarm"]["table_mib"] > 0
    # Ingest wrote into a scratch org, gone afterwards with everything in it.
    from accounts.models import Organization

    assert not Organization.objects.filter(slug__startswith="bench-ingest-").exists()
    assert (
        result["filtered_vector_search"]["small"]["by_ef_search"][0]["short_lists"] == 0
    )
    # No org reaches the tenant-index line at 1k, and by default the sync drops the
    # shared HNSW index: every org is scanned exactly (MNEMO_SHARED_HNSW=none).
    assert result["tenant_indexes"]["orgs"] == []
    assert result["tenant_indexes"]["shared"] == "none"
    assert "memory_embedding_hnsw" not in result["sizes"]["indexes_mib"]
    assert result["sizes"]["indexes_mib"]["memory_search_gin"] > 0
    assert result["filtered_vector_search"]["smallest"]["by_ef_search"][0][
        "recall_at_k"
    ] == pytest.approx(1.0)
    assert result["peak_rss_mib"]["web"] > 0
    assert (tmp_path / "bench-smoke-latency.png").stat().st_size > 1000
    # `bench instructions` on the same corpus, but for valgrind (minutes for one
    # Django process): its jobs and the replay it counts.
    from bench import instructions

    jobs = tmp_path / "jobs.json"
    assert instructions.write_jobs(1000, 3, jobs) == 3
    assert instructions.replay(jobs) > 3 * 200  # bytes of three recall answers
    argv = instructions.valgrind_argv(tmp_path / "out", ["python", "x"])
    assert "--toggle-collect=functools_reduce" in argv and argv[-2:] == ["python", "x"]
    (tmp_path / "out").write_text("events: Ir\nsummary: 3000\ntotals: 3000\n")
    assert instructions.total_instructions(tmp_path / "out") == 3000
    assert instructions.result(3000, 3)["instructions_per_recall"] == 1000
