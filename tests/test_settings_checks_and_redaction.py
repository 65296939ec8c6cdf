"""Settings parsing, system checks and log redaction (spec 08 §1 and §5).

The settings are read once per process, so each case runs ``manage.py`` in a fresh
interpreter with a clean environment (only what the case sets).
"""

from __future__ import annotations

import base64
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from telemetry.sanitize import RedactingFilter

ROOT = Path(__file__).resolve().parent.parent
PG_URL = "postgres://postgres@127.0.0.1:5432/omniroute_h10"


def manage(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", ""),
        "DJANGO_SETTINGS_MODULE": "omniroute_site.settings",
        "OMNIROUTE_DATA_DIR": str(tmp_path / "data"),
        **env,
    }
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def production(**extra: str) -> dict[str, str]:
    """Every ★ setting of production, overridable per case."""
    env = {
        "OMNIROUTE_ENV": "production",
        "DJANGO_SECRET_KEY": "x" * 50,
        "OMNIROUTE_ENCRYPTION_KEY": Fernet.generate_key().decode(),
        "DJANGO_ALLOWED_HOSTS": "gateway.example.com",
        "DATABASE_URL": PG_URL,
    }
    env.update(extra)
    return {k: v for k, v in env.items() if v != "<unset>"}


def shell(tmp_path: Path, code: str, **env: str) -> str:
    result = manage(tmp_path, "shell", "--no-imports", "-c", code, **env)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


# --- §1 the ★ settings ------------------------------------------------------------


def test_production_with_every_mandatory_setting_passes_the_checks(
    tmp_path: Path,
) -> None:
    result = manage(tmp_path, "check", **production())

    assert result.returncode == 0, result.stderr
    assert "omniroute.E" not in result.stdout + result.stderr


def test_production_without_allowed_hosts_is_refused_naming_it(tmp_path: Path) -> None:
    result = manage(tmp_path, "check", **production(DJANGO_ALLOWED_HOSTS="<unset>"))

    assert result.returncode != 0
    assert "omniroute.E003" in result.stderr
    assert "DJANGO_ALLOWED_HOSTS" in result.stderr


@pytest.mark.parametrize("name", ["DJANGO_SECRET_KEY", "DATABASE_URL"])
def test_production_without_a_mandatory_setting_is_refused_naming_it(
    tmp_path: Path, name: str
) -> None:
    result = manage(tmp_path, "check", **production(**{name: "<unset>"}))

    assert result.returncode != 0
    assert "omniroute.E003" in result.stderr
    assert name in result.stderr


def test_production_on_sqlite_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite3'}"
    result = manage(tmp_path, "check", **production(DATABASE_URL=url))

    assert result.returncode != 0
    assert "omniroute.E003" in result.stderr
    assert "SQLite" in result.stderr


def test_production_never_derives_the_encryption_key(tmp_path: Path) -> None:
    result = manage(tmp_path, "check", **production(OMNIROUTE_ENCRYPTION_KEY="<unset>"))

    assert result.returncode != 0
    assert "omniroute.E002" in result.stderr


def test_debug_is_refused_in_production(tmp_path: Path) -> None:
    result = manage(tmp_path, "check", **production(DJANGO_DEBUG="yes"))

    assert result.returncode != 0
    assert "omniroute.E004" in result.stderr


def test_an_invalid_encryption_key_stops_the_checks_naming_the_variable(
    tmp_path: Path,
) -> None:
    good = Fernet.generate_key().decode()
    result = manage(tmp_path, "check", OMNIROUTE_ENCRYPTION_KEY=f"{good},not-a-key")

    assert result.returncode != 0
    assert "omniroute.E002" in result.stderr
    assert "OMNIROUTE_ENCRYPTION_KEY" in result.stderr
    assert "not-a-key" not in result.stderr  # a key is never echoed


# --- §1 parsing rules --------------------------------------------------------------


@pytest.mark.parametrize("value", ["maybe", "on", "2"])
def test_a_bad_boolean_stops_startup_naming_the_variable(
    tmp_path: Path, value: str
) -> None:
    result = manage(tmp_path, "check", OMNIROUTE_LOG_SYNC=value)

    assert result.returncode != 0
    assert "OMNIROUTE_LOG_SYNC" in result.stderr


def test_booleans_accept_the_six_spellings(tmp_path: Path) -> None:
    code = "from django.conf import settings as s; print(s.OMNIROUTE_LOG_SYNC)"
    seen = [
        shell(tmp_path, code, OMNIROUTE_LOG_SYNC=value)
        for value in ("true", "false", "1", "0", "yes", "no")
    ]

    assert seen == ["True", "False", "True", "False", "True", "False"]


def test_a_secret_can_come_from_a_file(tmp_path: Path) -> None:
    key = Fernet.generate_key().decode()
    (tmp_path / "key").write_text(key + "\n")
    (tmp_path / "secret").write_text("file-secret-key-" + "y" * 40)
    code = (
        "from django.conf import settings as s; "
        "print(s.OMNIROUTE_ENCRYPTION_KEYS[0]); print(s.SECRET_KEY)"
    )

    out = shell(
        tmp_path,
        code,
        OMNIROUTE_ENCRYPTION_KEY_FILE=str(tmp_path / "key"),
        DJANGO_SECRET_KEY_FILE=str(tmp_path / "secret"),
    )

    assert out.splitlines() == [key, "file-secret-key-" + "y" * 40]


