"""``recall_run``: the one entry point used by REST, UI and evaluation alike."""

from __future__ import annotations

import time
from dataclasses import fields
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from psycopg.types.json import Jsonb

from accounts.principals import Principal
from config.db.prepared import lookup_rows
from memory import embeddings
from recall import channels, lanes
from recall.cascade import (
    CascadeState,
    QueryContext,
    lexical_terms,
    phase_scopes,
    probed_phases,
    run_cascade,
)
from recall.packer import PackContext, build_pack, hydrate
from recall.pipeline.intent import profile_intent
from recall.pipeline.packing import make_token_counter
from recall.pipeline.recency import rank_by_weights
from recall.scope import Scope
from recall.suggestions import communities_field, suggested_actions
from recall.types import (
    DEFAULT_WEIGHTS,
    ContextPack,
    Degradation,
    RecallRequest,
    RecallUnavailable,
)

# budget_level=high turns the graph channel on at this weight unless the request
# sets one (it re-ranks the text channels' pool; see recall/cascade.py). On LoCoMo dev
# (100 questions) 0.1 gave recall@10 0.705 / NDCG@10 0.457 against 0.650 / 0.428 at
# 0.3 and 0.691 / 0.454 without the graph (docs/recall-lanes.md).
HIGH_GRAPH_WEIGHT = 0.1


@lru_cache(maxsize=4)
def _counter(name: str) -> Any:
    return make_token_counter(name)


def count_tokens(text: str) -> int:
    return int(_counter(settings.MNEMO_TOKENIZER)(text))


def _weights(req: RecallRequest) -> dict[str, float]:
    weights = dict(DEFAULT_WEIGHTS)
    weights["recency"] = rank_by_weights(req.rank_by).get("recency", 0.0)
    if req.budget_level == "high":
        weights["graph"] = HIGH_GRAPH_WEIGHT
    for name, value in req.weights.items():
        weights[name] = float(value)
    if req.budget_level == "low":
        weights["graph"] = 0.0
    return weights


