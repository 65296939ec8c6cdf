"""Agentic pipeline orchestration through the real gateway (spec 03 §7, §10 ex. 21)."""

from __future__ import annotations

import pytest

from gateway.kernel.agentic import DECISION_PROMPT

pytestmark = pytest.mark.integration
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "list_files",
            "parameters": {"type": "object", "properties": {}},
        },
    }
]


@pytest.fixture(scope="module")
def agentic_combo(gateway):
    result = gateway.apply("""
combos:
  - name: agents
    strategy: pipeline
    config: {agenticOrchestration: {enabled: true, maxToolRounds: 8}}
    targets: [{model: pa/m1}, {model: pb/m2}]
""")
    assert result.returncode == 0, result.stderr
    return gateway


def _sent(upstream, model: str) -> list[dict]:
    return [r["body"] for r in upstream.requests() if r["model"] == model]


def test_planner_hands_the_next_step_to_the_executor(agentic_combo, client, upstream):
    upstream.add("m1", content='{"action": "tools", "instructions": "list files"}')
    upstream.add("m2", tool_calls=[{"name": "list_files", "arguments": {}}])
    response = client.post(
        "/v1/chat/completions",
        json={
            "model": "agents",
            "tools": TOOLS,
            "messages": [{"role": "user", "content": "what is in the folder?"}],
        },
    )
    assert response.status_code == 200, response.text
    reply = response.json()
    assert reply["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == (
        "list_files"
    )
    assert response.headers["x-omniroute-attempts"] == "2"
    decision = _sent(upstream, "m1")[0]
    assert "tools" not in decision
    assert decision["messages"][-1] == {"role": "system", "content": DECISION_PROMPT}
    executed = _sent(upstream, "m2")[0]
    assert executed["tools"] == TOOLS
    assert executed["messages"][-1]["role"] == "system"
    assert "list files" in executed["messages"][-1]["content"]


def test_planner_answers_itself_when_it_decides_final(agentic_combo, client, upstream):
    upstream.add("m1", content='{"action": "final"}', times=1)
    response = client.post(
        "/v1/chat/completions",
        json={
            "model": "agents",
            "tools": TOOLS,
            "messages": [{"role": "user", "content": "hello"}],
        },
    )
    assert response.status_code == 200
    assert response.json()["omniroute"]["served_model"] == "pa/m1"
    final = _sent(upstream, "m1")[-1]
    assert final["tool_choice"] == "none"
    assert _sent(upstream, "m2") == []


def test_spent_tool_budget_makes_the_planner_answer_now(
    agentic_combo, client, upstream
):
    messages = [{"role": "user", "content": "go"}]
    for round_no in range(8):
        call_id = f"call_{round_no}"
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "list_files", "arguments": "{}"},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call_id, "content": "a.txt"})
    response = client.post(
        "/v1/chat/completions",
        json={"model": "agents", "tools": TOOLS, "messages": messages},
    )
    assert response.status_code == 200
    sent = _sent(upstream, "m1")
    assert len(sent) == 1
    assert sent[0]["tool_choice"] == "none"
    assert sent[0]["messages"][-1]["role"] == "system"


def test_without_tools_the_planner_gets_the_original_body(
    agentic_combo, client, upstream
):
    response = client.post(
        "/v1/chat/completions",
        json={"model": "agents", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert response.status_code == 200
    assert _sent(upstream, "m1")[0]["messages"] == [{"role": "user", "content": "hi"}]
