"""``manage.py evaluate locomo|longmemeval``: retrieval quality, real code path."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from recall.evaluation import datasets, metrics, runner

DEFAULT_PATHS = {
    "locomo": "locomo/locomo_dev.json",
    "longmemeval": "longmemeval/s_cleaned_subset",
}


class Command(BaseCommand):
    help = "Ingest a benchmark through Mnemo's write path and score recall_run on it."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("benchmark", choices=sorted(DEFAULT_PATHS))
        parser.add_argument(
            "--data", help="file or folder (default: under MNEMO_DATASETS_DIR)"
        )
        parser.add_argument("--out", help="write JSON (per-question ranks) here")
        parser.add_argument(
            "--questions",
            type=int,
            default=None,
            help="smoke run: this many questions, spread over categories",
        )
        parser.add_argument(
            "--conversations",
            type=int,
            default=None,
            help="only the first N conversations / haystacks",
        )
        parser.add_argument(
            "--ablation",
            action="append",
            default=[],
            choices=sorted(runner.ABLATIONS),
            help="also run this ablation (repeatable)",
        )
        parser.add_argument(
            "--k", type=int, default=50, help="recall limit per question"
        )
        parser.add_argument(
            "--keep", action="store_true", help="keep the evaluation orgs"
        )
        parser.add_argument(
            "--consolidate",
            action=argparse.BooleanOptionalAction,
            default=True,
            help="build the knowledge tiers (observations, facts, episodes, topics) "
            "before recalling, as the worker does after embedding (default); "
            "--no-consolidate recalls over the raw messages alone",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        bench = opts["benchmark"]
        path = Path(
            opts["data"] or Path(settings.MNEMO_DATASETS_DIR) / DEFAULT_PATHS[bench]
        )
        if not path.exists():
            raise CommandError(
                f"no benchmark data at {path} (set --data or MNEMO_DATASETS_DIR)"
            )
        loader = (
            datasets.load_locomo if bench == "locomo" else datasets.load_longmemeval
        )
        conversations = loader(path)
        if opts["conversations"]:
            conversations = conversations[: opts["conversations"]]
        selected = datasets.iter_questions(conversations, limit=opts["questions"])
        needed = {c.conversation_id for c, _ in selected}
        conversations = [c for c in conversations if c.conversation_id in needed]
        log = self.stderr.write
        run_id = runner.new_run_id()
        t0 = time.perf_counter()
        ingested = {}
        for conv in conversations:
            ingested[conv.conversation_id] = runner.ingest(
                conv, run_id=run_id, key_turns_only=bench == "longmemeval", log=log
            )
        ingest_s = time.perf_counter() - t0
        turns = sum(i.turns for i in ingested.values())
        log(
            f"ingested {turns} turns from {len(ingested)} conversations "
            f"in {ingest_s:.1f}s"
        )
        orgs = [i.org for i in ingested.values()]
        try:
            rows, embed_s = runner.embed_all(orgs, log=log)
            log(
                f"embedded {rows} rows in {embed_s:.1f}s "
                f"({rows / max(embed_s, 1e-9):.0f}/s)"
            )
            consolidate_s = None
            if opts["consolidate"]:
                consolidate_s = runner.consolidate_all(orgs, log=log)
                derived, derived_s = runner.embed_all(orgs, log=log)
                log(
                    f"consolidated in {consolidate_s:.1f}s "
                    f"({turns / consolidate_s:.0f} messages/s); "
                    f"embedded {derived} derived rows in {derived_s:.1f}s"
                )
            by_conv: dict[str, list[Any]] = {}
            for conv, q in selected:
                by_conv.setdefault(conv.conversation_id, []).append(q)
            output: dict[str, Any] = {
                "benchmark": bench,
                "data": str(path),
                "k": opts["k"],
                "turns": turns,
                "ingest_seconds": round(ingest_s, 2),
                "embed_seconds": round(embed_s, 2),
                "consolidate_seconds": consolidate_s,
                "runs": {},
            }
            for ablation in ["full", *[a for a in opts["ablation"] if a != "full"]]:
                t1 = time.perf_counter()
                results = []
                for conv_id, questions in by_conv.items():
                    results += runner.run_questions(
                        ingested[conv_id], questions, ablation=ablation, k=opts["k"]
                    )
                report = metrics.aggregate(results, benchmark=bench)
                self.stdout.write(
                    f"\n### {bench} — {ablation} "
                    f"({len(results)} questions, "
                    f"{time.perf_counter() - t1:.1f}s)\n"
                )
                self.stdout.write(metrics.render_markdown(report))
                output["runs"][ablation] = metrics.report_to_json(report, results)
            if opts["out"]:
                Path(opts["out"]).parent.mkdir(parents=True, exist_ok=True)
                Path(opts["out"]).write_text(json.dumps(output, indent=1, default=str))
                log(f"wrote {opts['out']}")
        finally:
            if not opts["keep"]:
                runner.drop_orgs(orgs)
