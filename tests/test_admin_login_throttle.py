"""Issue #16 point 6: the admin login is throttled (django-axes: 5 wrong passwords
for one username from one address lock that pair out), and an open ``/metrics`` in
production is a system warning."""

from __future__ import annotations

import pytest
from django.core import checks
from django.test import Client

pytestmark = pytest.mark.django_db


def _login(client: Client, password: str):
    return client.post(
        "/admin/login/?next=/admin/",
        {"username": "ops", "password": password},
        REMOTE_ADDR="203.0.113.7",
    )


@pytest.fixture
def ops(django_user_model):
    return django_user_model.objects.create_superuser("ops", "ops@example.com", "right")


def test_the_right_password_logs_in(ops):
    client = Client()
    response = _login(client, "right")
    assert response.status_code == 302
    assert client.get("/admin/").status_code == 200


def test_five_wrong_passwords_lock_the_account_out_from_that_address(ops, settings):
    client = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert _login(client, "wrong").status_code == 200  # the form again
    assert _login(client, "wrong").status_code == 429  # the fifth locks out
    locked = _login(client, "right")
    assert locked.status_code == 429
    assert client.get("/admin/").status_code == 302  # not logged in
    # another address is not locked out
    other = Client()
    response = other.post(
        "/admin/login/?next=/admin/",
        {"username": "ops", "password": "right"},
        REMOTE_ADDR="198.51.100.1",
    )
    assert response.status_code == 302


def test_an_open_metrics_endpoint_in_production_is_a_warning(settings):
    settings.IS_PRODUCTION = True
    settings.OMNIROUTE_METRICS_TOKEN = ""
    found = [m.id for m in checks.run_checks() if m.id == "omniroute.W003"]
    assert found == ["omniroute.W003"]
    settings.OMNIROUTE_METRICS_TOKEN = "scrape-token"
    assert "omniroute.W003" not in [m.id for m in checks.run_checks()]
    settings.IS_PRODUCTION = False
    settings.OMNIROUTE_METRICS_TOKEN = ""
    assert "omniroute.W003" not in [m.id for m in checks.run_checks()]


def test_a_login_without_next_lands_on_the_dashboard(ops):
    """Issue #15 audit: /admin/login/ opened directly led to /accounts/profile/."""
    client = Client()
    page = client.get("/admin/login/")
    assert page.status_code == 200

    response = client.post(
        "/admin/login/",
        {"username": "ops", "password": "right"},
        REMOTE_ADDR="203.0.113.7",
    )

    assert response.status_code == 302
    assert response["Location"] == "/admin/"
    assert client.get(response["Location"]).status_code == 200


def test_the_default_profile_address_is_not_a_dead_end(ops):
    client = Client()
    client.force_login(ops)

    response = client.get("/accounts/profile/")

    assert response.status_code == 302
    assert response["Location"] == "/admin/"
