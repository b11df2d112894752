"""Write API: happy paths, every bad-input case, idempotency, atomicity, append-only."""

from __future__ import annotations

import pytest

from memory.models import Memory, Session
from tests.conftest import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent(world):
    return client_for(world, "agent_a")


@pytest.fixture
def session_id(agent):
    return agent.post("/api/v1/sessions", {"external_id": "s1"}, format="json").json()[
        "id"
    ]


def post_messages(client, sid, messages, **headers):
    return client.post(
        f"/api/v1/sessions/{sid}/messages",
        {"messages": messages},
        format="json",
        **headers,
    )


def test_messages_are_written_in_order_with_seq_and_sha(agent, session_id):
    r = post_messages(
        agent,
        session_id,
        [
            {
                "content": "first",
                "speaker": "Ann",
                "occurred_at": "2023-05-08T13:56:00Z",
                "external_ref": "D1:1",
            },
            {"content": "second", "role": "assistant"},
        ],
    )
    assert r.status_code == 201, r.content
    body = r.json()
    assert [i["seq"] for i in body["items"]] == [0, 1]
    assert body["items"][0]["occurred_at"] == "2023-05-08T13:56:00Z"
    assert body["items"][0]["external_ref"] == "D1:1"
    assert len(body["items"][0]["content_sha256"]) == 64
    assert all(i["untrusted"] for i in body["items"])


def test_a_written_message_is_lexically_searchable_at_once(agent, session_id):
    post_messages(agent, session_id, [{"content": "The zebra escaped from the zoo"}])
    r = agent.get("/api/v1/memories", {"q": "zebra"})
    assert [m["content"] for m in r.json()["results"]] == [
        "The zebra escaped from the zoo"
    ]


def test_exact_duplicates_in_a_session_are_reported_not_dropped(agent, session_id):
    post_messages(agent, session_id, [{"content": "same words"}])
    r = post_messages(
        agent, session_id, [{"content": "same words"}, {"content": "same words"}]
    )
    body = r.json()
    assert len(body["items"]) == 2
    assert [d["index"] for d in body["duplicates"]] == [0, 1]
    assert Memory.objects.filter(content="same words").count() == 3


@pytest.mark.parametrize(
    ("message", "field"),
    [
        ({"content": ""}, "messages[0].content"),
        ({"content": "x" * (32 * 1024 + 1)}, "messages[0].content"),
        ({"content": "ok", "occurred_at": "not a date"}, "messages[0].occurred_at"),
        ({"content": "ok", "kind": "fact"}, "messages[0].kind"),
        ({"content": "ok", "role": "robot"}, "messages[0].role"),
    ],
)
def test_bad_messages_get_a_400_naming_the_field(agent, session_id, message, field):
    r = post_messages(agent, session_id, [{"content": "good"}, message][1:])
    assert r.status_code == 400, r.content
    assert r.json()["field"] == field
    assert r.json()["error"]


def test_a_bad_item_anywhere_in_a_batch_writes_nothing(agent, session_id):
    r = post_messages(agent, session_id, [{"content": "fine"}] * 3 + [{"content": ""}])
    assert r.status_code == 400
    assert r.json()["field"] == "messages[3].content"
    assert Memory.objects.count() == 0


def test_more_items_than_the_batch_limit_is_a_400(agent, session_id, settings):
    settings.MNEMO_MAX_BATCH = 3
    r = post_messages(agent, session_id, [{"content": f"m{i}"} for i in range(4)])
    assert r.status_code == 400
    assert r.json()["field"] == "messages"
    assert "limit" in r.json()["error"]


def test_unknown_tier_and_mismatched_kind_are_rejected(agent):
    r = agent.post(
        "/api/v1/memories",
        {"memories": [{"tier": "cosmic", "kind": "fact", "content": "x"}]},
        format="json",
    )
    assert r.status_code == 400 and r.json()["field"] == "memories[0].tier"
    r = agent.post(
        "/api/v1/memories",
        {"memories": [{"tier": "semantic", "kind": "episode", "content": "x"}]},
        format="json",
    )
    assert r.status_code == 400 and r.json()["field"] == "memories[0].kind"


