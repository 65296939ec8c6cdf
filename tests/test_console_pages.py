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
            "/admin/dashboard/health/",
            {"connection": "1", "action": "reset", "confirm": "yes"},
        )

    assert response.status_code == 403
    forbidden = [r for r in caplog.records if r.name == "django.request"]
    assert len(forbidden) == 1
    assert forbidden[0].exc_info is None
    assert "Forbidden" in forbidden[0].getMessage()


def _hidden_from_screen_readers(html: str) -> str:
    """``html`` without the elements marked ``aria-hidden="true"`` and tags: what a
    screen reader reads of it."""
    import re

    html = re.sub(r'<(\w+)[^>]*aria-hidden="true"[^>]*>.*?</\1>', "", html, flags=re.S)
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def test_the_logout_button_is_read_as_log_out(root: Client):
    page = root.get("/admin/").content.decode()

    button = page.split('id="omr-logout"')[1].split("</button>")[0]
    assert "material-symbols-outlined" in button  # the icon is still drawn
    assert _hidden_from_screen_readers(button.split(">", 1)[1]) == "Log out"


# --- the traffic overview and the live feed need the logs' view permissions ----------

TRAFFIC_PAGES = ("/admin/telemetry/overview/", "/admin/telemetry/live-routing/")


def _staff(*codenames: str) -> Client:
    from django.contrib.auth.models import Permission

    user = User.objects.create_user("plain-staff", password="pw", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize("url", TRAFFIC_PAGES)
def test_staff_without_the_logs_view_permissions_get_the_admins_403(
    url: str, caplog: pytest.LogCaptureFixture
):
    client = _staff("view_requestlog")  # one of the two is not enough

    with caplog.at_level(logging.WARNING, logger="django.request"):
        response = client.get(url)

    assert response.status_code == 403
    page = response.content.decode()
    assert 'id="omr-forbidden"' in page
    assert "telemetry.view_requestlog, telemetry.view_attemptlog" in page
    assert 'id="nav-sidebar"' in page  # the admin's frame, not Django's bare page
    assert "Not allowed | OmniRoute</title>" in page
    forbidden = [r for r in caplog.records if r.name == "django.request"]
    assert len(forbidden) == 1
    assert forbidden[0].exc_info is None
    assert url in forbidden[0].getMessage()


def test_their_links_show_only_to_staff_who_may_open_them():
    plain = _staff()
    page = plain.get("/admin/").content.decode()
    for url in TRAFFIC_PAGES:
        assert f'href="{url}"' not in page

    User.objects.all().delete()
    allowed = _staff("view_requestlog", "view_attemptlog")
    page = allowed.get("/admin/").content.decode()
    for url in TRAFFIC_PAGES:
        assert page.count(f'href="{url}"') == 2  # the sidebar and the dashboard
        assert allowed.get(url).status_code == 200


def test_a_403_outside_the_admin_stays_json(root: Client):
    from django.core.exceptions import PermissionDenied
    from django.test import RequestFactory

    from gateway.ops.views import permission_denied

    request = RequestFactory().get("/api/combos/")
    response = permission_denied(request, PermissionDenied())

    assert response.status_code == 403
    assert response["Content-Type"].startswith("application/json")
    assert b'"code":"permission_denied"' in response.content.replace(b" ", b"")
