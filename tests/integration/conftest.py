"""A real gateway process (uvicorn, embedded SQLite) and a real mock upstream.

The gateway is configured the way the black-box suite configures it: ``manage.py
import_config`` on its own data directory, then requests over HTTP.  Each
``apply()`` waits until the running gateway reports the new config version.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import sync_playwright

from providers.mock_upstream import RunningMock, start_in_thread
from tests.services import unavailable

ROOT = Path(__file__).resolve().parents[2]
KEY_ALL = "sk-or-test-all-000000000000000000000000000000000"
KEY_PA_ONLY = "sk-or-test-pa-only-0000000000000000000000000000"
KEY_DISABLED = "sk-or-test-disabled-000000000000000000000000000"
KEY_EXPIRED = "sk-or-test-expired-0000000000000000000000000000"
#: Debian's Chromium (``make browser`` installs it), driven by Playwright
CHROMIUM = Path(os.environ.get("OMNIROUTE_CHROMIUM", "/usr/bin/chromium"))
STEP_TIMEOUT_MS = 15_000


#: settings a gateway process under test always gets its own value of
OWN_SETTINGS = ("DJANGO_", "DATABASE_URL", "REDIS_URL", "OMNIROUTE_")


def inherited_env() -> dict[str, str]:
    """This process's environment minus the settings each gateway is given; the
    in-process scheduler off (a job run mid-test would change what ``auto`` reads)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(OWN_SETTINGS)}
    env["OMNIROUTE_SCHEDULER"] = "off"
    return env


def post_chat(
    gateway: Gateway,
    *,
    key: str = KEY_ALL,
    headers: dict[str, str] | None = None,
    timeout: float = 30,
    **body: Any,
) -> httpx.Response:
    """One chat request with a fresh user message (a fresh conversation)."""
    return httpx.post(
        f"{gateway.url}/v1/chat/completions",
        headers={"Authorization": f"Bearer {key}", **(headers or {})},
        json={"messages": [{"role": "user", "content": uuid.uuid4().hex}], **body},
        timeout=timeout,
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Gateway:
    def __init__(self, data_dir: Path, port: int, env: dict[str, str]) -> None:
        self.data_dir = data_dir
        self.port = port
        self.env = env
        self.url = f"http://127.0.0.1:{port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.log = data_dir / "gateway.log"
        self.admin_token = ""

    def reset_health(self) -> None:
        """Forget breakers, cooldowns, auth disables and locks (between tests)."""
        response = httpx.post(
            f"{self.url}/api/connections/reset-health",
            headers={"Authorization": f"Bearer {self.admin_token}"},
            timeout=10,
        )
        assert response.status_code == 200, response.text

    def manage(
        self, *args: str, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def start(self, *, migrate: bool = True) -> None:
        """Migrate (skip it when another process has), serve, wait for /healthz."""
        if migrate:
            result = self.manage("migrate", "--noinput", "-v0")
            assert result.returncode == 0, result.stderr
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "uvicorn",
                    "omniroute_site.asgi:application",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                    "--lifespan",
                    "on",
                    "--no-access-log",
                    # as make run, the Dockerfile and compose serve it (issue #16)
                    "--http",
                    "omniroute_site.server:GuardedHttpToolsProtocol",
                ],
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        # generous: three servers start at once on a loaded CI machine; a process
        # that exits stops the wait at once
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError(f"gateway did not start:\n{self.log.read_text()}")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()

    def db(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.data_dir / "omniroute.sqlite3", timeout=5)
        conn.row_factory = sqlite3.Row
        return conn

    def config_version(self) -> int:
        with self.db() as conn:
            row = conn.execute(
                "select version from providers_configrevision"
            ).fetchone()
        return int(row[0]) if row else 0

    def served_version(self) -> int:
        text = httpx.get(f"{self.url}/metrics", timeout=5).text
        match = re.search(r"^omniroute_config_version (\S+)$", text, re.M)
        return int(float(match.group(1))) if match else -1

    def apply(self, yaml_text: str, *args: str) -> subprocess.CompletedProcess[str]:
        """import_config, then wait (≤ 2 s, the spec's bound) until it is served."""
        result = self.manage("import_config", "-", *args, stdin=yaml_text)
        if result.returncode != 0:
            return result
        self.wait_for_version(self.config_version())
        return result

    def wait_for_version(self, version: int, timeout: float = 2.0) -> float:
        started = time.monotonic()
        while self.served_version() < version:
            if time.monotonic() - started > timeout:
                raise AssertionError(f"config v{version} not served within {timeout}s")
            time.sleep(0.05)
        return time.monotonic() - started

    def requests_log(self, where: str = "1=1", *params: Any) -> list[sqlite3.Row]:
        with self.db() as conn:
            return conn.execute(
                f"select * from telemetry_requestlog where {where} order by created_at",
                params,
            ).fetchall()

    def attempts_log(self, request_id: str) -> list[sqlite3.Row]:
        with self.db() as conn:
            return conn.execute(
                "select * from telemetry_attemptlog where request_id = ? "
                "order by attempt_no",
                (request_id.replace("-", ""),),
            ).fetchall()


def base_config(mock_url: str) -> str:
    return f"""
providers:
  - slug: pa
    kind: openai
    base_url: {mock_url}
    connections:
      - name: main
        api_key: sk-upstream-secret-pa-1234567890
    models:
      - id: m1
        input_cost: 0.05
        output_cost: 0.40
        context_window: 400000
  - slug: pb
    kind: openai
    base_url: {mock_url}
    connections:
      - name: main
        api_key: sk-upstream-secret-pb-1234567890
    models:
      - id: m2
        input_cost: 0.15
        output_cost: 0.60
  - slug: pc
    kind: anthropic
    base_url: {mock_url}
    connections:
      - name: main
        api_key: sk-ant-upstream-secret-pc-123456
    models:
      - id: m3
combos:
  - name: team
    strategy: priority
    targets:
      - model: pa/m1
      - model: pb/m2
api_keys:
  - name: all
    key: {KEY_ALL}
  - name: pa-only
    key: {KEY_PA_ONLY}
    allowed_models: ["pa/*"]
  - name: disabled
    key: {KEY_DISABLED}
    active: false
  - name: expired
    key: {KEY_EXPIRED}
    expires_at: 2020-01-01T00:00:00Z
"""


@pytest.fixture(scope="session")
def mock() -> Iterator[RunningMock]:
    with start_in_thread() as running:
        yield running


@pytest.fixture(scope="session")
def gateway(mock: RunningMock) -> Iterator[Gateway]:
    data_dir = Path(tempfile.mkdtemp(prefix="omniroute-it-"))
    env = inherited_env()
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "omniroute_site.settings",
            "OMNIROUTE_DATA_DIR": str(data_dir),
            "OMNIROUTE_CONFIG_POLL_MS": "200",
            "OMNIROUTE_LOG_SYNC": "true",
            "OMNIROUTE_LOG_FLUSH_MS": "100",
            "OMNIROUTE_MAX_BODY_BYTES": "65536",
            "OMNIROUTE_HEADER_TIMEOUT_S": "3",
            "OMNIROUTE_BODY_TIMEOUT_S": "3",
            "PYTHONUNBUFFERED": "1",
        }
    )
    instance = Gateway(data_dir, free_port(), env)
    instance.start()
    created = instance.manage(
        "createsuperuser",
        "--noinput",
        "--username",
        "ops",
        "--email",
        "ops@example.com",
    )
    assert created.returncode == 0, created.stderr
    token = instance.manage("create_admin_token", "ops")
    assert token.returncode == 0, token.stderr
    instance.admin_token = token.stdout.strip()
    result = instance.apply(base_config(mock.url))
    assert result.returncode == 0, result.stderr
    yield instance
    instance.stop()


