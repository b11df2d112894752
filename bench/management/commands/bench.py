"""``manage.py bench run|size|report|instructions``: speed and scale benchmarks
(docs/benchmarks.md).

``run`` starts one child ``bench size`` per corpus size, each in its own database
(``mnemo_bench_<size>`` in ``MNEMO_BENCH_DATA_DIR``, default ``var/bench-pg``), so a
loaded corpus is reused by later runs and never mixes with real data. ``--in-process``
uses this process's database instead (the smoke test does). ``instructions`` counts
a recall's instructions with callgrind on such a database (``bench/instructions.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from bench import report
from bench.suite import Options, run_size


def _sizes(text: str) -> list[int]:
    units = {"k": 1_000, "m": 1_000_000}
    out = []
    for part in text.split(","):
        part = part.strip().lower()
        mult = units.get(part[-1:], 1)
        out.append(int(float(part[:-1] if mult > 1 else part) * mult))
    return out


class Command(BaseCommand):
    help = "Speed and scale benchmarks: latency, ingest, load, memory, sizes."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        for name in ("run", "size"):
            p = sub.add_parser(name)
            p.add_argument(
                "--sizes" if name == "run" else "--size",
                required=name == "size",
                default="10k,100k",
                help="corpus size(s), e.g. 1k,10k,100k",
            )
            p.add_argument(
                "--out", default=str(Path(settings.BASE_DIR) / "bench" / "results")
            )
            p.add_argument("--queries", type=int, default=200)
            p.add_argument(
                "--real-rows",
                type=int,
                default=2000,
                help="rows embedded with the real model; the rest use the fast path",
            )
            p.add_argument("--vocabulary", type=int, default=6000)
            p.add_argument("--load-clients", type=int, default=20)
            p.add_argument("--load-seconds", type=float, default=60.0)
            p.add_argument(
                "--load-rates",
                default="80,100",
                help="recalls a second offered in paced load runs after the "
                "closed-loop one, e.g. 80,100 (empty: none)",
            )
            p.add_argument("--ingest-messages", type=int, default=300)
            p.add_argument(
                "--ingest-sustained-messages",
                type=int,
                default=2000,
                help="a second, longer ingest with consolidation running alongside "
                "(0: none)",
            )
            p.add_argument("--recall-checks", type=int, default=200)
            p.add_argument("--web-workers", type=int, default=2)
            p.add_argument("--ingest-timeout", type=float, default=120.0)
            p.add_argument("--no-http", action="store_true")
            p.add_argument("--seed", type=int, default=42)
            p.add_argument("--label", default="", help="suffix for output file names")
            p.add_argument(
                "--in-process",
                action="store_true",
                help="use this process's database (no child per size)",
            )
        rep = sub.add_parser("report")
        rep.add_argument("files", nargs="+")
        rep.add_argument(
            "--plots", default=str(Path(settings.BASE_DIR) / "bench" / "results")
        )
        rep.add_argument("--prefix", default="bench")
        ins = sub.add_parser("instructions", help="instructions a recall (callgrind)")
        ins.add_argument("--size", default="100k", help="a corpus `bench run` loaded")
        ins.add_argument("--recalls", type=int, default=30)
        ins.add_argument("--mode", choices=("cascade", "direct"), default="cascade")
        ins.add_argument("--label", default="")
        ins.add_argument(
            "--out", default=str(Path(settings.BASE_DIR) / "bench" / "results")
        )
        for name in ("instructions-jobs", "instructions-replay"):
            hidden = sub.add_parser(name)
            hidden.add_argument("jobs")
            hidden.add_argument("--size", default="100k")
            hidden.add_argument("--recalls", type=int, default=30)
            hidden.add_argument("--mode", default="cascade")

    def handle(self, *args: Any, **opts: Any) -> None:
        if opts["action"] == "report":
            results = [r for f in opts["files"] for r in _read(Path(f))]
            self.stdout.write(report.markdown(results))
            for p in report.plots(results, Path(opts["plots"]), prefix=opts["prefix"]):
                self.stderr.write(f"plot: {p}")
            return
        if opts["action"].startswith("instructions"):
            self._instructions(opts)
            return
        _rates(opts["load_rates"])  # a bad list fails before anything is loaded
        if opts["recall_checks"] < 1:
            raise CommandError("--recall-checks must be at least 1")
        out = Path(opts["out"])
        out.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        label = f"-{opts['label']}" if opts["label"] else ""
        if opts["action"] == "size":
            call_command("migrate", verbosity=0)
            result = run_size(
                _options(opts, int(_sizes(opts["size"])[0])), log=self.stderr.write
            )
            path = out / f"bench-{result['size']}{label}-{stamp}.json"
            path.write_text(json.dumps(result, indent=1, default=str))
            self.stdout.write(str(path))
            return
        results = []
        for size in _sizes(opts["sizes"]):
            if opts["in_process"]:
                results.append(run_size(_options(opts, size), log=self.stderr.write))
            else:
                results.append(self._child(size, opts))
        path = out / f"bench{label}-{stamp}.json"
        path.write_text(json.dumps(results, indent=1, default=str))
        self.stdout.write(report.markdown(results))
        for p in report.plots(results, out, prefix=f"bench{label}"):
            self.stderr.write(f"plot: {p}")
        self.stderr.write(f"results: {path}")

    def _instructions(self, opts: dict[str, Any]) -> None:
        from bench import instructions

        if opts["recalls"] < 1:
            raise CommandError("--recalls must be at least 1")
        size = _sizes(opts["size"])[0]
        if opts["action"] == "instructions-jobs":
            n = instructions.write_jobs(size, opts["recalls"], Path(opts["jobs"]))
            self.stderr.write(f"{n} recalls written to {opts['jobs']}")
            return
        if opts["action"] == "instructions-replay":
            instructions.replay(Path(opts["jobs"]), mode=opts["mode"])
            return
        out = Path(opts["out"])
        out.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        label = f"-{opts['label']}" if opts["label"] else ""
        jobs = out / f"instructions{label}-{stamp}-jobs.json"
        grind = out / f"instructions{label}-{stamp}.callgrind"
        env = _bench_env(size)
        base = [sys.executable, "manage.py"]
        common = ["--size", str(size), "--recalls", str(opts["recalls"])]
        steps = [
            [*base, "bench", "instructions-jobs", str(jobs), *common],
            instructions.valgrind_argv(
                grind,
                [*base, "bench", "instructions-replay", str(jobs), *common]
                + ["--mode", opts["mode"]],
            ),
        ]
        for argv in steps:
            self.stderr.write(" ".join(argv[:3] + argv[-6:]))
            proc = subprocess.run(  # noqa: S603 - this manage.py under valgrind
                argv, cwd=settings.BASE_DIR, env=env, check=False
            )
            if proc.returncode != 0:
                raise CommandError(f"{argv[2]} failed (exit {proc.returncode})")
        total = instructions.total_instructions(grind)
        n = len(json.loads(jobs.read_text()))
        res = instructions.result(
            total, n, size=size, mode=opts["mode"], callgrind=str(grind)
        )
        path = out / f"instructions{label}-{stamp}.json"
        path.write_text(json.dumps(res, indent=1))
        self.stdout.write(
            f"| size | mode | recalls | instructions a recall |\n|---:|---|---:|---:|\n"
            f"| {size:,} | {opts['mode']} | {n} | {res['instructions_per_recall']:,} |"
        )
        self.stderr.write(f"results: {path}")

    def _child(self, size: int, opts: dict[str, Any]) -> dict[str, Any]:
        env = _bench_env(size)
        argv = [sys.executable, "manage.py", "bench", "size", "--size", str(size)]
        for flag in (
            "out",
            "queries",
            "real_rows",
            "vocabulary",
            "load_clients",
            "load_seconds",
            "load_rates",
            "ingest_messages",
            "ingest_sustained_messages",
            "recall_checks",
            "seed",
            "label",
            "web_workers",
            "ingest_timeout",
        ):
            argv += [f"--{flag.replace('_', '-')}", str(opts[flag])]
        if opts["no_http"]:
            argv.append("--no-http")
        self.stderr.write(f"size {size:,}: {' '.join(argv[2:])}")
        proc = subprocess.run(  # noqa: S603 - argv is this manage.py, not input
            argv,
            cwd=settings.BASE_DIR,
            env=env,
            stdout=subprocess.PIPE,  # noqa: S603
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise CommandError(f"bench size {size} failed (exit {proc.returncode})")
        return _read(Path(proc.stdout.strip().splitlines()[-1]))[0]


def _bench_env(size: int) -> dict[str, str]:
    """The environment of a child on the bench database of ``size``."""
    data_dir = os.environ.get(
        "MNEMO_BENCH_DATA_DIR", str(Path(settings.BASE_DIR) / "var" / "bench-pg")
    )
    env = {
        **os.environ,
        "MNEMO_DATA_DIR": data_dir,
        "MNEMO_DB_NAME": f"mnemo_bench_{size}",
        "MNEMO_LOG_LEVEL": "WARNING",
    }
    env.pop("DATABASE_URL", None)
    return env


def _rates(text: str) -> tuple[float, ...]:
    """``--load-rates``: comma-separated recalls a second, each in (0, 10000]."""
    rates = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            rate = float(part)
        except ValueError:
            raise CommandError(f"--load-rates: {part!r} is not a number") from None
        if not 0 < rate <= 10_000:
            raise CommandError(f"--load-rates: {part} is not in (0, 10000]")
        rates.append(rate)
    return tuple(rates)


def _options(opts: dict[str, Any], size: int) -> Options:
    return Options(
        size=size,
        seed=opts["seed"],
        queries=opts["queries"],
        real_rows=opts["real_rows"],
        vocabulary=opts["vocabulary"],
        load_clients=opts["load_clients"],
        load_seconds=opts["load_seconds"],
        load_rates=_rates(opts["load_rates"]),
        ingest_messages=opts["ingest_messages"],
        ingest_sustained_messages=opts["ingest_sustained_messages"],
        recall_checks=opts["recall_checks"],
        http=not opts["no_http"],
        web_workers=opts["web_workers"],
        ingest_timeout_s=opts["ingest_timeout"],
    )


def _read(path: Path) -> list[dict[str, Any]]:
    data = json.loads(path.read_text())
    return data if isinstance(data, list) else [data]
