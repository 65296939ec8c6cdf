"""The Messages wire's error envelope (spec 09 §4.4): the gateway's codes under
Anthropic's types, and ``no_healthy_candidate`` as a 529 ``overloaded_error`` only
when the operator asks for it."""

from __future__ import annotations

import orjson
import pytest

from gateway.inbound.messages import WIRE
from gateway.pipeline.result import Failure


def _failure(status: int, code: str, error_type: str) -> Failure:
    return Failure(status=status, code=code, message="m", error_type=error_type)


@pytest.mark.parametrize(
    ("status", "code", "error_type", "kind"),
    [
        (400, "invalid_value", "invalid_request_error", "invalid_request_error"),
        (401, "key_disabled", "authentication_error", "authentication_error"),
        (403, "model_not_allowed", "permission_error", "permission_error"),
        (404, "model_not_found", "not_found_error", "not_found_error"),
        (413, "request_too_large", "invalid_request_error", "request_too_large"),
        (429, "rate_limited", "rate_limit_error", "rate_limit_error"),
        (402, "budget_exceeded", "budget_error", "billing_error"),
        (502, "all_models_failed", "upstream_error", "api_error"),
        (503, "no_healthy_candidate", "upstream_error", "api_error"),
    ],
)
def test_each_gateway_error_type_has_its_anthropic_type(status, code, error_type, kind):
    reply = WIRE.error(_failure(status, code, error_type))
    body = orjson.loads(reply.body)
    assert reply.status == status
    assert body["type"] == "error"
    assert (body["error"]["type"], body["error"]["code"]) == (kind, code)


def test_no_healthy_candidate_is_529_overloaded_when_asked(settings):
    settings.OMNIROUTE_MESSAGES_OVERLOADED_529 = True
    reply = WIRE.error(_failure(503, "no_healthy_candidate", "upstream_error"))
    assert reply.status == 529
    assert orjson.loads(reply.body)["error"]["type"] == "overloaded_error"
    other = WIRE.error(_failure(503, "shutting_down", "upstream_error"))
    assert other.status == 503
