"""The admin playground (issue #15): send one real request, see everything it did.

The operator picks an API key (by name: its plaintext is never stored), a model
string and a message.  The request goes through the same pipeline a client's does
(``gateway.inbound.chat`` on the current routing table), so it is routed, limited,
billed, logged and counted like any other request of that key; the page shows the
reply, the ``X-OmniRoute-*`` headers, the report and every attempt, with a link to
its request-log row.  Sending costs what the request costs: it needs the permission
to change API keys.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import orjson
from asgiref.sync import async_to_sync
from django import forms
from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from combos.admin import route_choices
from gateway.config.state import tables
from gateway.edge.persist import Persist
from gateway.inbound.base import JSONReply, serve
from gateway.inbound.chat import WIRE as CHAT_WIRE
from gateway.kernel.types import KeyPolicy, RoutingTable
from gateway.pipeline.context import ChatContext
from gateway.pipeline.record import RunRecord
from providers.console_access import PLAYGROUND_PERMISSION, refuse_unless

TEMPLATE = "admin/playground.html"
PERMISSION = PLAYGROUND_PERMISSION
DEFAULT_MESSAGE = "Say hello in five words."


class PlaygroundForm(forms.Form):
    key = forms.ChoiceField(
        label="API key",
        help_text="The request runs as this key: its allow-list, "
        "limits, budget and failover defaults apply.",
    )
    model = forms.CharField(
        help_text="Any model string a client may send: provider/model, a combo, a "
        "smart alias, auto…",
        widget=forms.TextInput(attrs={"list": "playground-routes", "size": 50}),
    )
    message = forms.CharField(
        initial=DEFAULT_MESSAGE,
        widget=forms.Textarea(attrs={"rows": 4, "cols": 80}),
    )
    max_tokens = forms.IntegerField(initial=64, min_value=1, max_value=4096)

    def __init__(self, *args: Any, table: RoutingTable, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        names = sorted({k.name for k in table.keys_by_digest.values() if k.active})
        field_ = self.fields["key"]
        assert isinstance(field_, forms.ChoiceField)
        field_.choices = [(n, n) for n in names]


@dataclass(slots=True)
class Outcome:
    status: int
    elapsed_ms: float
    headers: list[tuple[str, str]]
    body: dict[str, Any]
    request_row: dict[str, Any] | None = None
    attempts: list[dict[str, Any]] = field(default_factory=list)

    @property
    def text(self) -> str | None:
        choices = self.body.get("choices") or []
        if choices and isinstance(choices[0], dict):
            message = choices[0].get("message") or {}
            return message.get("content")
        return None

    @property
    def error(self) -> dict[str, Any] | None:
        error = self.body.get("error")
        return error if isinstance(error, dict) else None

    @property
    def report(self) -> str:
        return orjson.dumps(
            self.body.get("omniroute"), option=orjson.OPT_INDENT_2
        ).decode()


class _Capture(Persist):
    """Writes the rows as usual, and keeps them for the page."""

    captured: tuple[dict[str, Any], list[dict[str, Any]]] | None = None

    def __call__(self, run: RunRecord) -> None:
        self.captured = run.rows()
        super().__call__(run)


def _key(table: RoutingTable, name: str) -> KeyPolicy | None:
    return next(
        (k for k in table.keys_by_digest.values() if k.name == name and k.active), None
    )


async def send(key: KeyPolicy, model: str, message: str, max_tokens: int) -> Outcome:
    """One chat request as ``key``, through the real pipeline."""
    table = await tables.ensure()
    persist = _Capture(table)
    body = orjson.dumps(
        {
            "model": model,
            "messages": [{"role": "user", "content": message}],
            "max_tokens": max_tokens,
        }
    )
    ctx = ChatContext(
        endpoint=CHAT_WIRE.surface,
        headers={
            "content-type": "application/json",
            "user-agent": "omniroute-playground",
        },
        table=table,
        record=persist,
    )
    started = time.perf_counter()
    ctx.enter()
    try:
        reply = await serve(CHAT_WIRE, body, ctx, key)
    finally:
        ctx.leave()
    assert isinstance(reply, JSONReply)  # the body asks for no stream
    await persist.flush()
    elapsed = (time.perf_counter() - started) * 1000
    headers = [
        (k.decode("latin-1"), v.decode("latin-1"))
        for k, v in reply.headers
        if k.lower().startswith(b"x-omniroute")
    ]
    outcome = Outcome(
        status=reply.status,
        elapsed_ms=round(elapsed, 1),
        headers=headers,
        body=orjson.loads(reply.body) if reply.body else {},
    )
    if persist.captured is not None:
        outcome.request_row, outcome.attempts = persist.captured
    return outcome


def playground_view(request: HttpRequest) -> HttpResponse:
    refuse_unless(request.user, "playground")
    table = async_to_sync(tables.ensure)()
    data = request.POST if request.method == "POST" else None
    initial = {k: request.GET[k] for k in ("key", "model") if k in request.GET}
    form = PlaygroundForm(data, table=table, initial=initial)
    outcome = None
    if data is not None and form.is_valid():
        key = _key(table, form.cleaned_data["key"])
        if key is None:
            form.add_error("key", "This key is not active any more.")
        else:
            outcome = async_to_sync(send)(
                key,
                form.cleaned_data["model"],
                form.cleaned_data["message"],
                form.cleaned_data["max_tokens"],
            )
    context = {
        **admin.site.each_context(request),
        "title": "Playground",
        "form": form,
        "outcome": outcome,
        "routes": route_choices(),
    }
    return TemplateResponse(request, TEMPLATE, context)
