"""Admin pages of the gateway app (staff only, wrapped by ``admin_site.admin_view``).

``explain_route_view``: a form (model, API key, optional JSON body) and the report of
``gateway.ops.explain`` for it, rendered as tables.  GET with parameters and POST both
render; a dry run, so it is safe to reload.
"""

from __future__ import annotations

from typing import Any

import orjson
from django import forms
from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from gateway.config.snapshot import build_table
from gateway.kernel.types import RoutingTable
from gateway.ops.explain import UnknownKey, explain

TEMPLATE = "admin/explain_route.html"


class ExplainForm(forms.Form):
    model = forms.CharField(
        required=False, help_text="The model string a client would send."
    )
    key = forms.ChoiceField(
        required=False,
        help_text="Applies the key's allow-list and failover_defaults.",
    )
    body = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 6, "cols": 80}),
        help_text="Optional full chat body (JSON); the model above replaces its "
        "'model'.",
    )

    def __init__(self, *args: Any, table: RoutingTable, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        names = sorted({k.name for k in table.keys_by_digest.values()})
        field = self.fields["key"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [("", "(no key)"), *((n, n) for n in names)]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if not data.get("model") and not data.get("body"):
            raise forms.ValidationError("Give a model, a body, or both.")
        return data


def explain_route_view(request: HttpRequest) -> HttpResponse:
    table = build_table()
    data = request.POST if request.method == "POST" else request.GET
    form = ExplainForm(data or None, table=table)
    report = None
    if form.is_bound and form.is_valid():
        values = form.cleaned_data
        body = values["body"].encode() if values["body"] else None
        try:
            report = explain(
                table,
                values["model"] or None,
                key_name=values["key"] or None,
                body=body,
            )
        except UnknownKey as exc:
            form.add_error("key", str(exc))
    context = {
        **admin.site.each_context(request),
        "title": "Explain route",
        "form": form,
        "report": report,
        "report_json": orjson.dumps(report, option=orjson.OPT_INDENT_2).decode()
        if report is not None
        else "",
    }
    return TemplateResponse(request, TEMPLATE, context)
