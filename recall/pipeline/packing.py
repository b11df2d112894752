"""Packing ranked memories into a token budget, and exact token counting."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import bpe_openai

OmitReason = Literal[
    "limit", "budget", "covered_by_digest", "digest_overlaps_rows", "duplicate"
]


@dataclass(frozen=True, slots=True)
class PackInput:
    """A ranked memory offered to the packer; ``covers`` is non-empty for digests."""

    memory_id: int
    content: str
    covers: frozenset[int] = frozenset()


@dataclass(frozen=True, slots=True)
class PackedItem:
    """A memory that made it into the pack.

    ``position`` is its 0-based index in the pack, ``rank`` its 1-based place in
    the packer's input, and ``reason`` a short human-readable "why packed".
    """

    memory_id: int
    tokens: int
    position: int
    reason: str
    rank: int = 0


@dataclass(frozen=True, slots=True)
class Omitted:
    """A memory left out of the pack, with why and its exact token count."""

    memory_id: int
    reason: OmitReason
    tokens: int


@dataclass(frozen=True, slots=True)
class PackResult:
    """The packed memories in rank order, the omitted ones, and the tokens used."""

    packed: tuple[PackedItem, ...]
    omitted: tuple[Omitted, ...]
    total_tokens: int


def head_size(limit: int) -> int:
    """How many of the ranking's top rows the packer reads (MMR and the relevance
    gate may drop some, so it reads past ``limit``)."""
    return max(limit * 3, 30)


def pack_to_budget(
    items: Sequence[PackInput],
    *,
    budget_tokens: int,
    limit: int,
    count_tokens: Callable[[str], int],
) -> PackResult:
    """Add ``items`` in rank order while they fit ``budget_tokens`` and ``limit``.

    An item too large for the remaining budget is omitted ("budget") but the walk
    goes on, so a later, smaller item may still fit. Once ``limit`` items are
    packed the rest are omitted ("limit"). A topic digest and a row it covers are
    never both packed: whichever comes first in rank order (and fits) wins, and
    the other is omitted as "covered_by_digest" or "digest_overlaps_rows". A
    repeated memory id is omitted as "duplicate". ``total_tokens`` never exceeds
    the budget.
    """
    if budget_tokens < 0:
        raise ValueError("budget_tokens must be >= 0")
    packed: list[PackedItem] = []
    omitted: list[Omitted] = []
    packed_ids: set[int] = set()
    covered_by_packed: set[int] = set()
    seen: set[int] = set()
    used = 0
    for rank, item in enumerate(items, start=1):
        tokens = count_tokens(item.content)
        if tokens < 0:
            raise ValueError("count_tokens returned a negative count")
        reason: OmitReason | None = None
        if item.memory_id in seen:
            reason = "duplicate"
        elif len(packed) >= limit:
            reason = "limit"
        elif item.memory_id in covered_by_packed:
            reason = "covered_by_digest"
        elif not item.covers.isdisjoint(packed_ids):
            reason = "digest_overlaps_rows"
        elif tokens > budget_tokens - used:
            reason = "budget"
        seen.add(item.memory_id)
        if reason is not None:
            omitted.append(Omitted(item.memory_id, reason, tokens))
            continue
        packed.append(
            PackedItem(
                memory_id=item.memory_id,
                tokens=tokens,
                position=len(packed),
                reason=(
                    f"rank {rank}: {tokens} tokens fit in the "
                    f"{budget_tokens - used} left of {budget_tokens}"
                ),
                rank=rank,
            )
        )
        used += tokens
        packed_ids.add(item.memory_id)
        covered_by_packed.update(item.covers)
    return PackResult(packed=tuple(packed), omitted=tuple(omitted), total_tokens=used)


# At most ~4096 x 2,000 characters (~8 MB of text) held per counter.
TOKEN_CACHE_SIZE = 4096
TOKEN_CACHE_MAX_CHARS = 2000


@functools.lru_cache(maxsize=8)
def _encoding(name: str) -> bpe_openai.Encoding:
    with warnings.catch_warnings():
        # bpe_openai builds its tables at import time through a deprecated
        # importlib.resources call; importing lazily also keeps that cost (about
        # half a second) off processes that never count tokens.
        warnings.simplefilter("ignore", DeprecationWarning)
        import bpe_openai

        return bpe_openai.get_encoding(name)


def make_token_counter(encoding: str = "cl100k_base") -> Callable[[str], int]:
    """Return an exact token counter for a tiktoken-compatible ``encoding``.

    Text is counted as ordinary text: a memory that happens to contain a special
    token marker such as ``<|endoftext|>`` is counted, not rejected. The encoding
    is loaded once per process and shared.

    Counts of texts up to ``TOKEN_CACHE_MAX_CHARS`` are remembered (bounded LRU):
    a recall counts each packed row twice and the same rows recur across recalls,
    and a stored row's content never changes (corrections supersede).
    """
    enc = _encoding(encoding)

    @functools.lru_cache(maxsize=TOKEN_CACHE_SIZE)
    def cached(text: str) -> int:
        return len(enc.encode_ordinary(text))

    def count_tokens(text: str) -> int:
        if len(text) <= TOKEN_CACHE_MAX_CHARS:
            return cached(text)
        return len(enc.encode_ordinary(text))

    count_tokens.cache_info = cached.cache_info  # type: ignore[attr-defined]
    return count_tokens
