"""Usage, cost and result bookkeeping for log rows (spec 06 §1.2, §1.3)."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

from gateway.kernel.facts import input_tokens
from gateway.kernel.types import ModelInfo, PriceTier

_RESULTS = {
    ("connection_error", None): "connection_error",
    ("timeout", "first_token"): "first_token_timeout",
    ("server_error", "empty_stream"): "empty_response",
    ("server_error", "empty_output"): "empty_response",
    ("server_error", "auth_failed"): "auth_error",
    ("server_error", "payment_required"): "auth_error",
    ("server_error", "model_not_found"): "not_found",
}


def result_of(reason: str | None, detail: str | None) -> str:
    """``AttemptLog.result`` from the failover reason and detail (spec 06 §1.2)."""
    if reason is None:
        return "stream_interrupted" if detail == "stream_interrupted" else "success"
    if reason in ("invalid_request", "context_length"):
        return "client_error"
    if reason == "client_cancelled" or detail == "straggler_dropped":
        return "cancelled"
    if reason in ("rate_limit", "connection_error"):
        return reason
    if reason == "timeout":
        return "first_token_timeout" if detail == "first_token" else "timeout"
    return _RESULTS.get((reason, detail), "server_error")


def usage_numbers(usage: dict[str, Any] | None) -> tuple[int, int, int, int] | None:
    """(prompt, completion, cached, cache_write) from an OpenAI-named usage object."""
    if not isinstance(usage, dict):
        return None
    prompt = _count(usage.get("prompt_tokens"))
    completion = _count(usage.get("completion_tokens"))
    if prompt is None and completion is None:
        return None
    details = usage.get("prompt_tokens_details")
    cached = _count(details.get("cached_tokens")) if isinstance(details, dict) else None
    write = _count(usage.get("cache_creation_input_tokens"))
    return (prompt or 0, completion or 0, cached or 0, write or 0)


def _count(value: Any) -> int | None:
    """A token count: a non-negative JSON integer (``true`` is not a count)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def estimate_prompt_tokens(body: dict[str, Any]) -> int:
    """``R_in`` (spec 03 §3) plus tools/4; base64 image data never counts.  An
    embeddings body (``input``, no ``messages``) counts its input's text / 4."""
    if "messages" not in body and "input" in body:
        return math.ceil(len(json.dumps(body["input"], ensure_ascii=False)) / 4)
    tools = body.get("tools")
    tool_chars = len(json.dumps(tools, ensure_ascii=False)) if tools else 0
    return input_tokens(body.get("messages")) + math.ceil(tool_chars / 4)


def _prices(model: ModelInfo, prompt: int, completion: int) -> PriceTier | None:
    """The prices of an attempt with ``prompt`` tokens: the largest catalog context
    tier whose size the prompt exceeds, else the model's own (None: unpriced).  An
    answer without output tokens (embeddings, 09 §5.1) needs only the input price."""
    exceeded = [tier for tier in model.price_tiers if prompt > tier.size]
    if exceeded:
        return exceeded[-1]
    output_cost = model.output_cost
    if output_cost is None and completion == 0:
        output_cost = 0.0
    if model.input_cost is None or output_cost is None:
        return None
    return PriceTier(
        size=0,
        input_cost=model.input_cost,
        output_cost=output_cost,
        cache_read_cost=model.cache_read_cost,
        cache_write_cost=model.cache_write_cost,
    )


def cost_usd(model: ModelInfo, numbers: tuple[int, int, int, int]) -> Decimal | None:
    """Spec 06 §1.3; an unknown price gives None, never 0."""
    prompt, completion, cached, write = numbers
    prices = _prices(model, prompt, completion)
    if prices is None:
        return None
    cache_read = (
        prices.cache_read_cost
        if prices.cache_read_cost is not None
        else prices.input_cost
    )
    cache_write = (
        prices.cache_write_cost
        if prices.cache_write_cost is not None
        else prices.input_cost
    )
    fresh = max(0, prompt - cached - write)
    total = (
        Decimal(str(fresh)) * Decimal(str(prices.input_cost))
        + Decimal(str(cached)) * Decimal(str(cache_read))
        + Decimal(str(write)) * Decimal(str(cache_write))
        + Decimal(str(completion)) * Decimal(str(prices.output_cost))
    )
    return (total / Decimal(1_000_000)).quantize(Decimal("1e-10"))
