"""The gateway under test: a real uvicorn process on SQLite and the mock upstream.

Started the way the integration suite starts it (``tests/integration/conftest.py``,
whose ``Gateway`` class is reused): ``manage.py migrate``, uvicorn on a loopback
port, ``manage.py import_config`` for providers, models and the API key.  The mock
upstream runs on a daemon thread of this process, also on loopback, so the runner
scripts it directly (``RunningMock.add``) and reads what it received.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from providers.mock_upstream import RunningMock, start_in_thread
from tests.integration.conftest import Gateway, free_port, inherited_env

#: the one API key the clients use (a test key: the gateway listens on loopback only)
API_KEY = "sk-or-compat-00000000000000000000000000000000000"

#: upstream model ids: each client talks to MAIN; side requests (titles, quick
#: checks) go to AUX, so scripting MAIN is not consumed by them
MAIN = "main"
AUX = "aux"

_MODELS = f"""
    models:
      - id: {MAIN}
        context_window: 1000000
        capabilities: [tools, vision, reasoning, json]
      - id: {AUX}
        context_window: 1000000
        capabilities: [tools, vision, reasoning, json]
"""


def base_yaml(mock_url: str) -> str:
    """A chat-only OpenAI-kind provider ``oa`` and an Anthropic-kind ``an``."""
    return f"""
providers:
  - slug: oa
    kind: openai
    base_url: {mock_url}
    connections:
      - name: main
        api_key: sk-upstream-compat-oa-0000000000
{_MODELS}
  - slug: an
    kind: anthropic
    base_url: {mock_url}
    connections:
      - name: main
        api_key: sk-ant-upstream-compat-an-000000
{_MODELS}
api_keys:
  - name: compat
    key: {API_KEY}
"""


def responses_yaml(mock_url: str) -> str:
    """``rs``: an OpenAI-kind provider whose upstream speaks Responses."""
    return f"""
providers:
  - slug: rs
    kind: openai
    wire: responses
    base_url: {mock_url}
    connections:
      - name: main
        api_key: sk-upstream-compat-rs-0000000000
{_MODELS}
"""


@dataclass
class Stack:
    """The running mock and gateway; ``problems`` maps a provider slug to why it
    could not be configured (its rows fail with that reason)."""

    mock: RunningMock
    gateway: Gateway
    problems: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.gateway.url

    def reset(self) -> None:
        """Between two client runs: an empty script and record, fresh health."""
        self.mock.reset()
        self.gateway.reset_health()

    def stop(self) -> None:
        self.gateway.stop()
        self.mock.stop()


def _gateway_env(data_dir: Path) -> dict[str, str]:
    env = inherited_env()
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "omniroute_site.settings",
            "OMNIROUTE_DATA_DIR": str(data_dir),
            "OMNIROUTE_CONFIG_POLL_MS": "200",
            "OMNIROUTE_LOG_SYNC": "true",
            "OMNIROUTE_LOG_FLUSH_MS": "100",
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


def _check(result_code: int, what: str, stderr: str) -> None:
    if result_code != 0:
        raise RuntimeError(f"{what} failed:\n{stderr}")


def _apply(gateway: Gateway, text: str) -> tuple[bool, str]:
    """import_config; (applied, the command's messages)."""
    result = gateway.apply(text)
    messages = "\n".join(
        line.strip()
        for line in (result.stderr + "\n" + result.stdout).splitlines()
        if line.strip().startswith(("error:", "warning:", "CommandError"))
    )
    applied = result.returncode == 0
    return applied, messages or ("" if applied else result.stderr.strip())


def start(data_dir: Path) -> Stack:
    """A fresh data directory, the mock, the gateway, its configuration."""
    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.mkdir(parents=True)
    mock = start_in_thread("127.0.0.1")
    gateway = Gateway(data_dir, free_port(), _gateway_env(data_dir))
    try:
        gateway.start()
        created = gateway.manage(
            "createsuperuser",
            "--noinput",
            "--username",
            "ops",
            "--email",
            "ops@example.com",
        )
        _check(created.returncode, "createsuperuser", created.stderr)
        token = gateway.manage("create_admin_token", "ops")
        _check(token.returncode, "create_admin_token", token.stderr)
        gateway.admin_token = token.stdout.strip()
        applied, messages = _apply(gateway, base_yaml(mock.url))
        _check(0 if applied else 1, "import_config of the base config", messages)
    except BaseException:
        gateway.stop()
        mock.stop()
        raise
    stack = Stack(mock, gateway)
    if messages:
        stack.warnings.append(messages)
    applied, messages = _apply(gateway, responses_yaml(mock.url))
    if not applied:
        stack.problems["rs"] = (
            "import_config rejected the provider setting `wire: responses`: "
            + " ".join(messages.split())
        )
    elif messages:
        stack.warnings.append(messages)
    return stack
