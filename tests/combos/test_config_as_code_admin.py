"""Config as code in the admin (issue #15): download, dry-run diff, apply."""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from combos.config_export import export_yaml
from combos.models import Combo
from providers.models import Connection
from providers.services import config_version

pytestmark = pytest.mark.django_db

PAGE = "/admin/config/"
DOWNLOAD = "/admin/config/export.yaml"


@pytest.fixture
def superuser() -> Client:
    user = get_user_model().objects.create_superuser("ops", "ops@example.com", "pw")
    client = Client()
    client.force_login(user)
    return client


def _text(response: Any) -> str:
    return str(response.content.decode())


def test_the_download_is_the_export_and_never_holds_a_secret(
    superuser: Client, small_config: Callable[[], dict[str, Any]], import_data
) -> None:
    import_data(small_config())

    response = superuser.get(DOWNLOAD)

    assert response.status_code == 200
    assert response["Content-Disposition"].startswith("attachment; filename=")
    assert _text(response) == export_yaml()
    assert "pb-literal-1234" not in _text(response)
    assert "env:PA_KEY" in _text(response)


def test_the_downloaded_file_uploads_back_with_no_changes(
    superuser: Client, small_config, import_data
) -> None:
    import_data(small_config())
    downloaded = superuser.get(DOWNLOAD).content
    version = config_version()

    page = superuser.post(
        PAGE,
        {"action": "preview", "file": SimpleUploadedFile("c.yaml", downloaded)},
    )

    assert 'id="config-no-changes"' in _text(page)
    assert config_version() == version
    secret = Connection.objects.get(provider__slug="pb").api_key_encrypted
    assert secret  # the "***" kept the stored key


def test_a_preview_shows_the_diff_and_writes_nothing_then_apply_writes_it(
    superuser: Client, small_config, import_data
) -> None:
    import_data(small_config())
    edited = yaml.safe_load(export_yaml())
    edited["combos"][0]["strategy"] = "round-robin"
    text = yaml.safe_dump(edited, sort_keys=False)
    version = config_version()

    page = _text(superuser.post(PAGE, {"action": "preview", "text": text}))

    assert '<span class="del">-  strategy: priority</span>' in page
    assert '<span class="add">+  strategy: round-robin</span>' in page
    assert "combos: 1 updated" in page
    assert Combo.objects.get(name="team").strategy == "priority"  # a dry run
    assert config_version() == version
    digest = re.search(r'name="digest" value="([0-9a-f]{64})"', page)
    assert digest is not None

    applied = _text(
        superuser.post(
            PAGE, {"action": "apply", "text": text, "digest": digest.group(1)}
        )
    )

    assert 'id="config-applied"' in applied
    assert Combo.objects.get(name="team").strategy == "round-robin"
    assert config_version() > version


def _as_a_browser_posts_it(page: str) -> dict[str, str]:
    """The preview page's form fields as a browser submits them: the text box's
    content with CRLF line ends (HTML drops the newline after ``<textarea>``)."""
    area = re.search(r'<textarea name="text"[^>]*>(.*?)</textarea>', page, re.S)
    digest = re.search(r'name="digest" value="([0-9a-f]{64})"', page)
    assert area is not None
    assert digest is not None
    text = html.unescape(area.group(1))
    text = text.removeprefix("\r\n").removeprefix("\n")
    return {"text": text.replace("\n", "\r\n"), "digest": digest.group(1)}


def test_an_uploaded_file_applies_after_its_preview(
    superuser: Client, small_config, import_data
) -> None:
    """Issue #15 audit: Apply after previewing an uploaded file said "it changed
    since its preview": the file came back through the text box with CRLF ends."""
    import_data(small_config())
    edited = yaml.safe_load(export_yaml())
    edited["combos"][0]["strategy"] = "round-robin"
    upload = SimpleUploadedFile(
        "c.yaml", yaml.safe_dump(edited, sort_keys=False).encode()
    )

    page = _text(superuser.post(PAGE, {"action": "preview", "file": upload}))
    assert '<span class="add">+  strategy: round-robin</span>' in page
    applied = _text(
        superuser.post(PAGE, {"action": "apply", **_as_a_browser_posts_it(page)})
    )

    assert 'id="config-applied"' in applied
    assert "Preview the file first" not in applied
    assert Combo.objects.get(name="team").strategy == "round-robin"


