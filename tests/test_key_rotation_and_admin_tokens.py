"""``rotate_encryption_key`` and admin tokens (spec 08 §1 and §5.1/§5.2): rotation
re-encrypts every secret under the first key, an unreadable secret is kept, named and
fails the command, and the admin token lookup ends with a constant-time comparison."""

from __future__ import annotations

import hmac
from io import StringIO
from unittest import mock

import pytest
from cryptography.fernet import Fernet
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from pytest_django.fixtures import Settings
from rest_framework.test import APIRequestFactory

from combos.api_auth import AdminTokenAuthentication, issue_admin_token
from providers import crypto
from providers.models import Connection, Provider
from telemetry.models import WebhookEndpoint

pytestmark = pytest.mark.django_db


@pytest.fixture
def old_and_new(settings: Settings) -> tuple[str, str]:
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.OMNIROUTE_ENCRYPTION_KEYS = [old]
    return old, new


def _connection(name: str, secret: str) -> Connection:
    provider, _ = Provider.objects.get_or_create(
        slug="rot", defaults={"kind": "openai", "base_url": "http://127.0.0.1:9/v1"}
    )
    connection = Connection(provider=provider, name=name)
    connection.set_api_key(secret)
    connection.save()
    return connection


def test_rotation_re_encrypts_every_secret_under_the_first_key(
    old_and_new: tuple[str, str], settings: Settings
) -> None:
    old, new = old_and_new
    connection = _connection("main", "sk-upstream-secret-7890")
    env_ref = _connection("env", "env:ROT_KEY")
    endpoint = WebhookEndpoint(url="http://127.0.0.1:9/hook", events=[])
    endpoint.set_secret("whsec-signing-key-1234")
    endpoint.save()
    settings.OMNIROUTE_ENCRYPTION_KEYS = [new, old]
    out = StringIO()

    call_command("rotate_encryption_key", stdout=out)
    settings.OMNIROUTE_ENCRYPTION_KEYS = [new]  # the old key is dropped afterwards

    connection.refresh_from_db()
    endpoint.refresh_from_db()
    env_ref.refresh_from_db()
    assert crypto.decrypt(connection.api_key_encrypted) == "sk-upstream-secret-7890"
    assert endpoint.secret() == "whsec-signing-key-1234"
    assert (env_ref.api_key_ref, env_ref.api_key_encrypted) == ("env:ROT_KEY", "")
    assert connection.api_key_display == "set"
    assert "2 secrets re-encrypted" in out.getvalue()


def test_an_unreadable_secret_is_kept_named_and_fails_the_command(
    old_and_new: tuple[str, str], settings: Settings
) -> None:
    _old, new = old_and_new
    lost = _connection("lost", "sk-lost-secret-0000")
    settings.OMNIROUTE_ENCRYPTION_KEYS = [new]
    readable = _connection("kept", "sk-kept-secret-1111")
    before = lost.api_key_encrypted
    err = StringIO()

    with pytest.raises(CommandError, match="1 secrets could not be decrypted"):
        call_command("rotate_encryption_key", stdout=StringIO(), stderr=err)

    lost.refresh_from_db()
    readable.refresh_from_db()
    assert lost.api_key_encrypted == before
    assert f"providers.Connection {lost.pk}" in err.getvalue()
    assert crypto.decrypt(readable.api_key_encrypted) == "sk-kept-secret-1111"


def test_admin_token_lookup_ends_with_a_constant_time_comparison() -> None:
    user = User.objects.create_user("ops", is_staff=True)
    token = issue_admin_token(user)
    request = APIRequestFactory().get("/api/", HTTP_AUTHORIZATION=f"Bearer {token}")

    with mock.patch(
        "combos.api_auth.hmac.compare_digest", wraps=hmac.compare_digest
    ) as compare:
        authenticated = AdminTokenAuthentication().authenticate(request)

    assert authenticated is not None
    assert authenticated[0] == user
    assert compare.called
    assert token.startswith("omr-adm-")
    assert len(token) == len("omr-adm-") + 43
