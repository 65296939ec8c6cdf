"""Composite strategies through the real gateway (spec 03 §6-7, §10 examples 17-20)."""

from __future__ import annotations

import time

import orjson
import pytest

pytestmark = pytest.mark.integration
MESSAGES = [{"role": "user", "content": "hi"}]
TOOLS = [{"type": "function", "function": {"name": "ls", "parameters": {}}}]


@pytest.fixture(scope="module")
def composites(gateway):
    result = gateway.apply("""
combos:
  - name: panel
    strategy: fusion
    targets: [{model: pa/m1}, {model: pb/m2}, {model: pc/m3}]
  - name: quick-panel
    strategy: fusion
    config: {fusionTuning: {stragglerGraceMs: 300, panelHardTimeoutMs: 1000}}
    targets: [{model: pa/m1}, {model: pb/m2}, {model: pc/m3}]
  - name: relay
    strategy: pipeline
    config: {stagePrompts: ["summarise", "translate"]}
    targets: [{model: pb/m2}, {model: pc/m3}]
""")
    assert result.returncode == 0, result.stderr
    return gateway


def _by_model(upstream) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for record in upstream.requests():
        found.setdefault(record["model"], []).append(record["body"])
    return found


def _sse(text: str) -> list[dict]:
    return [
        orjson.loads(line[6:])
        for line in text.splitlines()
        if line.startswith("data: ") and line != "data: [DONE]"
    ]


def _last_attempts(gateway, count: int) -> list:
    """The attempt rows of the latest request, once ``count`` of them are written."""
    deadline = time.monotonic() + 3
    while True:
        requests = gateway.requests_log()
        rows = gateway.attempts_log(requests[-1]["id"]) if requests else []
        if len(rows) >= count or time.monotonic() > deadline:
            return rows
        time.sleep(0.05)


# --- pipeline (example 20) ------------------------------------------------------------


def test_pipeline_feeds_each_stage_the_previous_answer(composites, client, upstream):
    upstream.add("m2", content="a summary")
    upstream.add("m3", content="une traduction")
    response = client.post(
        "/v1/chat/completions",
        json={"model": "relay", "messages": MESSAGES, "tools": TOOLS},
    )
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["choices"][0]["message"]["content"] == "une traduction"
    assert data["model"] == "pc/m3"
    assert response.headers["x-omniroute-attempts"] == "2"
    calls = _by_model(upstream)
    [first], [second] = calls["m2"], calls["m3"]
    assert first["messages"] == [{"role": "system", "content": "summarise"}, *MESSAGES]
    assert first.get("stream") in (False, None)
    assert "tools" not in first
    assert second["system"] in ("translate", [{"type": "text", "text": "translate"}])
    assert [m["role"] for m in second["messages"]] == ["user"]
    assert "a summary" in orjson.dumps(second["messages"]).decode()
    assert "tools" in second  # the last stage keeps the client's tools
    usage = data["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    rows = _last_attempts(composites, 2)
    assert [(r["model"], r["via"], r["billable"]) for r in rows] == [
        ("m2", "relay", 1),
        ("m3", "relay", 1),
    ]


def test_pipeline_stops_at_a_failed_stage(composites, client, upstream):
    upstream.add("m2", status=500)
    response = client.post(
        "/v1/chat/completions", json={"model": "relay", "messages": MESSAGES}
    )
    assert response.status_code == 502
    error = response.json()["error"]
    assert [
        (a["model"], a["via"], a["reason"], a["calls"]) for a in error["attempts"]
    ] == [("pb/m2", "relay", "server_error", 1)]
    assert "m3" not in _by_model(upstream)


def test_pipeline_streams_the_last_stage(composites, client, upstream):
    upstream.add("m2", content="a summary")
    upstream.add("m3", content="final words")
    response = client.post(
        "/v1/chat/completions",
        json={"model": "relay", "messages": MESSAGES, "stream": True},
    )
    assert response.status_code == 200
    chunks = _sse(response.text)
    text = "".join(
        c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]
    )
    assert text == "final words"
    assert chunks[-1]["omniroute"]["served_model"] == "pc/m3"
    calls = _by_model(upstream)
    assert calls["m2"][0].get("stream") in (False, None)
    assert calls["m3"][0]["stream"] is True


# --- fusion (examples 17-19) ----------------------------------------------------------