def recall_run(principal: Principal, request: RecallRequest) -> ContextPack:
    """Recall a ranked, budget-fitted context pack for ``request`` as ``principal``."""
    started = time.perf_counter()
    state = CascadeState(weights=_weights(request))
    now = timezone.now()
    reference = request.reference_time or now
    intent = state.timed(
        "intent",
        lambda: profile_intent(
            request.query,
            reference_time=reference,
            variant_styles=request.variant_styles,
        ),
    )
    base = Scope(
        principal=principal,
        tiers=("raw", "episodic", "semantic", "procedural", "topic"),
        kinds=request.kinds,
        sessions=_sessions(request),
        occurred_after=request.occurred_after,
        occurred_before=request.occurred_before,
        as_of=request.as_of,
        known_at=request.known_at,
    )
    vectors = None
    needs_vectors = state.weights.get("vector", 0) > 0 or (
        intent.window is not None and state.weights.get("temporal", 0) > 0
    )
    if needs_vectors:
        try:
            vectors = state.timed(
                "embed",
                lambda: embeddings.embed_queries([request.query]),
            )
        except embeddings.EmbedderUnavailable as exc:
            _degrade(
                state,
                request,
                Degradation(
                    "embedder_unavailable",
                    "vector",
                    f"embedding model unavailable ({exc}); vector and temporal "
                    "channels "
                    "skipped, lexical results only",
                ),
            )
    # No savepoint: a request already runs in one transaction (the RLS middleware),
    # and SAVEPOINT / RELEASE were two round trips of every recall. Nothing inside
    # raises on purpose: a strict failure is raised after the block.
    # Inside a caller's transaction the event below commits with everything read
    # here, so the probe's round trip can also make that commit asynchronous.
    telemetry_early = (
        request.record_event and not request.strict and connection.in_atomic_block
    )
    with transaction.atomic(savepoint=False):
        names = list(intent.entities) + list(request.entities or ())
        candidates = sorted(set(names) | set(intent.keywords))
        entity_ids: dict[str, int] = {}
        if request.entities:  # the entity filter narrows every scope: look up first
            channels.set_vector_search_params(ef_search=max(100, 2 * request.limit))
            entity_ids = state.timed(
                "entities", lambda: channels.find_entities(base, candidates)
            )
            wanted = [n.lower() for n in request.entities]
            ids = tuple(v for k, v in entity_ids.items() if k in wanted)
            base = Scope(**{**base.__dict__, "entity_ids": ids or (-1,)})
        # One round trip for what the recall must know about the store first: which
        # phases and overlays have eligible rows, pending embeddings, the org's
        # reinforcement weight and communities; it also sets the vector search
        # parameters and looks up the query's entities.
        scopes = phase_scopes(base, request) if request.mode != "direct" else {}
        probed = probed_phases(scopes)
        overlay_kinds = ("rule", "lesson")
        wants_pending = vectors is not None and state.weights.get("vector", 0) > 0
        probe = state.timed(
            "presence",
            lambda: channels.store_probe(
                [scopes[p] for p in probed]
                + [lanes.overlay_scope(base, k) for k in overlay_kinds],
                pending=base if wants_pending else None,
                config_org=principal.org_id,
                ef_search=None if request.entities else max(100, 2 * request.limit),
                entity_names=() if request.entities else candidates,
                async_commit=telemetry_early,
            ),
        )
        if probe.entities is not None:
            entity_ids = probe.entities
        failure = None
        if probe.pending:
            pending = Degradation(
                "vector_pending",
                "vector",
                f"{probe.pending} eligible rows are not embedded yet; vector "
                "recall cannot see them (lexical can)",
            )
            if request.strict:
                failure = pending
            else:
                state.degradations.append(pending)
        if failure is None:
            pack = _cascade_and_pack(
                principal,
                request,
                state,
                intent,
                base,
                vectors,
                entity_ids,
                now,
                probe,
                present=dict(zip(probed, probe.present, strict=False)),
                overlays=dict(
                    zip(overlay_kinds, probe.present[len(probed) :], strict=True)
                ),
            )
    if failure is not None:
        raise RecallUnavailable(failure)
    state.timings["total"] = (time.perf_counter() - started) * 1000
    pack.intent = {
        "entities": list(intent.entities),
        "matched_entities": sorted(entity_ids),
        "window": None
        if intent.window is None
        else {
            "start": intent.window.start.isoformat(),
            "end": intent.window.end.isoformat(),
            "granularity": intent.window.granularity,
            "phrase": intent.window.phrase,
        },
        "answer_type": intent.answer_type,
        "keywords": list(intent.keywords),
        "variants": list(intent.variants),
        "reference_time": reference.isoformat(),
    }
    pack.timings_ms = {k: round(v, 2) for k, v in state.timings.items()}
    if request.record_event:
        with transaction.atomic(savepoint=False):
            if not telemetry_early:
                _telemetry_commit()
            pack.recall_id = _record_event(principal, request, pack)
    pack.suggested_actions = suggested_actions(principal, pack)
    return pack


def _cascade_and_pack(
    principal: Principal,
    request: RecallRequest,
    state: CascadeState,
    intent: Any,
    base: Scope,
    vectors: Any,
    entity_ids: dict[str, int],
    now: Any,
    probe: channels.StoreProbe,
    *,
    present: dict[int, bool],
    overlays: dict[str, bool],
) -> ContextPack:
    """The cascade and the packer, inside the recall's transaction."""
    ctx = QueryContext(
        request,
        intent,
        vectors,
        entity_ids,
        now,
        speakers=_query_speakers(base, intent),
        reinforcement_weight=probe.reinforcement_weight,
        present=present if request.mode != "direct" else None,
    )
    run_cascade(base, ctx, state, lambda ids: _describe(principal, ids, state))
    pc = PackContext(
        base=base,
        query_vector=vectors[0] if vectors is not None else None,
        # The speaker names a query asks about are not lexical terms anywhere
        # (channels, overlays, relevance gate): see recall.cascade.lexical_terms.
        keywords=tuple(lexical_terms(ctx)) or (request.query,),
        vector_window=vectors is not None,
        count_tokens=count_tokens,
        overlays=overlays,
        answer_type=intent.answer_type,
    )
    pack = state.timed("pack", lambda: build_pack(principal, request, state, pc))
    pack.communities = (
        state.timed(
            "communities",
            lambda: communities_field(
                base, request, intent, entity_ids, pack, state, count_tokens
            ),
        )
        if probe.communities
        else []
    )
    pack.degradations = [d.as_dict() for d in state.degradations]
    return pack


