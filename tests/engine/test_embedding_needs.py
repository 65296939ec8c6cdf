"""What an embeddings body needs (spec 09 §5.2): its model must embed, and token-id
inputs need a dialect that takes them (Gemini, Vertex and Bedrock embed text only)."""

from __future__ import annotations

import pytest

from gateway.dialects import REGISTRY
from gateway.kernel.facts import DIALECT_NEEDS, Need, needs, token_ids


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ([1, 2, 3], True),
        ([[1, 2], [3]], True),
        ("text", False),
        (["a", "b"], False),
        ([], False),
        ([[]], False),
        ([True, False], False),
        ([["a"]], False),
        (None, False),
    ],
)
def test_token_ids(value, expected):
    assert token_ids(value) is expected


def test_token_id_input_adds_a_need_on_input():
    assert needs({"input": [[1, 2]]}) == (
        Need("embeddings", "model"),
        Need("token_ids", "input"),
    )
    assert needs({"input": ["a"]}) == (Need("embeddings", "model"),)
    assert {"token_ids"} == DIALECT_NEEDS


def test_which_dialects_take_token_ids():
    takes = {kind for kind, d in REGISTRY.items() if d.embeddings_token_ids}
    assert takes == {"openai", "azure", "mock"}
    # a dialect without embeddings never takes them
    assert not any(
        d.embeddings_token_ids for d in REGISTRY.values() if not d.embeddings
    )