def test_fusion_judges_all_answers(composites, client, upstream):
    upstream.add("m1", content="answer one", times=1)
    upstream.add("m2", content="answer two")
    upstream.add("m3", content="answer three")
    response = client.post(
        "/v1/chat/completions",
        json={
            "model": "panel",
            "messages": MESSAGES,
            "tools": TOOLS,
            "tool_choice": "none",
        },
    )
    assert response.status_code == 200, response.text
    assert response.headers["x-omniroute-attempts"] == "4"
    data = response.json()
    assert data["model"] == "pa/m1"
    calls = _by_model(upstream)
    panel = [calls["m1"][0], calls["m2"][0], calls["m3"][0]]
    for body in panel:
        assert body.get("stream") in (False, None)
        assert "tools" not in body
        assert "tool_choice" not in body
    judge = calls["m1"][1]
    last = judge["messages"][-1]
    assert last["role"] == "user"
    for label in ("Source 1", "Source 2", "Source 3"):
        assert label in last["content"]
    assert "Source 4" not in last["content"]
    for name in ("m1", "m2", "m3", "pa/", "pb/", "pc/"):
        assert name not in last["content"]
    assert "answer two" in last["content"]
    usage = data["usage"]
    assert usage["prompt_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_fusion_single_answer_is_returned_without_a_judge(composites, client, upstream):
    upstream.add("m1", content="lonely answer")
    upstream.add("m2", status=500)
    upstream.add("m3", status=500)
    response = client.post(
        "/v1/chat/completions",
        json={"model": "panel", "models": ["panel", "pb/m2"], "messages": MESSAGES},
    )
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["choices"][0]["message"]["content"] == "lonely answer"
    attempts = data["omniroute"]["failover"]["attempts"]
    assert attempts[0]["model"] == "pa/m1"
    assert attempts[0]["via"] == "panel"
    assert attempts[0]["calls"] == 3
    assert attempts[0]["detail"] == "fusion_single_answer"
    assert len(_by_model(upstream)["m1"]) == 1
    served = [r for r in _last_attempts(composites, 3) if r["result"] == "success"]
    assert [r["detail"] for r in served] == ["fusion_single_answer"]  # 06 §1.2


def test_fusion_single_answer_streams(composites, client, upstream):
    upstream.add("m1", content="lonely answer")
    upstream.add("m2", status=500)
    upstream.add("m3", status=500)
    response = client.post(
        "/v1/chat/completions",
        json={"model": "panel", "messages": MESSAGES, "stream": True},
    )
    assert response.status_code == 200
    assert response.text.endswith("data: [DONE]\n\n")
    chunks = _sse(response.text)
    assert len(chunks) == 2
    assert chunks[0]["choices"][0]["delta"] == {
        "role": "assistant",
        "content": "lonely answer",
    }
    assert chunks[1]["choices"][0]["finish_reason"] == "stop"
    assert chunks[1]["omniroute"]["served_model"] == "pa/m1"


def test_fusion_panel_all_failed(composites, client, upstream):
    upstream.add("m1", status=500)
    upstream.add("m2", status=429)
    upstream.add("m3", status=500)
    response = client.post(
        "/v1/chat/completions", json={"model": "panel", "messages": MESSAGES}
    )
    assert response.status_code == 503
    error = response.json()["error"]
    assert error["code"] == "fusion_panel_failed"
    assert error["message"] == (
        "All fusion panel models failed: pa/m1=server_error, pb/m2=rate_limit, "
        "pc/m3=server_error"
    )
    assert error["attempts"][-1]["calls"] == 3


def test_fusion_with_tools_bypasses_the_panel(composites, client, upstream):
    body = {
        "model": "panel",
        "messages": MESSAGES,
        "tools": TOOLS,
        "tool_choice": "auto",
    }
    response = client.post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text
    assert response.headers["x-omniroute-attempts"] == "1"
    [call] = upstream.requests()
    assert call["model"] == "m1"
    assert call["body"]["tools"] == TOOLS
    assert call["body"]["messages"] == MESSAGES


def test_fusion_drops_a_straggler_after_the_grace(composites, client, upstream):
    upstream.add("m1", content="fast one", times=1)
    upstream.add("m2", content="fast two")
    upstream.add("m3", latency_ms=5000)
    started = time.monotonic()
    response = client.post(
        "/v1/chat/completions", json={"model": "quick-panel", "messages": MESSAGES}
    )
    elapsed = time.monotonic() - started
    assert response.status_code == 200, response.text
    assert elapsed < 2
    calls = _by_model(upstream)
    judge = calls["m1"][1]["messages"][-1]["content"]
    assert "Source 2" in judge
    assert "Source 3" not in judge
    rows = _last_attempts(composites, 4)
    assert sorted(
        (r["model"], r["reason"], r["detail"], r["billable"]) for r in rows
    ) == [
        ("m1", None, None, 1),
        ("m1", None, None, 1),
        ("m2", None, None, 1),
        ("m3", "timeout", "straggler_dropped", 0),
    ]


def test_fusion_streams_the_judge_with_summed_usage(composites, client, upstream):
    upstream.add("m1", content="answer one", times=1)
    upstream.add("m1", content="the verdict")
    response = client.post(
        "/v1/chat/completions",
        json={
            "model": "panel",
            "messages": MESSAGES,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    )
    assert response.status_code == 200
    assert response.headers["x-omniroute-attempts"] == "4"
    chunks = _sse(response.text)
    text = "".join(
        c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]
    )
    assert text == "the verdict"
    assert chunks[-1]["omniroute"]["served_model"] == "pa/m1"
    # the report rides on the usage chunk, the last one (spec 09 §7)
    [usage] = [c["usage"] for c in chunks if c.get("usage")]
    assert chunks[-1]["usage"] == usage
    rows = _last_attempts(composites, 4)
    assert usage["prompt_tokens"] == sum(r["prompt_tokens"] for r in rows)
    assert all(r["billable"] for r in rows)
    calls = _by_model(upstream)
    assert "stream_options" not in calls["m2"][0]
    assert calls["m1"][1]["stream"] is True


def test_fusion_returns_the_first_answer_when_every_judge_fails(
    composites, client, upstream
):
    upstream.add("m1", content="first answer", times=1)
    upstream.add("m1", status=500)
    upstream.add("m2", content="second answer", times=1)
    upstream.add("m2", status=500)
    upstream.add("m3", status=500)
    response = client.post(
        "/v1/chat/completions",
        json={"models": ["panel", "pb/m2"], "messages": MESSAGES},
    )
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["choices"][0]["message"]["content"] == "first answer"
    first = data["omniroute"]["failover"]["attempts"][0]
    assert (first["model"], first["detail"], first["calls"]) == (
        "pa/m1",
        "judge_failed",
        5,
    )
