"""Small facts of the console's pages (issue #15): the favicon, the logged-out page's
words, the heading of add pages, a refused request logged in one line, each refused
page naming the permissions it needs, and the navigation's icons hidden from screen
readers."""

from __future__ import annotations

import logging
import re

import pytest
from django.contrib.auth.models import Permission, User
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


@pytest.fixture
def plain_staff() -> Client:
    client = Client()
    client.force_login(User.objects.create_user("staff", password="pw", is_staff=True))
    return client


@pytest.mark.parametrize(
    ("method", "url", "named"),
    [
        ("get", "/admin/playground/", "The playground needs the permissions"),
        ("post", "/admin/playground/", "combos.change_apikey"),
        ("get", "/admin/config/", "Configuration as code needs the permissions"),
        ("get", "/admin/config/export.yaml", "providers.view_connection"),
        ("post", "/admin/config/", "combos.view_smartroute"),
        ("get", "/admin/providers/jobrun/jobs/", "The Jobs page needs the permissions"),
        ("post", "/admin/providers/jobrun/jobs/", "providers.view_jobrun"),
        ("get", "/admin/providers/provider/1/discover/", "providers.change_provider"),
        ("get", "/admin/providers/connection/test/?ids=1", "Test connection needs"),
    ],
)
def test_a_refused_console_page_names_the_permissions_it_needs(
    plain_staff: Client, method: str, url: str, named: str
):
    response = getattr(plain_staff, method)(url, HTTP_ACCEPT="text/html")

    assert response.status_code == 403
    page = response.content.decode()
    assert 'id="omr-forbidden"' in page  # the console's frame, not a bare 403
    assert named in page


def test_run_now_refused_names_its_permission():
    staff = User.objects.create_user("viewer", password="pw", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_jobrun"))
    client = Client()
    client.force_login(staff)

    page = client.get("/admin/providers/jobrun/jobs/")
    refused = client.post("/admin/providers/jobrun/jobs/", {"job": "sync_models_dev"})

    assert page.status_code == 200
    assert refused.status_code == 403
    said = refused.content.decode()
    assert "Run now needs the permission: telemetry.run_job." in said


def test_applying_a_configuration_refused_says_it_needs_a_superuser():
    staff = User.objects.create_user("exporter", password="pw", is_staff=True)
    staff.user_permissions.add(
        *(
            Permission.objects.get_by_natural_key(
                perm.split(".")[1], perm.split(".")[0], model
            )
            for perm, model in (
                ("providers.view_provider", "provider"),
                ("providers.view_connection", "connection"),
                ("combos.view_combo", "combo"),
                ("combos.view_apikey", "apikey"),
                ("combos.view_smartroute", "smartroute"),
            )
        )
    )
    client = Client()
    client.force_login(staff)

    assert client.get("/admin/config/").status_code == 200
    refused = client.post("/admin/config/", {"action": "preview"})

    assert refused.status_code == 403
    assert "needs a superuser" in refused.content.decode()


def test_the_sidebar_icons_are_hidden_from_screen_readers(root: Client):
    page = root.get("/admin/").content.decode()
    sidebar = page.split('id="nav-sidebar-apps"')[1].split('id="main"')[0]

    icons = re.findall(r"<span[^>]*material-symbols-outlined[^>]*>", sidebar)
    assert len(icons) > 10  # every navigation entry has one
    assert [i for i in icons if 'aria-hidden="true"' not in i] == []


def test_a_list_pages_labelled_icons_are_hidden_from_screen_readers(root: Client):
    page = root.get("/admin/providers/connection/").content.decode()

    # Filters, Reset filters, the chevron between the header's "Upstreams" and
    # "Connections"
    for icon in ("filter_list", "filter_list_off", "chevron_right"):
        spans = re.findall(rf"<span[^>]*>\s*{icon}\s*</span>", page)
        assert spans, icon
        assert all('aria-hidden="true"' in s for s in spans), spans


@pytest.mark.parametrize(
    ("path", "said"),
    [
        (
            "/admin/smart-routes/any/",
            "Trying a smart route needs the permission: combos.view_smartroute.",
        ),
        (
            "/admin/dashboard/health/?connection=1&action=reset",
            "Resetting a connection needs the permission: providers.change_connection.",
        ),
    ],
)
def test_the_smart_route_page_and_the_board_button_name_what_they_need(path, said):
    staff = User.objects.create_user("plain-staff", password="pw", is_staff=True)
    client = Client()
    client.force_login(staff)

    refused = client.get(path)

    assert refused.status_code == 403
    assert said in refused.content.decode()


def test_a_missing_console_page_is_a_404_in_the_admins_frame():
    staff = User.objects.create_superuser("root404", "r@example.com", "pw")
    client = Client()
    client.force_login(staff)

    missing = client.get("/admin/smart-routes/no-such-alias/")
    elsewhere = client.get("/no-such-path", HTTP_ACCEPT="application/json")

    assert missing.status_code == 404
    assert 'id="omr-error-reason"' in missing.content.decode()
    assert elsewhere.status_code == 404
    assert elsewhere.json()["error"]  # outside the admin: the JSON envelope
