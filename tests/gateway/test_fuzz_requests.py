"""Fuzzing the chat front door and the config validator in-process (no network).

The upstream is the built-in ``mock`` provider kind, served in-process and always
healthy, so every 5xx (and every exception out of the ASGI app) is a gateway bug.
Config files: ``import_config`` either applies a file or raises ``ConfigFileError``,
never anything else.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from django.db import connections
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from combos.config_file import ConfigFileError, import_config
from gateway.config.snapshot import build_table
from gateway.config.state import tables
from omniroute_site.asgi import application
from tests.asgi_scope import http_scope

pytestmark = pytest.mark.django_db(transaction=True)
KEY = "sk-or-fuzz-00000000000000000000000000000000000000"
CONFIG = f"""
providers:
  - slug: demo
    kind: mock
    connections: [{{name: main}}]
    models:
      - {{id: mock-small, context_window: 128000, capabilities: [tools, json]}}
      - {{id: mock-large, context_window: 400000}}
combos:
  - name: chain
    strategy: priority
    targets: [{{model: demo/mock-small}}, {{model: demo/mock-large}}]
api_keys:
  - name: fuzz
    key: {KEY}
"""
# Deterministic in CI (the same examples every run, so a red run is reproducible);
# ``FUZZ_RANDOM=1 FUZZ_EXAMPLES=2000`` explores new ones locally.
FUZZ = settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "150")),
    derandomize=os.environ.get("FUZZ_RANDOM") != "1",
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# --- strategies -----------------------------------------------------------------

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=40)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=20,
)
models = st.sampled_from(
    [
        "demo/mock-small",
        "mock-small",
        "chain",
        "auto",
        "demo/nope",
        "",
        "x/y/z",
        "demo/mock\x00small",  # PostgreSQL refuses NUL: it once failed the log write
        "\x00",
        "m" * 400,
        "auto/\u202e",
    ]
) | st.text(max_size=30)
contents = (
    st.text(max_size=60)
    | st.lists(
        st.fixed_dictionaries(
            {"type": st.sampled_from(["text", "image_url", "junk"]), "text": scalars}
        ),
        max_size=3,
    )
    | json_values
)
messages = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "system", "assistant", "tool", "developer"])
        | st.text(max_size=8),
        "content": contents,
    },
    optional={"name": json_values, "tool_call_id": json_values, "extra": json_values},
)


def mostly(valid: st.SearchStrategy, junk: st.SearchStrategy) -> st.SearchStrategy:
    """``valid`` four times in five, else ``junk``."""
    return st.integers(0, 4).flatmap(lambda roll: junk if roll == 0 else valid)


huge = st.sampled_from([0, -1, 2**31, 2**63, 10**30, 1e308, -1e308, 0.5, "7", None])
valid_models = st.sampled_from(["demo/mock-small", "mock-small", "chain", "auto"])
valid_messages = st.lists(
    st.fixed_dictionaries(
        {
            "role": st.sampled_from(["user", "system", "assistant"]),
            "content": st.text(min_size=1, max_size=60),
        }
    ),
    min_size=1,
    max_size=3,
)
tools = st.lists(
    st.fixed_dictionaries(
        {
            "type": st.just("function"),
            "function": st.fixed_dictionaries(
                {"name": st.sampled_from(["f", "get_weather"])},
                optional={"parameters": st.just({"type": "object"}) | json_values},
            ),
        }
    ),
    max_size=2,
)
#: (field, mostly valid values); each drawn body perturbs a few of them
OPTIONAL = {
    "stream": st.booleans(),
    "stream_options": st.fixed_dictionaries({"include_usage": st.booleans()}),
    "temperature": st.floats(0, 2),
    "top_p": st.floats(0, 1),
    "max_tokens": st.integers(1, 4096) | huge,
    "max_completion_tokens": st.integers(1, 4096) | huge,
    "n": st.integers(1, 2) | huge,
    "tools": tools,
    "tool_choice": st.sampled_from(["auto", "none", "required"]),
    "response_format": st.just({"type": "json_object"}),
    "models": st.lists(valid_models, min_size=1, max_size=3),
    "redundancy": st.fixed_dictionaries({}, optional={"mode": st.text(max_size=8)}),
    "session_id": st.text(max_size=20),
    "metadata": st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2),
    "user": st.text(max_size=20),
    "unknown_field": json_values,
}
chat_bodies = st.builds(
    lambda model, messages, extra: {"model": model, "messages": messages, **extra},
    mostly(valid_models, models | json_values),
    mostly(valid_messages, st.lists(messages, max_size=4) | json_values),
    st.dictionaries(
        st.sampled_from(sorted(OPTIONAL)), st.just(None), max_size=4
    ).flatmap(
        lambda chosen: st.fixed_dictionaries(
            {name: mostly(OPTIONAL[name], huge | json_values) for name in chosen}
        )
    ),
)
bodies = (
    chat_bodies.map(lambda b: json.dumps(b).encode())
    | json_values.map(lambda v: json.dumps(v).encode())
    | st.binary(max_size=200)
    | st.text(max_size=100).map(lambda t: t.encode("utf-8", "surrogatepass"))
)
header_values = st.text(
    st.characters(min_codepoint=32, max_codepoint=255), max_size=40
).map(lambda t: t.encode("latin-1"))
auth_headers = st.sampled_from(
    [
        [(b"authorization", f"Bearer {KEY}".encode())],
        [(b"authorization", f"bearer   {KEY}".encode())],
        [(b"x-api-key", KEY.encode())],
        [(b"authorization", b"Bearer")],
        [(b"authorization", b"Basic Zm9vOmJhcg==")],
        [(b"authorization", f"Bearer {KEY}x".encode())],
        [(b"authorization", f"Bearer {KEY}".encode()), (b"x-api-key", b"sk-or-no")],
        [],
    ]
) | st.lists(
    st.tuples(st.sampled_from([b"authorization", b"x-api-key"]), header_values),
    max_size=2,
)
extra_header_names = st.sampled_from(
    [
        b"x-session-id",
        b"session_id",
        b"x-claude-code-session-id",
        b"x-omniroute-mode",
        b"x-omniroute-budget",
        b"x-omniroute-budget-fallback",
        b"x-omniroute-effort",
        b"x-omniroute-smart-routing",
        b"x-omniroute-tier",
        b"x-omniroute-whatever",
        b"content-length",
        b"content-type",
    ]
)
extra_headers = st.lists(st.tuples(extra_header_names, header_values), max_size=4)


# --- driving the ASGI app -------------------------------------------------------


def _scope(headers: list[tuple[bytes, bytes]], path: str) -> dict[str, Any]:
    return http_scope(path, headers)


async def _call(scope: dict[str, Any], body: bytes) -> tuple[int, bytes]:
    """One request; the client disconnects only once the reply is complete."""
    done = asyncio.Event()
    delivered = False
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body"):
            done.set()

    await asyncio.wait_for(application(scope, receive, send), timeout=10)
    assert sent, "no reply"
    assert sent[0]["type"] == "http.response.start", sent
    payload = b"".join(m.get("body", b"") for m in sent[1:])
    return sent[0]["status"], payload


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """One loop for all examples of a test (the mock client is cached per loop)."""
    running = asyncio.new_event_loop()
    yield running
    running.run_until_complete(running.shutdown_asyncgens())
    running.close()


@pytest.fixture
def configured(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    try:
        import_config(CONFIG)
        tables.table = build_table()
    finally:
        connections.close_all()
    caplog.set_level(logging.ERROR)
    yield
    tracebacks = [r for r in caplog.records if r.exc_info]
    assert not tracebacks, [r.getMessage() for r in tracebacks]


#: codes of a refusal that must name the field at fault
FIELD_CODES = frozenset(
    {"invalid_value", "invalid_type", "missing_parameter", "conflicting_parameters"}
)


def _check(status: int, payload: bytes) -> None:
    assert status < 500, (status, payload[:500])
    if status >= 400:
        error = json.loads(payload)["error"]  # OpenAI's envelope and Anthropic's
        assert isinstance(error["message"], str)
        assert "Traceback" not in error["message"]
        if error.get("code") in FIELD_CODES and "body" not in error["message"]:
            assert isinstance(error.get("param"), str), error  # the body as a whole


@FUZZ
@given(body=bodies, auth=auth_headers, extra=extra_headers)
def test_fuzzed_bodies_and_headers_never_yield_a_5xx(
    configured, loop, body: bytes, auth: list, extra: list
) -> None:
    headers = [(b"content-type", b"application/json"), *auth, *extra]
    status, payload = loop.run_until_complete(
        _call(_scope(headers, "/v1/chat/completions"), body)
    )
    _check(status, payload)


@FUZZ
@given(
    body=chat_bodies,
    path=st.sampled_from(["/v1/chat/completions", "/chat/completions"]),
    extra=extra_headers,
)
def test_near_valid_chat_bodies_never_yield_a_5xx(
    configured, loop, body: dict, path: str, extra: list
) -> None:
    headers = [(b"authorization", f"Bearer {KEY}".encode()), *extra]
    raw = json.dumps(body).encode()
    status, payload = loop.run_until_complete(_call(_scope(headers, path), raw))
    _check(status, payload)


# --- the other client surfaces (spec 09) ------------------------------------------

SURFACES = (
    "/v1/messages",
    "/v1/messages/count_tokens",
    "/v1/responses",
    "/v1/embeddings",
    "/v1/completions",
)
blocks = st.lists(
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(
                ["text", "image", "tool_use", "tool_result", "thinking", "bogus"]
            )
            | json_values,
        },
        optional={
            "text": scalars,
            "input": json_values,
            "id": scalars,
            "tool_use_id": scalars,
            "content": json_values,
            "cache_control": json_values,
            "source": json_values,
        },
    ),
    max_size=3,
)
surface_fields = {
    "max_tokens": st.integers(1, 4096) | huge,
    "messages": st.lists(
        st.fixed_dictionaries(
            {
                "role": st.sampled_from(["user", "assistant", "system"])
                | st.text(max_size=6),
                "content": st.text(max_size=30) | blocks | json_values,
            }
        ),
        max_size=3,
    )
    | json_values,
    "system": st.text(max_size=20) | blocks | json_values,
    "thinking": st.fixed_dictionaries(
        {"type": st.sampled_from(["enabled", "disabled", "adaptive"]) | json_values},
        optional={"budget_tokens": huge | st.integers(0, 40000)},
    )
    | json_values,
    "tools": json_values,
    "stop_sequences": json_values,
    "input": st.text(max_size=30)
    | st.lists(st.text(max_size=10), max_size=3)
    | st.lists(st.integers(0, 50), max_size=4)
    | json_values,
    "instructions": scalars,
    "max_output_tokens": huge | st.integers(1, 100),
    "previous_response_id": scalars,
    "reasoning": json_values,
    "text": json_values,
    "store": st.booleans() | json_values,
    "prompt": st.text(max_size=30)
    | st.lists(st.text(max_size=10), max_size=3)
    | json_values,
    "suffix": scalars,
    "echo": scalars,
    "logprobs": huge | scalars,
    "dimensions": huge | scalars,
    "encoding_format": st.sampled_from(["float", "base64", "hex"]) | scalars,
    "stream": st.booleans() | scalars,
    "metadata": json_values,
    "fallback_models": json_values,
    "unknown": json_values,
}
surface_bodies = st.builds(
    lambda model, extra: {"model": model, **extra},
    mostly(valid_models, models | json_values),
    st.dictionaries(
        st.sampled_from(sorted(surface_fields)), st.just(None), max_size=6
    ).flatmap(
        lambda chosen: st.fixed_dictionaries(
            {name: surface_fields[name] for name in chosen}
        )
    ),
)


@FUZZ
@given(
    body=surface_bodies | json_values,
    path=st.sampled_from(SURFACES),
    extra=extra_headers,
)
def test_fuzzed_bodies_on_every_surface_never_yield_a_5xx(
    configured, loop, body: Any, path: str, extra: list
) -> None:
    headers = [
        (b"x-api-key", KEY.encode()),
        (b"anthropic-version", b"2023-06-01"),
        *extra,
    ]
    raw = json.dumps(body).encode()
    status, payload = loop.run_until_complete(_call(_scope(headers, path), raw))
    _check(status, payload)


# --- config files ---------------------------------------------------------------

names = st.sampled_from(["p", "demo", "c", "team", "k", "P"]) | st.text(max_size=8)
providers = st.fixed_dictionaries(
    {"slug": names | json_values},
    optional={
        "kind": st.sampled_from(["openai", "anthropic", "mock"]) | json_values,
        "base_url": st.sampled_from(
            ["http://127.0.0.1:9/v1", "https://x", "ftp://x", "", "javascript:x"]
        )
        | json_values,
        "connections": st.lists(
            st.fixed_dictionaries(
                {"name": names | json_values},
                optional={
                    "api_key": json_values,
                    "priority": huge | json_values,
                    "tier": json_values,
                },
            ),
            max_size=2,
        )
        | json_values,
        "models": st.lists(
            st.fixed_dictionaries(
                {"id": names | json_values},
                optional={
                    "input_cost": huge | json_values,
                    "context_window": huge,
                    "capabilities": json_values,
                },
            ),
            max_size=2,
        )
        | json_values,
    },
)
combos = st.fixed_dictionaries(
    {"name": names | json_values},
    optional={
        "strategy": st.sampled_from(["priority", "weighted", "round_robin", "auto"])
        | json_values,
        "targets": st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "model": st.sampled_from(["p/m", "demo/mock-small"]) | json_values,
                    "combo": names | json_values,
                    "weight": huge | json_values,
                },
            ),
            max_size=3,
        )
        | json_values,
    },
)
config_files = (
    st.fixed_dictionaries(
        {},
        optional={
            "providers": st.lists(providers, max_size=2) | json_values,
            "combos": st.lists(combos, max_size=2) | json_values,
            "api_keys": st.lists(
                st.fixed_dictionaries(
                    {"name": names | json_values},
                    optional={
                        "key": json_values,
                        "allowed_models": json_values,
                        "expires_at": json_values,
                        "active": json_values,
                    },
                ),
                max_size=2,
            )
            | json_values,
            "model_combo_mappings": json_values,
            "candidate_overrides": json_values,
            "smart_routes": json_values,
            "settings": json_values,
            "unknown": json_values,
        },
    )
    | json_values
)


def _import(text: str) -> None:
    try:
        import_config(text)
    except ConfigFileError:
        pass
    finally:
        connections.close_all()


@FUZZ
@given(data=config_files)
def test_fuzzed_config_files_raise_only_the_validator_error(data: Any) -> None:
    _import(yaml.safe_dump(data, allow_unicode=True))


@FUZZ
@given(text=st.text(max_size=200))
def test_arbitrary_text_as_a_config_file_raises_only_the_validator_error(
    text: str,
) -> None:
    _import(text)
