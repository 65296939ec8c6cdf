"""``verify: false`` per provider (spec 10 §4): TLS verification off for that
provider's calls only, debug only, loudly."""

from __future__ import annotations

import logging
import ssl

import pytest

from providers.outbound_policy import OutboundPolicy, ProviderOutbound
from providers.validation import VERIFY_OFF, Checker, validate_provider

PROVIDER = {
    "slug": "lab",
    "kind": "openai",
    "base_url": "https://10.0.0.5:8443/v1",
    "verify": False,
}


def test_verify_is_part_of_a_providers_outbound_identity():
    off = ProviderOutbound(verify=False)
    assert off != ProviderOutbound()
    assert off == ProviderOutbound(verify=False)
    assert hash(off) == hash(ProviderOutbound(verify=False))
    assert "verify=False" in repr(off)
    assert "verify" not in repr(ProviderOutbound())


def test_only_the_providers_context_stops_verifying():
    policy = OutboundPolicy()
    off = policy.route(ProviderOutbound(verify=False)).tls
    process = policy.route(None).tls
    assert off is not process
    assert (off.context().verify_mode, off.context().check_hostname) == (
        ssl.CERT_NONE,
        False,
    )
    assert off.new_context().verify_mode == ssl.CERT_NONE  # httpx clients too
    assert (process.context().verify_mode, process.context().check_hostname) == (
        ssl.CERT_REQUIRED,
        True,
    )
    # a provider with other TLS settings but verify on keeps verifying
    headers_only = policy.route(ProviderOutbound(headers={"X-Title": "t"})).tls
    assert headers_only is process


def test_a_fixed_ssl_context_refuses_verify_off():
    policy = OutboundPolicy(ssl_context=ssl.create_default_context())
    with pytest.raises(ValueError, match="fixed ssl_context"):
        policy.route(ProviderOutbound(verify=False))


def test_validation_refuses_verify_off_without_debug(settings):
    settings.DEBUG = False
    check = Checker("providers[0]")
    clean = validate_provider(dict(PROVIDER), check)
    assert [str(p) for p in check.problems] == [
        "providers[0].verify: false is allowed only with DJANGO_DEBUG=1"
    ]
    assert "verify" not in clean["settings"]


def test_validation_accepts_verify_off_under_debug_with_a_warning(settings, caplog):
    settings.DEBUG = True
    check = Checker("providers[0]")
    with caplog.at_level(logging.WARNING, logger="providers.validation"):
        clean = validate_provider(dict(PROVIDER), check)
    assert check.problems == []
    assert clean["settings"] == {"verify": False}
    assert [str(w) for w in check.warnings] == [f"providers[0].verify: {VERIFY_OFF}"]
    assert "'lab'" in caplog.text
    assert VERIFY_OFF in caplog.text


def test_verify_true_or_absent_stores_nothing_and_a_non_boolean_is_named(settings):
    settings.DEBUG = False
    for given in ({}, {"verify": True}):
        check = Checker("")
        clean = validate_provider({**PROVIDER, **given, "verify": True}, check)
        assert check.problems == []
        assert check.warnings == []
        assert "verify" not in clean["settings"]
    check = Checker("")
    validate_provider({**PROVIDER, "verify": "no"}, check)
    assert [str(p) for p in check.problems] == ["verify: must be true or false"]


def test_the_snapshot_ignores_verify_off_without_debug(settings, caplog):
    from gateway.config.snapshot import provider_outbound

    settings.DEBUG = True
    assert provider_outbound({"verify": False}) == ProviderOutbound(verify=False)
    settings.DEBUG = False
    with caplog.at_level(logging.ERROR):
        assert provider_outbound({"verify": False}) == ProviderOutbound()
    assert "TLS verification stays on" in caplog.text


@pytest.mark.django_db
def test_a_system_check_refuses_stored_verify_off_without_debug(settings):
    from providers.checks import check_tls_verification
    from providers.models import Provider

    Provider.objects.create(
        slug="lab", kind="openai", base_url="https://h/v1", settings={"verify": False}
    )
    Provider.objects.create(slug="ok", kind="openai", base_url="https://h/v1")
    settings.DEBUG = False
    found = check_tls_verification(databases=["default"])
    assert [(m.id, "lab" in m.msg, "ok" in m.msg.split("(s)")[1]) for m in found] == [
        ("providers.E010", True, False)
    ]
    assert check_tls_verification() == []  # not asked for the database checks
    settings.DEBUG = True
    assert check_tls_verification(databases=["default"]) == []


@pytest.mark.django_db
def test_saving_a_provider_with_verify_off_in_the_admin_warns(settings, caplog):
    from django.contrib.auth.models import User
    from django.contrib.messages import get_messages
    from django.test import Client
    from django.urls import reverse

    from providers.models import Provider

    settings.DEBUG = True
    lab = Provider.objects.create(
        slug="lab", kind="openai", base_url="https://h/v1", settings={"verify": False}
    )
    client = Client()
    client.force_login(User.objects.create_superuser("root", "r@example.com", "pw"))
    with caplog.at_level(logging.WARNING, logger="providers.admin"):
        response = client.post(
            reverse("admin:providers_provider_change", args=[lab.pk]),
            {
                "slug": "lab",
                "kind": "openai",
                "base_url": "https://h2/v1",
                "connections-TOTAL_FORMS": "0",
                "connections-INITIAL_FORMS": "0",
                "models-TOTAL_FORMS": "0",
                "models-INITIAL_FORMS": "0",
            },
        )
    assert response.status_code == 302
    shown = [str(m) for m in get_messages(response.wsgi_request)]
    assert f"lab: {VERIFY_OFF}." in shown
    assert VERIFY_OFF in caplog.text
    assert Provider.objects.get(pk=lab.pk).settings == {"verify": False}