def _query_speakers(base: Scope, intent: Any) -> frozenset[str]:
    """Speakers of the org's rows that the query names (lower-cased)."""
    named = {e.lower() for e in intent.entities}
    if not named:
        return frozenset()
    return frozenset(named & channels.known_speakers(base))


def _telemetry_commit() -> None:
    """Commit this transaction without waiting for its WAL flush, if it has written
    nothing yet: a recall writes only its ``RecallEvent`` (telemetry), and a disk
    flush on every read request put fsync stalls into recall latency (measured in
    docs/benchmarks.md, session 9). A crash can lose the last fraction of a second of
    recall events, never a memory: a transaction that already wrote anything else
    keeps the server's setting. Anything written after this in the same transaction
    commits asynchronously too: a caller that writes more calls :func:`durable_commit`
    (the playground's audit does). Inside a caller's transaction a non-strict recall
    has the store probe do this instead (one round trip fewer).
    """
    with connection.cursor() as c:
        c.execute(
            "SELECT set_config('synchronous_commit', 'off', true) "
            "WHERE pg_current_xact_id_if_assigned() IS NULL"
        )


def durable_commit() -> None:
    """Give this transaction's commit the server's durability setting back."""
    with connection.cursor() as c:
        c.execute("SET LOCAL synchronous_commit TO DEFAULT")


def _degrade(state: CascadeState, request: RecallRequest, d: Degradation) -> None:
    if request.strict:
        raise RecallUnavailable(d)
    state.degradations.append(d)


def _sessions(request: RecallRequest) -> tuple[int, ...] | None:
    """``prefer_current_session`` restricts evidence to the current session."""
    if request.prefer_current_session and request.session is not None:
        return (request.session,)
    return request.sessions


# The recall's one write, as one prepared statement: the ORM's create (model, save
# pipeline, insert compiler) cost more than the insert itself on every recall
# (docs/benchmarks.md, session 29). Same columns and JSON as RecallEvent's fields.
_EVENT_SQL = (
    "INSERT INTO recall_recallevent (org_id, principal, query, params, item_ids, "
    "omitted_ids, phase_reached, coverage, timings_ms, total_tokens, degradations, "
    "created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id"
)


def _record_event(
    principal: Principal, request: RecallRequest, pack: ContextPack
) -> int:
    """Store the recall's ``RecallEvent``; its id."""
    rows = lookup_rows(
        _EVENT_SQL,
        [
            principal.owner_org_id,
            principal.label,
            request.query,
            Jsonb(_params(request)),
            Jsonb([i.id for i in pack.items]),
            Jsonb([o["id"] for o in pack.omitted]),
            pack.phase_reached,
            Jsonb(pack.coverage),
            Jsonb(pack.timings_ms),
            pack.total_tokens,
            Jsonb(pack.degradations),
            timezone.now(),
        ],
    )
    return int(rows[0][0])


def _params(request: RecallRequest) -> dict[str, Any]:
    out = {}
    for key, value in ((f.name, getattr(request, f.name)) for f in fields(request)):
        if key == "query":
            continue
        out[key] = value.isoformat() if hasattr(value, "isoformat") else value
    return out


def _describe(
    principal: Principal, ids: list[int], state: CascadeState
) -> tuple[dict[int, str], dict[int, str]]:
    rows = hydrate(principal, ids, state.rows)
    return {i: m.content for i, m in rows.items()}, {i: m.tier for i, m in rows.items()}
