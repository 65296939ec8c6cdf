"""Config as code in the admin (issue #15): download, preview, apply.

* **Download** (``GET …/config/export.yaml``) is ``export_config``'s YAML: secrets as
  their ``env:`` reference or ``"***"``, so the file is safe to keep in a repository
  and re-importing it changes nothing.
* **Preview** validates an uploaded or pasted file as ``import_config`` does and shows
  what applying it would change as a diff of the exported configuration before and
  after: the import runs inside a transaction that is rolled back, so the diff is
  exactly what the import would write (nothing is written; keys it would generate are
  not shown).
* **Apply** runs ``import_config`` (all or nothing) on the previewed text, whose digest
  the form carries: a file changed between preview and apply is refused.  An uploaded
  file's text is carried to the apply step in the page's text box; line ends are
  normalized to LF on both steps, since a browser submits a text box with CRLF.

Exporting needs the view permission of every kind the file holds; previewing and
applying change every kind, so they are for superusers.
"""

from __future__ import annotations

import difflib
import hashlib
import logging
from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path
from django.utils import timezone
from unfold.widgets import UnfoldAdminFileFieldWidget

from combos.admin_forms import console_text
from combos.config_apply import apply_plan
from combos.config_export import export_yaml
from combos.config_file import ConfigFileError, import_config, plan_import
from providers.console_access import refuse_unless

logger = logging.getLogger(__name__)

TEMPLATE = "admin/combos/config.html"
MAX_UPLOAD_BYTES = 2 * 1024 * 1024


class ConfigUploadForm(forms.Form):
    file = forms.FileField(
        required=False,
        help_text="A YAML file in the format of export_config.",
        # the theme's file input: its script names the chosen file in the widget's
        # own text box, and fails on a bare <input type=file>
        widget=UnfoldAdminFileFieldWidget,
    )
    text = forms.CharField(
        required=False,
        strip=False,  # the text applied is the text previewed, byte for byte
        widget=forms.Textarea(attrs={"rows": 14, "cols": 100, "spellcheck": "false"}),
        help_text="…or paste the YAML here.",
    )
    prune = forms.BooleanField(
        required=False,
        help_text="Also delete rows of the kinds the file lists that it does not name.",
    )
    digest = forms.CharField(required=False, widget=forms.HiddenInput)

    def yaml_text(self) -> str:
        upload = self.cleaned_data.get("file")
        if upload is not None:
            if upload.size > MAX_UPLOAD_BYTES:
                raise forms.ValidationError(
                    f"The file is larger than {MAX_UPLOAD_BYTES // 1024} KiB."
                )
            try:
                return normalize_newlines(upload.read().decode("utf-8-sig"))
            except UnicodeDecodeError as exc:
                raise forms.ValidationError("The file is not UTF-8 text.") from exc
        text = normalize_newlines(str(self.cleaned_data.get("text") or ""))
        if not text.strip():
            raise forms.ValidationError("Choose a file or paste the YAML.")
        return text


def normalize_newlines(text: str) -> str:
    """Line ends as LF.  A previewed upload comes back from the page's text box, which
    a browser submits with CRLF line ends: without this the applied text never
    matched the previewed one."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def digest_of(text: str, prune: bool) -> str:
    return hashlib.sha256(f"{int(prune)}\n{text}".encode()).hexdigest()


def preview(text: str, *, prune: bool) -> dict[str, Any]:
    """Validate ``text``; when valid, the diff and counts applying it would give."""
    try:
        plan = plan_import(text, prune=prune)
    except ConfigFileError as exc:
        return {"problems": [console_text(p) for p in exc.problems]}
    if plan.problems:
        return {"problems": [console_text(p) for p in plan.problems]}
    before = export_yaml()
    with transaction.atomic():
        report = apply_plan(plan.data, prune=prune)
        after = export_yaml()
        counts = report.counts
        transaction.set_rollback(True)  # a dry run: the diff, nothing written
    diff = list(
        difflib.unified_diff(
            before.splitlines(),
            after.splitlines(),
            fromfile="current",
            tofile="after import",
            lineterm="",
        )
    )
    return {
        "problems": [],
        "warnings": [console_text(w) for w in plan.warnings],
        "diff": diff,
        "counts": _count_lines(counts),
        "changed": bool(diff),
    }


def _count_lines(counts: dict[str, dict[str, int]]) -> list[str]:
    return [
        f"{kind}: " + ", ".join(f"{n} {what}" for what, n in bucket.items() if n)
        for kind, bucket in counts.items()
        if any(bucket.values())
    ]


def config_view(request: HttpRequest) -> HttpResponse:
    """GET: the page; POST ``action=preview|apply``: superusers only."""
    refuse_unless(request.user, "config")
    can_import = bool(getattr(request.user, "is_superuser", False))
    context: dict[str, Any] = {
        **admin.site.each_context(request),
        "title": "Configuration as code",
        "can_import": can_import,
        "form": ConfigUploadForm(),
    }
    if request.method == "POST":
        if not can_import:
            raise PermissionDenied("Applying a configuration file needs a superuser.")
        form = ConfigUploadForm(request.POST, request.FILES)
        context["form"] = form
        if form.is_valid():
            try:
                text = form.yaml_text()
            except forms.ValidationError as exc:
                form.add_error(None, exc)
            else:
                prune = bool(form.cleaned_data.get("prune"))
                if request.POST.get("action") == "apply":
                    context.update(_apply(request, form, text, prune))
                else:
                    context.update(preview(text, prune=prune))
                    context["previewed"] = True
                    # the next step applies exactly this text
                    context["form"] = ConfigUploadForm(
                        initial={
                            "text": text,
                            "prune": prune,
                            "digest": digest_of(text, prune),
                        }
                    )
    return TemplateResponse(request, TEMPLATE, context)


def _apply(
    request: HttpRequest, form: ConfigUploadForm, text: str, prune: bool
) -> dict[str, Any]:
    if form.cleaned_data.get("digest") != digest_of(text, prune):
        return {"problems": ["Preview the file first: it changed since its preview."]}
    try:
        report = import_config(text, prune=prune, user=request.user)
    except ConfigFileError as exc:
        return {"problems": [console_text(p) for p in exc.problems]}
    logger.info(
        "admin %s: imported a configuration (%s)",
        request.user,
        "changed" if report.changed else "no changes",
    )
    return {
        "applied": True,
        "changed": report.changed,
        "counts": _count_lines(report.counts),
        "warnings": [console_text(w) for w in report.warnings],
        "generated_keys": report.generated_keys,
    }


def export_view(request: HttpRequest) -> HttpResponse:
    refuse_unless(request.user, "config")
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    response = HttpResponse(export_yaml(), content_type="application/yaml")
    response["Content-Disposition"] = (
        f'attachment; filename="omniroute-config-{stamp}.yaml"'
    )
    return response


def urls() -> list[URLPattern]:
    return [
        path("admin/config/", admin.site.admin_view(config_view), name="admin-config"),
        path(
            "admin/config/export.yaml",
            admin.site.admin_view(export_view),
            name="admin-config-export",
        ),
    ]


__all__ = ["config_view", "export_view", "preview", "urls"]
