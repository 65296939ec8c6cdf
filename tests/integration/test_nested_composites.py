"""A ref to a fusion or pipeline combo is one black-box unit (spec 03 §4.4)."""

from __future__ import annotations

import time

import orjson
import pytest

pytestmark = pytest.mark.integration
MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def nested(gateway):
    result = gateway.apply("""
combos:
  - name: duo
    strategy: fusion
    targets: [{model: pb/m2}, {model: pc/m3}]
  - name: duo-first
    strategy: priority
    targets: [{combo: duo}, {model: pa/m1}]
  - name: fuse-then-polish
    strategy: pipeline
    targets: [{combo: duo}, {model: pa/m1}]
  - name: two-step
    strategy: pipeline
    targets: [{model: pb/m2}, {model: pc/m3}]
  - name: mixed-panel
    strategy: fusion
    targets: [{model: pa/m1}, {combo: two-step}]
""")
    assert result.returncode == 0, result.stderr
    return gateway


def _by_model(upstream) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for record in upstream.requests():
        found.setdefault(record["model"], []).append(record["body"])
    return found


def _last_attempts(gateway, count: int) -> list:
    deadline = time.monotonic() + 3
    while True:
        requests = gateway.requests_log()
        rows = gateway.attempts_log(requests[-1]["id"]) if requests else []
        if len(rows) >= count or time.monotonic() > deadline:
            return rows
        time.sleep(0.05)


def _sse_text(text: str) -> str:
    chunks = [
        orjson.loads(line[6:])
        for line in text.splitlines()
        if line.startswith("data: ") and line != "data: [DONE]"
    ]
    return "".join(
        c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]
    )


def test_a_fusion_ref_in_a_priority_combo_runs_as_one_unit(nested, client, upstream):
    upstream.add("m2", content="two says", times=1)
    upstream.add("m3", content="three says")
    upstream.add("m2", content="the verdict")
    response = client.post(
        "/v1/chat/completions", json={"model": "duo-first", "messages": MESSAGES}
    )
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["choices"][0]["message"]["content"] == "the verdict"
    assert response.headers["x-omniroute-attempts"] == "3"
    calls = _by_model(upstream)
    assert "m1" not in calls  # the ref answered: nothing after it was called
    judge = calls["m2"][1]["messages"][-1]["content"]
    assert "two says" in judge
    assert "three says" in judge


def test_a_failed_fusion_ref_fails_over_to_the_next_target(nested, client, upstream):
    upstream.add("m2", status=500)
    upstream.add("m3", status=500)
    upstream.add("m1", content="plain answer")
    response = client.post(
        "/v1/chat/completions", json={"model": "duo-first", "messages": MESSAGES}
    )
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["choices"][0]["message"]["content"] == "plain answer"
    assert data["model"] == "pa/m1"
    assert response.headers["x-omniroute-attempts"] == "3"


def test_a_fusion_stage_feeds_the_next_pipeline_stage(nested, client, upstream):
    upstream.add("m2", content="two says", times=1)
    upstream.add("m3", content="three says")
    upstream.add("m2", content="fused summary")
    upstream.add("m1", content="polished")
    response = client.post(
        "/v1/chat/completions",
        json={"model": "fuse-then-polish", "messages": MESSAGES, "stream": True},
    )
    assert response.status_code == 200, response.text
    assert _sse_text(response.text) == "polished"
    assert response.headers["x-omniroute-attempts"] == "4"
    calls = _by_model(upstream)
    for body in (calls["m2"][0], calls["m3"][0], calls["m2"][1]):
        assert body.get("stream") in (False, None)  # the nested fusion never streams
    assert calls["m1"][0]["stream"] is True
    assert "fused summary" in orjson.dumps(calls["m1"][0]["messages"]).decode()


def test_a_pipeline_ref_is_one_panel_voice(nested, client, upstream):
    upstream.add("m1", content="one says", times=1)
    upstream.add("m2", content="draft")
    upstream.add("m3", content="pipeline says")
    upstream.add("m1", content="the verdict")
    response = client.post(
        "/v1/chat/completions", json={"model": "mixed-panel", "messages": MESSAGES}
    )
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["choices"][0]["message"]["content"] == "the verdict"
    calls = _by_model(upstream)
    judge = calls["m1"][1]["messages"][-1]["content"]
    assert "one says" in judge
    assert "pipeline says" in judge
    assert "draft" not in judge  # only the pipeline's final answer is a voice
    assert response.headers["x-omniroute-attempts"] == "4"
    usage = data["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    rows = _last_attempts(nested, 4)
    assert sorted((r["model"], r["billable"]) for r in rows) == [
        ("m1", 1),
        ("m1", 1),
        ("m2", 1),
        ("m3", 1),
    ]
    assert usage["prompt_tokens"] == sum(r["prompt_tokens"] for r in rows)