@pytest.fixture
def upstream(mock: RunningMock, gateway: Gateway) -> Iterator[RunningMock]:
    mock.reset()
    gateway.reset_health()
    yield mock
    mock.reset()
    gateway.reset_health()


@pytest.fixture
def client(gateway: Gateway) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=gateway.url, timeout=30, headers={"Authorization": f"Bearer {KEY_ALL}"}
    ) as http:
        yield http


# --- the console in headless Chromium (shared by the browser tests) ---------------


def admin_user(
    gateway: Gateway,
    username: str,
    *,
    superuser: bool,
    perms: tuple[str, ...] = (),
) -> tuple[str, str]:
    """A user with a password (the admin login form needs one): a superuser, or
    staff with only the permissions ``perms`` (``"app.codename"``)."""
    password = secrets.token_urlsafe(16)
    create = (
        f"User.objects.create_superuser({username!r}, 'op@example.com', {password!r})"
        if superuser
        else f"User.objects.create_user({username!r}, password={password!r}, "
        "is_staff=True)"
    )
    grant = "".join(
        f"user.user_permissions.add(Permission.objects.get("
        f"content_type__app_label={app!r}, codename={codename!r}))\n"
        for app, codename in (perm.split(".") for perm in perms)
    )
    code = (
        "from django.contrib.auth.models import Permission, User\n"
        f"User.objects.filter(username={username!r}).delete()\n"
        f"user = {create}\n"
        f"{grant}"
    )
    result = gateway.manage("shell", "-c", code)
    assert result.returncode == 0, result.stderr
    return username, password


@contextlib.contextmanager
def logged_in(
    browser: Any, gateway: Gateway, user: tuple[str, str], *, width: int = 1440
) -> Iterator[Any]:
    """A tab logged in through the admin's login form, at ``width`` px."""
    context = browser.new_context(
        base_url=gateway.url, viewport={"width": width, "height": 900}
    )
    context.set_default_timeout(STEP_TIMEOUT_MS)
    try:
        tab = context.new_page()
        tab.goto("/admin/login/?next=/admin/")
        tab.fill("#id_username", user[0])
        tab.fill("#id_password", user[1])
        tab.click("#login-form [type=submit]")
        tab.wait_for_url("**/admin/")
        yield tab
    finally:
        context.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium; without it the browser tests skip (fail under CI=true).

    One per module, never per session: Playwright's sync API keeps an event loop
    running in the main thread while it lives, and an asyncio test that runs after
    it (pytest-asyncio's ``Runner.run``) refuses to start under a running loop."""
    if not CHROMIUM.exists():
        unavailable(f"Chromium is missing at {CHROMIUM} (make browser installs it)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"]
        )
        yield chromium
        chromium.close()


@pytest.fixture(scope="session")
def operator(gateway: Gateway) -> tuple[str, str]:
    """A superuser of the console."""
    return admin_user(gateway, "console-operator", superuser=True)


@pytest.fixture
def admin_page(
    browser: Any, gateway: Gateway, operator: tuple[str, str]
) -> Iterator[Any]:
    """A console tab logged in as ``operator``, 1440 px wide."""
    with logged_in(browser, gateway, operator) as tab:
        yield tab
