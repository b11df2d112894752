"""Row vectors for the benchmark corpus: the real model, or a documented fast path.

Embedding 1M rows with MiniLM on 2 cores takes ~1.5 h, so large corpora embed a subset
of rows with the real model and the rest with a fast path built from the same model:
every vocabulary word and entity name is embedded once with the real model, and a row's
vector is the unit-normalised mean of its words' vectors. Vectors therefore live in the
model's own space (real queries find rows about the same words), and the HNSW index sees
a realistic, clustered distribution. docs/benchmarks.md says which rows were real.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np

from memory import embeddings

_WORD = re.compile(r"[A-Za-z]+")


class WordVectors:
    """Real-model vectors for a fixed vocabulary, cached on disk between runs."""

    def __init__(self, words: list[str], cache_dir: Path) -> None:
        self.words = sorted(set(words))
        self.index = {w.lower(): i for i, w in enumerate(self.words)}
        digest = hashlib.sha256("\n".join(self.words).encode()).hexdigest()[:16]
        path = cache_dir / f"wordvec-{digest}.npy"
        if path.exists():
            self.matrix = np.load(path)
        else:
            cache_dir.mkdir(parents=True, exist_ok=True)
            self.matrix = embeddings.embed_texts(self.words, batch_size=256)
            np.save(path, self.matrix)

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit-normalised mean of the known words' vectors, one row per text."""
        out = np.zeros((len(texts), self.matrix.shape[1]), dtype=np.float32)
        for row, text in enumerate(texts):
            ids = [
                self.index[w]
                for w in (m.lower() for m in _WORD.findall(text))
                if w in self.index
            ]
            if ids:
                out[row] = self.matrix[ids].mean(axis=0)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return out / norms


def real_subset(n_rows: int, n_real: int) -> set[int]:
    """Positions (0-based) of the rows embedded with the real model: evenly spread."""
    if n_real >= n_rows:
        return set(range(n_rows))
    if n_real <= 0:
        return set()
    step = n_rows / n_real
    return {int(i * step) for i in range(n_real)}


def to_pgvector(vec: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.5f}" for x in vec.tolist()) + "]"
