"""One upstream call for a target: the request in its dialect, the client of its
provider kind, target stats and the in-flight gauge, then ``gateway.pipeline.upstream``.

Both the attempt loop and the composite slots call ``dispatch``; they keep their own
bookkeeping (items, counters, the cancellation record) around it.
"""

from __future__ import annotations

from typing import Any

from gateway.dialects import REGISTRY
from gateway.kernel.chain import Options
from gateway.kernel.types import Target
from gateway.pipeline import upstream as proxy
from gateway.pipeline.health import attempt_started
from providers.http import client_for
from telemetry import metrics


async def dispatch(
    target: Target,
    body: dict[str, Any],
    *,
    stream: bool,
    options: Options,
    idle_timeout_ms: int,
    created: int,
    result: proxy.AttemptResult | None = None,
) -> proxy.AttemptResult | proxy.OpenStream:
    """Call ``target`` with ``body``; a stream comes back at its first content token.
    ``result``: a record the proxy fills as the exchange goes, so a caller whose
    call is cancelled still knows the status and first-byte time it got."""
    dialect = REGISTRY[target.provider.kind]
    call = dialect.build_request(
        base_url=target.provider.base_url,
        api_key=target.connection.api_key,
        model=target.model.model_id,
        body=body,
        stream=stream,
    )
    client = client_for(target.provider.kind)
    attempt_started(target)
    gauge = metrics.bounded(metrics.UPSTREAM_IN_FLIGHT, target.provider.slug)
    gauge.inc()
    try:
        if stream:
            first = options.first_token_timeout_ms
            return await proxy.open_stream(
                client,
                dialect,
                call,
                timeout_s=options.timeout_ms / 1000,
                first_token_s=first / 1000 if first else None,
                idle_timeout_s=idle_timeout_ms / 1000,
                created=created,
                result=result,
            )
        return await proxy.call_json(
            client,
            dialect,
            call,
            timeout_s=options.timeout_ms / 1000,
            created=created,
            result=result,
        )
    finally:
        gauge.dec()
