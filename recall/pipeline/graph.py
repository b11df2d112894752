"""Personalised PageRank over the entity graph, and shortest paths for explain.

Node ids are strings such as ``"e:12"`` (entity) or ``"m:345"`` (memory). Edges
are undirected and weighted; parallel edges add up and self-loops are ignored.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

Edge = tuple[str, str, float]


def _adjacency(edges: Iterable[Edge]) -> dict[str, dict[str, float]]:
    adjacency: dict[str, dict[str, float]] = {}
    for a, b, weight in edges:
        if a == b or not weight > 0.0:
            continue
        adjacency.setdefault(a, {})
        adjacency.setdefault(b, {})
        adjacency[a][b] = adjacency[a].get(b, 0.0) + float(weight)
        adjacency[b][a] = adjacency[b].get(a, 0.0) + float(weight)
    return adjacency


def _capped(
    neighbours: Mapping[str, float], max_fanout: int
) -> list[tuple[str, float]]:
    ordered = sorted(neighbours.items(), key=lambda item: (-item[1], item[0]))
    return ordered[:max_fanout]


def personalized_pagerank(
    edges: Sequence[Edge],
    seeds: Mapping[str, float],
    *,
    damping: float = 0.85,
    max_iter: int = 30,
    tol: float = 1e-6,
    max_fanout: int = 50,
) -> dict[str, float]:
    """Run PageRank that teleports to ``seeds`` (weights normalised to sum 1).

    Each node walks only along its ``max_fanout`` heaviest edges (ties by node
    id), so hub entities cannot flood the ranking. Mass at a node with no edges
    returns to the seeds, so the scores always sum to 1. Iteration stops after
    ``max_iter`` steps or when the L1 change drops below ``tol``. Returns the
    nodes that received any score; an empty or all-zero ``seeds`` gives {}.
    """
    if not 0.0 <= damping < 1.0:
        raise ValueError("damping must be within [0, 1)")
    teleport_weights = {node: float(w) for node, w in seeds.items() if w > 0}
    total_seed = sum(teleport_weights.values())
    if total_seed <= 0.0:
        return {}
    adjacency = _adjacency(edges)
    capped = {
        node: _capped(neighbours, max_fanout) for node, neighbours in adjacency.items()
    }

    # Only nodes reachable from a seed can ever hold mass.
    index: dict[str, int] = {}
    queue = deque(sorted(teleport_weights))
    for node in queue:
        index.setdefault(node, len(index))
    while queue:
        node = queue.popleft()
        for neighbour, _ in capped.get(node, ()):
            if neighbour not in index:
                index[neighbour] = len(index)
                queue.append(neighbour)

    size = len(index)
    teleport = np.zeros(size)
    for node, weight in teleport_weights.items():
        teleport[index[node]] = weight / total_seed
    sources, targets, shares = [], [], []
    dangling = np.ones(size, dtype=bool)
    for node, position in index.items():
        out = capped.get(node, [])
        out_total = sum(weight for _, weight in out)
        if out_total <= 0.0:
            continue
        dangling[position] = False
        for neighbour, weight in out:
            sources.append(position)
            targets.append(index[neighbour])
            shares.append(weight / out_total)
    src = np.asarray(sources, dtype=np.intp)
    dst = np.asarray(targets, dtype=np.intp)
    share = np.asarray(shares, dtype=float)

    rank = teleport.copy()
    for _ in range(max(max_iter, 0)):
        walked = np.bincount(dst, weights=rank[src] * share, minlength=size)
        lost = rank[dangling].sum()
        updated = (1.0 - damping) * teleport + damping * (walked + lost * teleport)
        change = float(np.abs(updated - rank).sum())
        rank = updated
        if change < tol:
            break
    return {node: float(rank[pos]) for node, pos in index.items() if rank[pos] > 0.0}


def best_paths(
    edges: Sequence[Edge],
    seeds: Iterable[str],
    targets: Iterable[str],
    max_depth: int = 3,
) -> dict[str, tuple[str, ...]]:
    """For each reachable target, one shortest path from some seed (BFS).

    Paths include both ends, e.g. ``("e:1", "e:7", "m:42")``; a target that is
    itself a seed gets ``(target,)``. Targets further than ``max_depth`` edges
    from every seed are left out. Ties go to the lexicographically smaller
    neighbour, so the same graph always gives the same paths.
    """
    adjacency = _adjacency(edges)
    wanted = set(targets)
    parent: dict[str, str | None] = {}
    frontier = sorted(set(seeds))
    for seed in frontier:
        parent[seed] = None
    depth = 0
    while frontier and depth < max_depth and not wanted.issubset(parent):
        depth += 1
        next_frontier = []
        for node in frontier:
            for neighbour in sorted(adjacency.get(node, ())):
                if neighbour not in parent:
                    parent[neighbour] = node
                    next_frontier.append(neighbour)
        frontier = next_frontier
    paths = {}
    for target in wanted:
        if target not in parent:
            continue
        path = [target]
        step = parent[target]
        while step is not None:
            path.append(step)
            step = parent[step]
        paths[target] = tuple(reversed(path))
    return paths