def test_the_nadir_key_can_come_from_a_file(tmp_path: Path) -> None:
    """The Nadir key is read from the environment at call time (spec 04 §8)."""
    (tmp_path / "nadir").write_text("nadir-secret\n")
    code = (
        "from gateway.auto.engine.nadir import nadir_api_key; print(nadir_api_key({}))"
    )

    out = shell(tmp_path, code, OMNIROUTE_NADIR_API_KEY_FILE=str(tmp_path / "nadir"))

    assert out == "nadir-secret"


def test_an_unknown_log_level_stops_startup_naming_the_variable(
    tmp_path: Path,
) -> None:
    result = manage(tmp_path, "check", OMNIROUTE_LOG_LEVEL="verbose")

    assert result.returncode != 0
    assert "OMNIROUTE_LOG_LEVEL" in result.stderr


def test_embedded_defaults(tmp_path: Path) -> None:
    code = (
        "from django.conf import settings as s\n"
        "print(s.ALLOWED_HOSTS, s.DEBUG, s.SESSION_COOKIE_SECURE,"
        " s.SECURE_HSTS_SECONDS)\n"
        "print(s.DATABASES['default']['CONN_MAX_AGE'])\n"
        "from django.db import connection\n"
        "c = connection.cursor()\n"
        "print(c.execute('PRAGMA journal_mode').fetchone()[0])\n"
        "print(c.execute('PRAGMA busy_timeout').fetchone()[0])\n"
    )

    out = shell(tmp_path, code).splitlines()

    assert out == [
        "['localhost', '127.0.0.1', '[::1]'] False False 0",
        "0",
        "wal",
        "5000",
    ]
    secret = tmp_path / "data" / "secret_key"
    assert secret.stat().st_mode & 0o777 == 0o600


def test_production_cookies_and_headers_are_hardened(tmp_path: Path) -> None:
    code = (
        "from django.conf import settings as s\n"
        "print(s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE,"
        " s.SESSION_COOKIE_HTTPONLY, s.SECURE_CONTENT_TYPE_NOSNIFF,"
        " s.X_FRAME_OPTIONS, s.SECURE_HSTS_SECONDS)"
    )

    out = shell(tmp_path, code, **production(DJANGO_SECURE_HSTS_SECONDS="3600"))

    assert out == "True True True True DENY 3600"


# --- the encryption key fallback ------------------------------------------------------


def test_the_derived_key_is_hkdf_sha256_of_the_secret_key(tmp_path: Path) -> None:
    secret = "embedded-secret-key-" + "z" * 30
    expected = base64.urlsafe_b64encode(
        HKDF(
            algorithm=hashes.SHA256(), length=32, salt=b"omniroute", info=b"fernet-v1"
        ).derive(secret.encode())
    ).decode()
    code = "from django.conf import settings as s; print(s.OMNIROUTE_ENCRYPTION_KEYS)"

    out = shell(tmp_path, code, DJANGO_SECRET_KEY=secret)
    check = manage(tmp_path, "check", DJANGO_SECRET_KEY=secret)

    assert out == repr([expected])
    assert "omniroute.W001" in check.stderr + check.stdout


# --- §5.4 the logging filter ----------------------------------------------------------


def _filtered(message: str, *args: object) -> str:
    record = logging.LogRecord("t", logging.INFO, __file__, 1, message, args, None)
    RedactingFilter().filter(record)
    return record.getMessage()


@pytest.mark.parametrize(
    ("headers", "secrets"),
    [
        ({"Cookie": "sessionid=abc123; csrftoken=zzz999"}, ["abc123", "zzz999"]),
        ([(b"x-api-key", b"supersecretvalue")], ["supersecretvalue"]),
        ([("api-key", "supersecretvalue")], ["supersecretvalue"]),
        ({"x-api-key": "two words"}, ["two", "words"]),
        ({"Proxy-Authorization": "Negotiate abcdef"}, ["abcdef"]),
        ({"authorization": "Basic dXNlcjpwYXNz"}, ["dXNlcjpwYXNz"]),
    ],
)
def test_the_log_filter_redacts_credential_headers_in_any_shape(
    headers: object, secrets: list[str]
) -> None:
    line = _filtered("headers=%s", headers)

    for secret in secrets:
        assert secret not in line
    assert "***" in line


def test_the_log_filter_redacts_header_lines() -> None:
    line = _filtered("Cookie: a=secret1; b=secret2\nProxy-Authorization: Negotiate s3")

    for secret in ("secret1", "secret2", "s3"):
        assert secret not in line


def _fail() -> None:
    raise ValueError("upstream said Authorization: Bearer sk-or-" + "A" * 43)


def test_the_log_filter_redacts_tracebacks_too() -> None:
    try:
        _fail()
    except ValueError:
        record = logging.LogRecord(
            "t", logging.ERROR, __file__, 1, "failed", None, sys.exc_info()
        )
    RedactingFilter().filter(record)
    text = logging.Formatter().format(record)

    assert "A" * 43 not in text
    assert text.startswith("failed\nTraceback")  # still a readable traceback


# --- the other system checks ----------------------------------------------------------


def test_a_credential_header_as_session_header_is_refused(tmp_path: Path) -> None:
    result = manage(
        tmp_path, "check", OMNIROUTE_SESSION_EXTRA_HEADERS="x-session, X-Api-Key"
    )

    assert result.returncode != 0
    assert "omniroute.E010" in result.stderr


def test_several_workers_without_redis_warn(tmp_path: Path) -> None:
    result = manage(tmp_path, "check", WEB_CONCURRENCY="4")

    assert result.returncode == 0
    assert "omniroute.W002" in result.stdout + result.stderr
