"""Communities of entities by label propagation over relationship edges (pure)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable


def label_propagation(
    edges: Iterable[tuple[int, int]], *, max_iter: int = 20
) -> dict[int, int]:
    """Map each node to a community label (the id of one member of its community).

    Deterministic asynchronous label propagation: nodes are visited in id order and
    take the most frequent label among their neighbours, ties to the smallest label.
    Stops when no label changes or after ``max_iter`` sweeps. Self-loops are ignored.
    """
    neighbours: dict[int, list[int]] = {}
    for a, b in edges:
        if a == b:
            continue
        neighbours.setdefault(a, []).append(b)
        neighbours.setdefault(b, []).append(a)
    labels = {node: node for node in neighbours}
    order = sorted(neighbours)
    for _ in range(max_iter):
        changed = False
        for node in order:
            counts = Counter(labels[n] for n in neighbours[node])
            best = max(counts.values())
            choice = min(label for label, c in counts.items() if c == best)
            if choice != labels[node]:
                labels[node] = choice
                changed = True
        if not changed:
            break
    return labels


def groups(labels: dict[int, int], *, min_size: int = 2) -> dict[int, list[int]]:
    """Communities (label -> sorted members) with at least ``min_size`` members."""
    out: dict[int, list[int]] = {}
    for node, label in labels.items():
        out.setdefault(label, []).append(node)
    return {label: sorted(m) for label, m in sorted(out.items()) if len(m) >= min_size}