def test_an_edit_after_the_preview_is_still_refused(
    superuser: Client, small_config, import_data
) -> None:
    import_data(small_config())
    edited = yaml.safe_load(export_yaml())
    edited["combos"][0]["strategy"] = "round-robin"
    upload = SimpleUploadedFile("c.yaml", yaml.safe_dump(edited).encode())
    page = _text(superuser.post(PAGE, {"action": "preview", "file": upload}))
    fields = _as_a_browser_posts_it(page)
    fields["text"] = fields["text"].replace("round-robin", "random")

    applied = _text(superuser.post(PAGE, {"action": "apply", **fields}))

    assert "Preview the file first" in applied
    assert Combo.objects.get(name="team").strategy == "priority"


def test_apply_refuses_a_text_that_was_not_previewed(
    superuser: Client, small_config, import_data
) -> None:
    import_data(small_config())
    edited = yaml.safe_load(export_yaml())
    edited["combos"][0]["strategy"] = "round-robin"

    page = _text(
        superuser.post(
            PAGE,
            {"action": "apply", "text": yaml.safe_dump(edited), "digest": "0" * 64},
        )
    )

    assert "Preview the file first" in page
    assert Combo.objects.get(name="team").strategy == "priority"


def test_a_bad_file_lists_each_problem_by_path_and_writes_nothing(
    superuser: Client, small_config, import_data
) -> None:
    import_data(small_config())
    broken = yaml.safe_load(export_yaml())
    broken["combos"][0]["strategy"] = "fastest-please"
    version = config_version()

    page = _text(
        superuser.post(PAGE, {"action": "preview", "text": yaml.safe_dump(broken)})
    )

    assert 'id="config-problems"' in page
    assert "combos (row 1).strategy: unknown strategy" in page  # rows from 1
    assert "combos[0]" not in page
    assert config_version() == version


def test_staff_without_permissions_cannot_see_the_page_and_viewers_cannot_import(
    small_config, import_data
) -> None:
    user = get_user_model().objects.create_user("viewer", "v@example.com", "pw")
    user.is_staff = True
    user.save()
    client = Client()
    client.force_login(user)
    assert client.get(PAGE).status_code == 403
    assert client.get(DOWNLOAD).status_code == 403

    for codename in (
        "view_provider",
        "view_connection",
        "view_combo",
        "view_apikey",
        "view_smartroute",
    ):
        user.user_permissions.add(Permission.objects.get(codename=codename))
    client.force_login(get_user_model().objects.get(pk=user.pk))
    assert client.get(DOWNLOAD).status_code == 200
    page = client.get(PAGE)
    assert page.status_code == 200
    assert 'id="config-form"' not in _text(page)
    refused = client.post(PAGE, {"action": "preview", "text": "combos: []"})
    assert refused.status_code == 403


def test_a_shadowing_warning_reads_in_words_with_its_row_from_1(
    superuser: Client, small_config, import_data
) -> None:
    """Issue #15 audit: "smart_routes[0].alias: SMART_ALIAS_SHADOWS_MODEL: …"."""
    import_data(small_config())
    data = yaml.safe_load(export_yaml())
    data["combos"].append(
        {"name": "solo", "strategy": "priority", "targets": [{"model": "pa/m1"}]}
    )
    data["smart_routes"].append({"alias": "solo", "easy": "pa/m1", "hard": "pa/m1"})

    page = html.unescape(
        _text(superuser.post(PAGE, {"action": "preview", "text": yaml.dump(data)}))
    )

    assert (
        'smart_routes (row 2).alias: Smart route "solo" has the same name as the '
        'live combo solo: requests for "solo" go to this smart route instead.'
    ) in page
    assert "SMART_ALIAS_SHADOWS_MODEL" not in page
