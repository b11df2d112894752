"""Server-side layout of an entity's neighbourhood as SVG coordinates (no JS library).

Pure Python on plain values: the centre entity sits in the middle, neighbours on a
circle in a stable order, each edge labelled at its midpoint. The template draws it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

WIDTH = 640
HEIGHT = 420
RADIUS = 160
MAX_NEIGHBOURS = 12


@dataclass(frozen=True)
class Node:
    key: str
    label: str
    x: float
    y: float
    href: str = ""
    centre: bool = False


@dataclass(frozen=True)
class Edge:
    x1: float
    y1: float
    x2: float
    y2: float
    label: str
    lx: float
    ly: float
    dashed: bool = False


@dataclass(frozen=True)
class Neighbour:
    """An input: a node next to the centre and the label of the edge to it."""

    key: str
    label: str
    edge_label: str
    href: str = ""
    outgoing: bool = True
    dashed: bool = False


@dataclass(frozen=True)
class Graph:
    width: int
    height: int
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]

    @property
    def view_box(self) -> str:
        return f"0 0 {self.width} {self.height}"


def radial_layout(centre_label: str, neighbours: list[Neighbour]) -> Graph:
    """Place ``neighbours`` evenly around the centre; edges to one node merge."""
    cx, cy = WIDTH / 2, HEIGHT / 2
    labels: dict[str, list[str]] = {}
    first: dict[str, Neighbour] = {}
    for n in neighbours:
        if n.key not in first and len(first) >= MAX_NEIGHBOURS:
            continue
        first.setdefault(n.key, n)
        labels.setdefault(n.key, [])
        if n.edge_label not in labels[n.key]:
            labels[n.key].append(n.edge_label)
    nodes = [Node("centre", centre_label, cx, cy, centre=True)]
    edges = []
    count = max(len(first), 1)
    for i, (key, n) in enumerate(first.items()):
        angle = -math.pi / 2 + 2 * math.pi * i / count
        x = round(cx + RADIUS * math.cos(angle), 1)
        y = round(cy + RADIUS * math.sin(angle), 1)
        nodes.append(Node(key, n.label, x, y, href=n.href))
        label = ", ".join(labels[key])
        if len(label) > 40:
            label = label[:39] + "…"
        edges.append(
            Edge(
                cx,
                cy,
                x,
                y,
                label,
                round((cx + x) / 2, 1),
                round((cy + y) / 2 - 4, 1),
                dashed=n.dashed,
            )
        )
    return Graph(WIDTH, HEIGHT, tuple(nodes), tuple(edges))


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    y: float
    width: float
    text: str


def bar_chart(
    values: dict[str, float], *, width: int = 420, row: int = 26
) -> list[Bar]:
    """Horizontal bars scaled to the largest value (for channel contributions)."""
    top = max(values.values(), default=0.0) or 1.0
    return [
        Bar(label, value, i * row, round(width * value / top, 1), f"{value:.4f}")
        for i, (label, value) in enumerate(
            sorted(values.items(), key=lambda kv: -kv[1])
        )
    ]
