def test_agent_writes_messages_and_lists_them_back(as_persona, world):
    client = as_persona("agent_a")
    r = client.post("/api/v1/sessions", {"external_id": "run-1"}, format="json")
    assert r.status_code == 201, r.content
    sid = r.json()["id"]
    r = client.post(
        f"/api/v1/sessions/{sid}/messages",
        {"messages": [{"content": "Caroline went to Boston", "speaker": "Caroline"}]},
        format="json",
    )
    assert r.status_code == 201, r.content
    r = client.get(f"/api/v1/sessions/{sid}/messages")
    assert [m["content"] for m in r.json()["results"]] == ["Caroline went to Boston"]