def test_a_session_of_another_org_is_a_404_like_a_missing_one(world, session_id):
    other = client_for(world, "agent_globex")
    a = post_messages(other, session_id, [{"content": "hi"}])
    b = post_messages(other, 987654321, [{"content": "hi"}])
    assert a.status_code == b.status_code == 404
    assert a.json() == b.json()
    assert Memory.objects.count() == 0


def test_idempotency_key_replays_the_first_response(agent, session_id):
    msgs = [{"content": "only once"}]
    first = post_messages(agent, session_id, msgs, HTTP_IDEMPOTENCY_KEY="k1")
    again = post_messages(agent, session_id, msgs, HTTP_IDEMPOTENCY_KEY="k1")
    assert first.status_code == again.status_code == 201
    assert first.json() == again.json()
    assert again.headers["Idempotent-Replayed"] == "true"
    assert Memory.objects.filter(content="only once").count() == 1


def test_idempotency_key_with_a_different_body_is_422(agent, session_id):
    post_messages(agent, session_id, [{"content": "a"}], HTTP_IDEMPOTENCY_KEY="k2")
    r = post_messages(agent, session_id, [{"content": "b"}], HTTP_IDEMPOTENCY_KEY="k2")
    assert r.status_code == 422
    assert Memory.objects.filter(content="b").count() == 0


def test_idempotency_keys_are_scoped_to_the_principal(world, session_id):
    alice = client_for(world, "alice")
    agent = client_for(world, "agent_a")
    body = {
        "memories": [
            {"tier": "semantic", "kind": "fact", "content": "f", "visibility": "org"}
        ]
    }
    assert (
        agent.post(
            "/api/v1/memories", body, format="json", HTTP_IDEMPOTENCY_KEY="shared"
        ).status_code
        == 201
    )
    r = alice.post(
        "/api/v1/memories", body, format="json", HTTP_IDEMPOTENCY_KEY="shared"
    )
    assert r.status_code == 201
    assert "Idempotent-Replayed" not in r.headers
    assert Memory.objects.filter(content="f").count() == 2


def test_a_failed_request_does_not_burn_its_idempotency_key(agent, session_id):
    bad = post_messages(agent, session_id, [{"content": ""}], HTTP_IDEMPOTENCY_KEY="k3")
    assert bad.status_code == 400
    good = post_messages(
        agent, session_id, [{"content": ""}], HTTP_IDEMPOTENCY_KEY="k3"
    )
    assert good.status_code == 400  # same body, evaluated again, not replayed as 422


def test_supersede_writes_a_new_version_and_keeps_the_old(agent):
    old = agent.post(
        "/api/v1/memories",
        {
            "memories": [
                {"tier": "semantic", "kind": "fact", "content": "Ann lives in Oslo"}
            ]
        },
        format="json",
    ).json()["items"][0]
    r = agent.post(
        f"/api/v1/memories/{old['id']}/supersede",
        {"content": "Ann lives in Lisbon", "reason": "moved"},
        format="json",
    )
    assert r.status_code == 201, r.content
    new = r.json()
    before = agent.get(f"/api/v1/memories/{old['id']}").json()
    assert before["status"] == "superseded"
    assert before["superseded_by_id"] == new["id"]
    assert before["content"] == "Ann lives in Oslo"
    current = agent.get("/api/v1/memories", {"tier": "semantic"}).json()["results"]
    assert [m["content"] for m in current] == ["Ann lives in Lisbon"]
    again = agent.post(
        f"/api/v1/memories/{old['id']}/supersede", {"content": "x"}, format="json"
    )
    assert again.status_code == 409


def test_retract_hides_a_row_from_current_views_but_keeps_it(agent):
    row = agent.post(
        "/api/v1/memories",
        {"memories": [{"tier": "semantic", "kind": "fact", "content": "wrong fact"}]},
        format="json",
    ).json()["items"][0]
    r = agent.post(
        f"/api/v1/memories/{row['id']}/retract", {"reason": "typo"}, format="json"
    )
    assert r.status_code == 200 and r.json()["status"] == "retracted"
    assert agent.get("/api/v1/memories").json()["results"] == []
    kept = agent.get("/api/v1/memories", {"status": "any"}).json()["results"]
    assert [m["content"] for m in kept] == ["wrong fact"]


