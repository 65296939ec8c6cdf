"""An unquoted date that does not exist is a problem at its line, not a traceback
(issue #14, D7): ``import_config``, the command and the admin's upload."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from combos.models import ApiKey
from providers.models import Provider
from providers.services import config_version

pytestmark = pytest.mark.django_db

AZURE = """\
providers:
  - slug: az
    preset: azure
    resource: contoso
    api_version: 2024-02-30
"""
KEY = """\
api_keys:
  - name: ci
    expires_at: 2024-02-30
"""


@pytest.mark.parametrize(("text", "line"), [(AZURE, 5), (KEY, 3)])
def test_an_impossible_date_is_one_problem_naming_its_line(
    text: str, line: int, import_problems: Callable[..., list[str]]
) -> None:
    problems = import_problems(text)

    assert len(problems) == 1
    assert problems[0].startswith(
        "not valid YAML: the value '2024-02-30' is not a valid timestamp: "
        "day is out of range for month (quote it to keep it as text)"
    )
    assert f"line {line}," in problems[0]
    assert (Provider.objects.count(), ApiKey.objects.count()) == (0, 0)


def test_a_value_its_explicit_tag_cannot_hold_is_a_problem(
    import_problems: Callable[..., list[str]],
) -> None:
    for text in ("settings: !!int many\n", "settings: !!timestamp soon\n"):
        problems = import_problems(text)
        assert len(problems) == 1
        assert problems[0].startswith("not valid YAML: the value")
        assert "line 1," in problems[0]


def test_the_command_fails_like_for_other_problems(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(AZURE, encoding="utf-8")

    with pytest.raises(CommandError, match=r"1 problem\(s\); nothing was written"):
        call_command("import_config", str(path))
    assert Provider.objects.count() == 0


def test_the_admin_upload_lists_it_and_writes_nothing(
    superuser_client: Client,
) -> None:
    version = config_version()

    page = superuser_client.post(
        "/admin/config/", {"action": "preview", "text": AZURE}
    ).content.decode()

    assert 'id="config-problems"' in page
    assert "is not a valid timestamp" in page
    assert config_version() == version
