"""Model discovery and Test connection (spec 10 §2), for the admin and the REST API.

* ``discover(provider)`` asks the upstream for its model list with the first active
  connection's credential and returns the ids not configured yet, each with the
  catalog's facts when models.dev knows it.  A list call may name further lists
  (``UpstreamCall.also``: Bedrock's inference profiles beside its foundation
  models); their ids join the first's, and one that fails is left out.
* ``test_connection(provider, connection)`` sends one minimal request — the model
  list, where every current kind has one — with that connection's credential and
  answers with the status, the latency and the classified failure.

Both go through the same client, dialect and failure classification as routing,
but feed no health state, no statistics and no log: they are the operator's
questions, not traffic.  Credentials come from the routing table (decrypted once
there) and are never part of an answer or a log line.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from gateway.config.snapshot import probe_info
from gateway.dialects import dialect_for
from gateway.kernel.types import ConnectionInfo, ProviderInfo
from gateway.pipeline import upstream
from providers import credential_sources
from providers.catalog import load_index
from providers.http import mock_client, new_upstream_client
from providers.models import Connection, Provider

#: a probe never waits longer than this
PROBE_TIMEOUT_S = 15.0


@dataclass(frozen=True, slots=True)
class Probe:
    ok: bool
    http_status: int | None
    latency_ms: int
    #: the classified failure (``reason``, ``detail``), None on success
    reason: str | None = None
    detail: str | None = None
    message: str | None = None
    models: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "http_status": self.http_status,
            "latency_ms": self.latency_ms,
            "reason": self.reason,
            "detail": self.detail,
            "message": self.message,
        }


async def _list_models(provider: ProviderInfo, connection: ConnectionInfo) -> Probe:
    dialect = dialect_for(provider.kind, provider.wire)
    started = time.perf_counter()
    try:
        auth = connection.auth
        if credential_sources.needs_minting(auth):
            auth = await credential_sources.ready(auth, provider.outbound)
    except credential_sources.CredentialUnavailable as exc:
        return _failed(
            upstream.credential_failure(upstream.AttemptResult(started=started), exc),
            started,
        )
    call = dialect.list_models_request(
        base_url=connection.base_url or provider.base_url,
        api_key=connection.api_key,
        auth=auth,
    )
    fresh = new_upstream_client()  # its own pool: a probe runs on its own loop
    client: Any = (
        mock_client(provider.outbound)
        if dialect.in_process
        else fresh.for_provider(provider.outbound)
    )
    try:
        result = await upstream.call_json(
            client, dialect, call, timeout_s=PROBE_TIMEOUT_S, created=int(time.time())
        )
        if result.failure is not None or result.completion is None:
            return _failed(result, started)
        models = list(result.completion.get("models") or ())
        for more in call.also:  # Bedrock's inference profiles (spec 10 §2)
            extra = await upstream.call_json(
                client, dialect, more, timeout_s=PROBE_TIMEOUT_S, created=0
            )
            if extra.failure is None and extra.completion is not None:
                models += extra.completion.get("models") or ()
    finally:
        await fresh.aclose()
    latency = round((time.perf_counter() - started) * 1000)
    return Probe(True, result.http_status, latency, models=tuple(dict.fromkeys(models)))


def _failed(result: upstream.AttemptResult, started: float) -> Probe:
    failure = result.failure
    error = result.error
    return Probe(
        ok=False,
        http_status=result.http_status,
        latency_ms=round((time.perf_counter() - started) * 1000),
        reason=failure.reason.value if failure is not None else "server_error",
        detail=failure.detail.value
        if failure is not None and failure.detail is not None
        else None,
        message=error.message[:300] if error is not None else None,
    )


def test_connection(provider: ProviderInfo, connection: ConnectionInfo) -> Probe:
    """One minimal request with ``connection``'s credential (blocking)."""
    return asyncio.run(_list_models(provider, connection))


def discover(provider: ProviderInfo) -> tuple[Probe, list[dict[str, Any]]]:
    """The upstream's models not configured yet, with catalog facts (blocking);
    the probe says how the list call went."""
    if not provider.connections:
        probe = Probe(
            False, None, 0, reason="no_connection", message="no active connection"
        )
        return probe, []
    probe = asyncio.run(_list_models(provider, provider.connections[0]))
    # a model served under another upstream name (an Azure deployment) is configured
    configured = {*provider.models, *(m.upstream_id for m in provider.models.values())}
    index = load_index([(provider.slug, provider.kind)], {})
    offered = []
    for model_id in probe.models:
        if model_id in configured:
            continue
        facts = index.match(provider.slug, provider.kind, model_id)
        entry: dict[str, Any] = {"id": model_id, "in_catalog": facts is not None}
        if facts is not None:
            entry.update(
                input_cost=facts.input_cost,
                output_cost=facts.output_cost,
                context_window=facts.context_window,
                max_output_tokens=facts.max_output_tokens,
                capabilities=sorted(facts.capabilities),
            )
        offered.append(entry)
    return probe, offered


# --- the REST endpoints -------------------------------------------------------------


class _Probing(APIView):
    """Staff with the change permission of the probed model (an operator's call to
    the upstream with a stored credential, spec 10 §2)."""

    model: Any = None

    def _refuse(self, request: Request) -> Response | None:
        needed = f"providers.change_{self.model._meta.model_name}"
        if not request.user.has_perm(needed):
            return Response(
                {
                    "error": {
                        "message": f"this needs the {needed} permission",
                        "type": "permission_error",
                        "code": "permission_denied",
                        "param": None,
                    }
                },
                status=403,
            )
        return None


class DiscoverView(_Probing):
    """``POST /api/providers/{id or slug}/discover``: the upstream's models not
    configured yet, with catalog facts."""

    model = Provider

    @extend_schema(request=None, responses=OpenApiTypes.OBJECT)
    def post(self, request: Request, ref: str) -> Response:
        refused = self._refuse(request)
        if refused is not None:
            return refused
        lookup = {"pk": int(ref)} if ref.isdigit() else {"slug__iexact": ref}
        provider = get_object_or_404(Provider, **lookup)
        probe, offered = discover(probe_info(provider))
        return Response({**probe.as_dict(), "models": offered})


class TestConnectionView(_Probing):
    """``POST /api/connections/{id}/test``: one minimal request with that
    connection's credential; never feeds health state."""

    model = Connection

    @extend_schema(request=None, responses=OpenApiTypes.OBJECT)
    def post(self, request: Request, pk: int) -> Response:
        refused = self._refuse(request)
        if refused is not None:
            return refused
        connection = get_object_or_404(
            Connection.objects.select_related("provider"), pk=pk
        )
        info = probe_info(connection.provider, connection)
        return Response(test_connection(info, info.connections[0]).as_dict())
