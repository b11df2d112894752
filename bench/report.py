"""Turn benchmark results into a Markdown summary and PNG plots."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.runs import STAGE_ORDER


def _lat(d: dict[str, Any] | None) -> str:
    if not d or not d.get("n"):
        return "-"
    return f"{d['p50']:.1f} / {d['p95']:.1f} / {d['p99']:.1f}"


def _with_other(stages: dict[str, Any]) -> dict[str, Any]:
    """Stages plus "other" (untimed time inside recall_run) for older result files."""
    if "other" in stages or "_detail_mean" not in stages:
        return stages
    detail = stages["_detail_mean"]
    rest = detail.get("total", 0.0) - sum(v for k, v in detail.items() if k != "total")
    return {**stages, "other": {"mean": round(rest, 2)}}


def markdown(results: list[dict[str, Any]]) -> str:
    """Tables: latency per size and mode, stages, ingest, load, memory, sizes."""
    out = [
        "| size | backend | path | mode | p50 / p95 / p99 ms | phase reached |",
        "|---:|---|---|---|---|---|",
    ]
    for r in results:
        for path, key in (("service", "recall_service"), ("HTTP", "recall_http")):
            for mode, m in r.get(key, {}).items():
                phases = ", ".join(
                    f"{p}:{n}" for p, n in m.get("phase_reached", {}).items()
                )
                backend = r["backend"]
                if backend == "torch" and r.get("precision"):
                    backend += f" ({r['precision']})"
                out.append(
                    f"| {r['size']:,} | {backend} | {path} | {mode} | "
                    f"{_lat(m['latency_ms'])} | {phases or '-'} |"
                )
    out += [
        "",
        "Mean stage time (ms), service path:",
        "",
        "| size | mode | " + " | ".join(STAGE_ORDER) + " |",
        "|---:|---|" + "---:|" * len(STAGE_ORDER),
    ]
    for r in results:
        for mode, m in r.get("recall_service", {}).items():
            st = _with_other(m["stages_ms"])
            cells = [f"{st.get(s, {}).get('mean', 0):.1f}" for s in STAGE_ORDER]
            out.append(f"| {r['size']:,} | {mode} | " + " | ".join(cells) + " |")
    out += [
        "",
        "| size | ingest msg/s | write p50 / p95 ms | visible p95 s | model texts/s "
        "| load rps | load p95 / p99 ms | errors | paced: offered -> served rps, "
        "p95 / p99 ms | RSS web / worker MiB |",
        "|---:|---:|---|---:|---:|---:|---|---:|---|---|",
    ]
    for r in results:
        ing, load = r.get("ingest", {}), r.get("load", {})
        paced = "; ".join(
            f"{p['offered_rps']:g} -> {p['throughput_rps']}, "
            f"{p['latency_ms'].get('p95', '-')} / {p['latency_ms'].get('p99', '-')}"
            for p in r.get("load_paced", [])
        )
        rss, model = r.get("peak_rss_mib", {}), r.get("model_throughput", {})
        w = ing.get("write_ms", {})
        lat = load.get("latency_ms", {})
        out.append(
            f"| {r['size']:,} | {ing.get('messages_per_s', '-')} | "
            f"{w.get('p50', '-')} / {w.get('p95', '-')} | "
            f"{ing.get('visible_s', {}).get('p95', '-')} | "
            f"{model.get('texts_per_s', '-')} | {load.get('throughput_rps', '-')} | "
            f"{lat.get('p95', '-')} / {lat.get('p99', '-')} | "
            f"{load.get('errors', '-')} | "
            f"{paced or '-'} | "
            f"{rss.get('web', '-')} / {rss.get('worker', '-')} |"
        )
    out += [
        "",
        "| size | ingest | messages | msg/s | derived rows embedded | write p95 ms | "
        "visible p95 s | CPU ms a message: web / worker / postgres | cores busy |",
        "|---:|---|---:|---:|---:|---:|---:|---|---:|",
    ]
    for r in results:
        for label, key in (("burst", "ingest"), ("sustained", "ingest_sustained")):
            ing = r.get(key)
            if not ing:
                continue
            cpu = ing.get("cpu_ms_per_message", {})
            out.append(
                f"| {r['size']:,} | {label} | {ing['messages']} | "
                f"{ing['messages_per_s']} | {ing.get('derived_rows', '-')} | "
                f"{ing['write_ms'].get('p95', '-')} | "
                f"{ing['visible_s'].get('p95', '-')} | "
                + " / ".join(
                    str(cpu.get(n, "-")) for n in ("web", "worker", "postgres")
                )
                + f" | {ing.get('cpu_cores', '-')} |"
            )
    out += [
        "",
        "| size | tenant | share | ef_search | recall@10 vs exact | short lists | "
        "ANN p50 / p95 ms |",
        "|---:|---|---:|---:|---:|---:|---|",
    ]
    for r in results:
        for label, t in r.get("filtered_vector_search", {}).items():
            for run in t["by_ef_search"]:
                a = run["ann_ms"]
                out.append(
                    f"| {r['size']:,} | {label} | {t['org_share']:.2%} | "
                    f"{run['ef_search']} | {_recall_cell(run)} | "
                    f"{run['short_lists']} | {a.get('p50')} / {a.get('p95')} |"
                )
    out += [
        "",
        "| size | DB MiB | memory table+indexes MiB | HNSW MiB (shared / all) | "
        "GIN MiB (shared / all) | per 100k: total / HNSW / GIN MiB (all) |",
        "|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        s = r.get("sizes", {})
        if not s:
            continue
        p, idx = s["per_100k_mib"], s["indexes_mib"]
        out.append(
            f"| {r['size']:,} | {s['database_mib']} | {s['memory_total_mib']} | "
            f"{idx.get('memory_embedding_hnsw', '-')} / {s.get('hnsw_mib', '-')} | "
            f"{idx.get('memory_search_gin', '-')} / {s.get('gin_mib', '-')} | "
            f"{p['memory_total']} / {p['hnsw']} / {p['gin']} |"
        )
    return "\n".join(out) + "\n"


def plots(
    results: list[dict[str, Any]], out_dir: Path, *, prefix: str = "bench"
) -> list[Path]:
    """latency vs size per path and mode; per-stage breakdown at the largest size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    results = sorted(results, key=lambda r: r["size"])
    written = []
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    for key, label in (("recall_http", "HTTP"), ("recall_service", "service")):
        for mode in ("cascade", "direct"):
            pts = [
                (r["size"], r[key][mode]["latency_ms"])
                for r in results
                if mode in r.get(key, {}) and r[key][mode]["latency_ms"].get("n")
            ]
            if not pts:
                continue
            xs = [p[0] for p in pts]
            style = "-" if label == "HTTP" else "--"
            ax.plot(
                xs,
                [p[1]["p50"] for p in pts],
                style,
                marker="o",
                label=f"{label} {mode} p50",
            )
            ax.plot(
                xs,
                [p[1]["p95"] for p in pts],
                style,
                marker="^",
                alpha=0.6,
                label=f"{label} {mode} p95",
            )
    ax.set_xscale("log")
    ax.set_xlabel("stored memories")
    ax.set_ylabel("recall latency (ms)")
    ax.set_title("Recall latency vs corpus size (2 cores)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    path = out_dir / f"{prefix}-latency.png"
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    written.append(path)

    biggest = results[-1]
    modes = list(biggest.get("recall_service", {}))
    if modes:
        fig, ax = plt.subplots(figsize=(6.4, 3.2), dpi=100)
        stages = [s for s in STAGE_ORDER if s != "total"]
        left = [0.0] * len(modes)
        for stage in stages:
            vals = [
                _with_other(biggest["recall_service"][m]["stages_ms"])
                .get(stage, {})
                .get("mean", 0.0)
                for m in modes
            ]
            ax.barh(modes, vals, left=left, label=stage)
            left = [a + b for a, b in zip(left, vals, strict=True)]
        ax.set_xlabel("mean ms per recall (service path)")
        ax.set_title(f"Per-stage time at {biggest['size']:,} memories")
        ax.legend(fontsize=7, ncol=4, loc="lower right")
        fig.tight_layout()
        path = out_dir / f"{prefix}-stages.png"
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    return written


def _recall_cell(run: dict[str, Any]) -> str:
    """recall@k, or why there is none (the principal sees no row with a vector)."""
    if run.get("recall_at_k") is None:
        return f"- (no rows visible, {run.get('empty_exact', 0)} queries)"
    empty = run.get("empty_exact") or 0
    return f"{run['recall_at_k']:.3f}" + (f" ({empty} empty)" if empty else "")