def test_there_is_no_update_or_delete_of_content(agent):
    row = agent.post(
        "/api/v1/memories",
        {"memories": [{"tier": "semantic", "kind": "fact", "content": "stays"}]},
        format="json",
    ).json()["items"][0]
    assert (
        agent.put(
            f"/api/v1/memories/{row['id']}", {"content": "x"}, format="json"
        ).status_code
        == 405
    )
    assert (
        agent.patch(
            f"/api/v1/memories/{row['id']}", {"content": "x"}, format="json"
        ).status_code
        == 405
    )
    assert agent.delete(f"/api/v1/memories/{row['id']}").status_code == 405
    assert Memory.objects.get(pk=row["id"]).content == "stays"


def test_sessions_list_shows_only_visible_sessions(world, session_id):
    assert [
        s["id"]
        for s in client_for(world, "agent_a").get("/api/v1/sessions").json()["results"]
    ] == [session_id]
    assert client_for(world, "carol").get("/api/v1/sessions").json()["results"] == []
    assert Session.objects.count() == 1


def test_duplicate_session_external_id_is_409(agent, session_id):
    r = agent.post("/api/v1/sessions", {"external_id": "s1"}, format="json")
    assert r.status_code == 409


def test_memory_filters_by_tier_kind_session_time_and_entity(
    agent, session_id, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        post_messages(
            agent,
            session_id,
            [
                {
                    "content": "Ann flew to Kyoto",
                    "speaker": "Ann",
                    "occurred_at": "2023-01-01T00:00:00Z",
                },
                {
                    "content": "Bob stayed home",
                    "speaker": "Bob",
                    "occurred_at": "2023-03-01T00:00:00Z",
                },
            ],
        )
    agent.post(
        "/api/v1/memories",
        {
            "memories": [
                {"tier": "procedural", "kind": "rule", "content": "Always test"}
            ]
        },
        format="json",
    )

    def get(**q):
        return [
            m["content"] for m in agent.get("/api/v1/memories", q).json()["results"]
        ]

    assert get(tier="procedural") == ["Always test"]
    assert get(kind="message", session=session_id) == [
        "Bob stayed home",
        "Ann flew to Kyoto",
    ]
    assert get(occurred_after="2023-02-01T00:00:00Z", kind="message") == [
        "Bob stayed home"
    ]
    assert get(entity="kyoto", kind="message") == ["Ann flew to Kyoto"]
    r = agent.get("/api/v1/memories", {"occurred_after": "yesterday-ish"})
    assert r.status_code == 400 and r.json()["field"] == "occurred_after"


def test_cursor_pagination_walks_every_row_once(agent, session_id):
    post_messages(agent, session_id, [{"content": f"m{i}"} for i in range(7)])
    seen, url = [], "/api/v1/memories?page_size=3"
    while url:
        page = agent.get(url).json()
        seen += [m["content"] for m in page["results"]]
        url = page["next"]
    assert sorted(seen) == sorted(f"m{i}" for i in range(7))


def test_a_long_run_of_capitalised_words_is_not_taken_for_a_name():
    from memory.entities import find_spans

    headline = " ".join(["Word"] * 80)
    assert find_spans(headline) == []
    names = [s.normalized for s in find_spans(f"{headline}. Later, Caroline left.")]
    assert names == ["caroline"]


def test_memory_out_builds_its_fields_once_and_writes_what_a_model_serializer_would(
    agent, session_id
):
    """MemoryOut keeps its built fields per class (BuiltOnceFieldsMixin): the output
    is a plain ModelSerializer's, and every instance binds fields of its own."""
    import copy

    from rest_framework import serializers

    from memory.api.serializers import _BUILT_FIELDS, MemoryOut

    post_messages(
        agent,
        session_id,
        [{"content": "first", "speaker": "Ann", "occurred_at": "2023-05-08T13:56Z"}],
    )
    post_messages(agent, session_id, [{"content": "second", "role": "assistant"}])
    rows = list(Memory.objects.filter(session_id=session_id).order_by("seq"))
    plain = type(
        "PlainMemoryOut",
        (serializers.ModelSerializer,),
        {
            **{n: copy.deepcopy(f) for n, f in MemoryOut._declared_fields.items()},
            "Meta": MemoryOut.Meta,
            "get_untrusted": MemoryOut.get_untrusted,
        },
    )
    for _ in range(2):  # the second time from the kept fields
        assert MemoryOut(rows, many=True).data == plain(rows, many=True).data
        assert [MemoryOut(m).data for m in rows] == [plain(m).data for m in rows]
    assert MemoryOut in _BUILT_FIELDS
    one, two = MemoryOut(rows[0]), MemoryOut(rows[1])
    assert one.fields["content"] is not two.fields["content"]
    assert one.fields["content"].parent is one and two.fields["content"].parent is two
    assert one.data["content"] == "first" and two.data["content"] == "second"


def test_the_duplicate_check_looks_hashes_up_in_the_session_index(agent, session_id):
    """A write's duplicate check reads (session, content hash) entries, not every row
    of the session: with 2,000 rows in it the old plan tested each one."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    first = post_messages(agent, session_id, [{"content": "seed"}]).json()["items"][0]
    seed = Memory.objects.get(pk=first["id"])
    fields = {
        f.attname: getattr(seed, f.attname)
        for f in Memory._meta.concrete_fields
        if not f.primary_key and not getattr(f, "generated", False)
    }
    Memory.objects.bulk_create(
        Memory(**{**fields, "seq": 1000 + i, "content_sha256": f"{i:064x}"})
        for i in range(2000)
    )
    with connection.cursor() as c:
        c.execute("ANALYZE memory_memory")
    with CaptureQueriesContext(connection) as ctx:
        r = post_messages(agent, session_id, [{"content": "seed"}, {"content": "new"}])
    assert r.status_code == 201 and [d["index"] for d in r.json()["duplicates"]] == [0]
    sql = [q["sql"] for q in ctx.captured_queries]
    check = [q for q in sql if '"content_sha256" IN' in q]
    assert len(check) == 1
    with connection.cursor() as c:
        c.execute("EXPLAIN " + check[0])
        plan = "\n".join(row[0] for row in c.fetchall())
    assert "memory_session_sha" in plan, plan


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_of_one_session_get_distinct_contiguous_seqs(
    world, live_server
):
    """The session row's lock (``_lock_next_seq``) serialises seq numbers: eight
    clients writing into one session at once get every number once, each batch in
    one run."""
    import json
    import threading
    import urllib.request

    headers = {
        "Authorization": f"Bearer {world.agent_a_key}",
        "Content-Type": "application/json",
    }

    def call(path, body):
        request = urllib.request.Request(
            live_server.url + path,
            data=json.dumps(body).encode(),
            method="POST",
            headers=headers,
        )
        with urllib.request.urlopen(request, timeout=60) as resp:  # noqa: S310
            return resp.status, json.loads(resp.read())

    status, session = call("/api/v1/sessions", {"external_id": "race"})
    assert status == 201
    batches: list[list[int]] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def writer(n):
        try:
            barrier.wait(timeout=30)
            for k in range(5):
                status, body = call(
                    f"/api/v1/sessions/{session['id']}/messages",
                    {"messages": [{"content": f"w{n} b{k} m{i}"} for i in range(5)]},
                )
                assert status == 201
                batches.append([item["seq"] for item in body["items"]])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert sorted(s for b in batches for s in b) == list(range(200))
    assert all(b == list(range(b[0], b[0] + 5)) for b in batches)
    stored = Session.objects.get(pk=session["id"])
    assert stored.next_seq == 200
    seqs = Memory.objects.filter(session=stored, kind="message").values_list(
        "seq", flat=True
    )
    assert sorted(seqs) == list(range(200))
