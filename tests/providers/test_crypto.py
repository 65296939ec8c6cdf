"""Provider credentials at rest: Fernet, MultiFernet rotation (spec 08 §5.2)."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured
from pytest_django.fixtures import Settings

from providers import crypto
from providers.models import Connection, Provider


@pytest.fixture
def keys(settings: Settings) -> list[str]:
    """Two fresh keys; the settings start with only the first."""
    first, second = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.OMNIROUTE_ENCRYPTION_KEYS = [first]
    return [first, second]


def test_a_secret_survives_an_encrypt_decrypt_round_trip(keys: list[str]) -> None:
    token = crypto.encrypt("sk-upstream-ключ-7890")

    assert token != "sk-upstream-ключ-7890"
    assert "7890" not in token
    assert crypto.decrypt(token) == "sk-upstream-ключ-7890"


def test_encrypting_twice_gives_two_tokens(keys: list[str]) -> None:
    assert crypto.encrypt("same") != crypto.encrypt("same")


def test_with_two_keys_the_first_encrypts_and_both_decrypt(
    keys: list[str], settings: Settings
) -> None:
    old_token = crypto.encrypt("old secret")
    settings.OMNIROUTE_ENCRYPTION_KEYS = [keys[1], keys[0]]

    new_token = crypto.encrypt("new secret")

    assert crypto.decrypt(old_token) == "old secret"
    assert crypto.decrypt(new_token) == "new secret"
    assert Fernet(keys[1].encode()).decrypt(new_token.encode()) == b"new secret"


def test_rotating_a_token_re_encrypts_it_under_the_first_key(
    keys: list[str], settings: Settings
) -> None:
    old_token = crypto.encrypt("secret")
    settings.OMNIROUTE_ENCRYPTION_KEYS = [keys[1], keys[0]]

    rotated = crypto.rotate(old_token)
    settings.OMNIROUTE_ENCRYPTION_KEYS = [keys[1]]

    assert crypto.decrypt(rotated) == "secret"
    with pytest.raises(crypto.SecretUnreadable):
        crypto.decrypt(old_token)


@pytest.mark.parametrize("token", ["garbage", "", "gAAAAABnot-a-token", "ключ"])
def test_an_unreadable_token_raises_secret_unreadable(
    keys: list[str], token: str
) -> None:
    with pytest.raises(crypto.SecretUnreadable, match="cannot be decrypted"):
        crypto.decrypt(token)


def test_a_token_of_a_removed_key_raises_secret_unreadable(
    keys: list[str], settings: Settings
) -> None:
    token = crypto.encrypt("secret")
    settings.OMNIROUTE_ENCRYPTION_KEYS = [keys[1]]

    with pytest.raises(crypto.SecretUnreadable):
        crypto.decrypt(token)


def test_without_any_key_encryption_is_refused(settings: Settings) -> None:
    settings.OMNIROUTE_ENCRYPTION_KEYS = []

    with pytest.raises(ImproperlyConfigured, match=r"providers\.E001"):
        crypto.encrypt("secret")


def test_a_connection_stores_a_literal_encrypted_and_shows_only_that_it_is_set(
    keys: list[str],
) -> None:
    connection = Connection(provider=Provider(slug="pa"), name="main")

    connection.set_api_key("  sk-upstream-secret-7890 ")

    assert connection.api_key_ref == ""
    assert crypto.decrypt(connection.api_key_encrypted) == "sk-upstream-secret-7890"
    assert connection.api_key_display == "set"  # no part of it (issue #15 audit)


def test_a_connection_stores_an_env_reference_as_is(keys: list[str]) -> None:
    connection = Connection(provider=Provider(slug="pa"), name="main")
    connection.set_api_key("sk-upstream-secret-7890")

    connection.set_api_key("env:PA_KEY")

    assert (connection.api_key_ref, connection.api_key_encrypted) == ("env:PA_KEY", "")
    assert connection.api_key_display == "env:PA_KEY"


def test_clearing_a_connection_secret_removes_every_trace(keys: list[str]) -> None:
    connection = Connection(provider=Provider(slug="pa"), name="main")
    connection.set_api_key("sk-upstream-secret-7890")

    connection.set_api_key("")

    assert (connection.has_api_key, connection.api_key_display) == (False, "")
    assert (connection.api_key_ref, connection.api_key_encrypted) == ("", "")
