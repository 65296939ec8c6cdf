"""The built-in ``mock`` provider kind answers in-process (the `make run` demo)."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest

pytestmark = pytest.mark.integration
DEMO = Path(__file__).resolve().parents[2] / "omniroute_site" / "demo.yaml"
DEMO_KEY = "sk-or-demo-0000000000000000000000000000000000000"


def test_demo_config_serves_the_readme_examples(gateway):
    result = gateway.apply(DEMO.read_text())
    assert result.returncode == 0, result.stderr
    sdk = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=DEMO_KEY, max_retries=0)
    reply = sdk.chat.completions.create(
        model="demo-chain", messages=[{"role": "user", "content": "Hello"}]
    )
    assert reply.choices[0].message.content == "Hello from mock mock-small."
    assert reply.model_extra["omniroute"]["route"] == "combo:demo-chain"
    chunks = list(
        sdk.chat.completions.create(
            model="demo/mock-large",
            stream=True,
            messages=[{"role": "user", "content": "Stream to me"}],
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Hello from mock mock-large."
    again = gateway.manage("import_config", str(DEMO))
    assert "no changes" in again.stdout


def test_the_demo_answers_every_client_surface(gateway):
    """The README's other wires: Messages, Responses, embeddings and legacy
    Completions on the in-process mock, with ``auto``."""
    import anthropic

    result = gateway.apply(DEMO.read_text())
    assert result.returncode == 0, result.stderr
    claude = anthropic.Anthropic(base_url=gateway.url, api_key=DEMO_KEY, max_retries=0)
    message = claude.messages.create(
        model="auto", max_tokens=100, messages=[{"role": "user", "content": "Hello"}]
    )
    assert message.content[0].text.startswith("Hello from mock")
    sdk = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=DEMO_KEY, max_retries=0)
    assert sdk.responses.create(model="auto", input="Hello").output_text.startswith(
        "Hello from mock"
    )
    vectors = sdk.embeddings.create(model="demo/mock-embed", input=["a", "b"])
    assert [item.index for item in vectors.data] == [0, 1]
    legacy = sdk.completions.create(model="demo/mock-small", prompt="Hello")
    assert legacy.choices[0].text == "Hello from mock mock-small."
