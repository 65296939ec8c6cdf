"""Small facts of the console's pages (issue #15): the favicon, the logged-out page's
words, the heading of add pages, and a refused request logged in one line."""

from __future__ import annotations

import logging

import pytest
from django.contrib.auth.models import User
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.fixture
def root() -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="pw"))
    return client


def test_the_favicon_is_the_omniroute_icon():
    response = Client().get("/favicon.ico")

    assert response.status_code == 301
    assert response["Location"].endswith("/omniroute/favicon.svg")


def test_admin_pages_link_the_icon(root: Client):
    page = root.get("/admin/").content.decode()

    assert 'type="image/svg+xml"' in page
    assert "omniroute/favicon.svg" in page


def test_the_logged_out_page_speaks_of_the_console(root: Client):
    page = root.post("/admin/logout/").content.decode()

    assert "You are logged out of the OmniRoute console" in page
    assert "quality time" not in page


@pytest.mark.parametrize(
    ("url", "heading"),
    [
        ("/admin/combos/combo/add/", "Add combo"),
        ("/admin/providers/provider/add/", "Add provider"),
        ("/admin/providers/provider/add/?preset=openai", "Add provider"),
    ],
)
def test_an_add_page_has_its_heading(root: Client, url: str, heading: str):
    page = root.get(url).content.decode()

    assert f'id="omr-add-heading">{heading}</h2>' in page


def test_the_upstreams_app_is_not_named_like_its_providers(root: Client):
    page = root.get("/admin/providers/provider/add/").content.decode()

    header = page.split("<h1")[1].split("</h1>")[0]
    assert "Upstreams" in header
    assert header.count("Providers") == 1


def test_a_refused_request_is_one_log_line_without_a_traceback(
    caplog: pytest.LogCaptureFixture,
):
    staff = User.objects.create_user("staff", password="pw", is_staff=True)
    client = Client()
    client.force_login(staff)

    with caplog.at_level(logging.WARNING, logger="django.request"):
        response = client.post(
            "/admin/dashboard/health/", {"connection": "1", "action": "reset"}
        )

    assert response.status_code == 403
    forbidden = [r for r in caplog.records if r.name == "django.request"]
    assert len(forbidden) == 1
    assert forbidden[0].exc_info is None
    assert "Forbidden" in forbidden[0].getMessage()
