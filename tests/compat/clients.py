"""The three CLI clients: how each is installed, configured and run non-interactively.

Every client runs with an environment built from nothing (no variable of the caller
leaks in: no real API key, no proxy), a HOME and XDG directories inside ``.compat``,
and telemetry, error reporting and update checks switched off.  Each writes its
configuration pointing at the gateway on loopback and nothing else.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.compat.stack import API_KEY, AUX, MAIN

#: the environment variable the clients read the gateway's key from
KEY_ENV = "OMNIROUTE_API_KEY"


@dataclass(frozen=True)
class Row:
    """One line of the table: a client, the API it speaks, the upstream behind."""

    id: str
    client: str  # key of CLIENTS
    surface: str  # what the client speaks to the gateway
    provider: str  # gateway provider slug: oa (openai, chat), an (anthropic), rs
    upstream: str  # shown in the table
    expected_path: str  # the path the mock upstream must be called on
    sdk: str = ""  # opencode: the provider package

    @property
    def model(self) -> str:
        return f"{self.provider}/{MAIN}"

    @property
    def aux_model(self) -> str:
        return f"{self.provider}/{AUX}"


#: stands for the prompt in a prepared command line
PROMPT = "<prompt>"


@dataclass
class Prepared:
    argv: list[str]  # the command line, PROMPT where the prompt goes
    env: dict[str, str]
    cwd: Path
    answer_file: Path | None = None  # where the client writes its final answer

    def command(self, prompt: str) -> list[str]:
        return [prompt if arg == PROMPT else arg for arg in self.argv]


class Client:
    name = ""
    package = ""
    binary = ""
    #: the shell tool this client declares, used when its tool list was not seen
    default_tool = ""

    def __init__(self, prefix: Path) -> None:
        self.prefix = prefix  # .compat

    @property
    def exe(self) -> Path:
        return self.prefix / "node_modules" / ".bin" / self.binary

    def version(self) -> str:
        manifest = self.prefix / "node_modules" / self.package / "package.json"
        try:
            return str(json.loads(manifest.read_text())["version"])
        except (OSError, ValueError, KeyError):
            return "not installed"

    def home(self) -> Path:
        return self.prefix / "home" / self.name

    def base_env(self) -> dict[str, str]:
        home = self.home()
        bin_dirs = [str(self.prefix / "node_modules" / ".bin")]
        node = shutil.which("node")
        if node:
            bin_dirs.append(str(Path(node).parent))
        bin_dirs += ["/usr/local/bin", "/usr/bin", "/bin"]
        return {
            "PATH": os.pathsep.join(dict.fromkeys(bin_dirs)),
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_DATA_HOME": str(home / ".local" / "share"),
            "XDG_STATE_HOME": str(home / ".local" / "state"),
            "XDG_CACHE_HOME": str(home / ".cache"),
            "TMPDIR": str(home / "tmp"),
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "NO_COLOR": "1",
            "CI": "true",
            KEY_ENV: API_KEY,
        }

    def prepare(self, row: Row, gateway_url: str, cwd: Path) -> Prepared:
        raise NotImplementedError

    def answer(self, prepared: Prepared, stdout: str) -> str:
        if prepared.answer_file is not None and prepared.answer_file.exists():
            return prepared.answer_file.read_text(errors="replace")
        return stdout


# --------------------------------------------------------------------------- codex


def codex_config(base_url: str, model: str) -> str:
    """The config.toml a user needs (docs/compatibility.md), plus the harness's
    no-retry settings so a failure shows at once."""
    return f"""\
model = "{model}"
model_provider = "omniroute"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[model_providers.omniroute]
name = "OmniRoute"
base_url = "{base_url}/v1"
env_key = "{KEY_ENV}"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"

[features]
# the plugin marketplace sync looks up github.com, api.github.com and chatgpt.com
plugins = false
"""


class Codex(Client):
    name = "codex"
    package = "@openai/codex"
    binary = "codex"
    default_tool = "exec_command"

    def prepare(self, row: Row, gateway_url: str, cwd: Path) -> Prepared:
        codex_home = self.home() / ".codex"
        codex_home.mkdir(parents=True, exist_ok=True)
        (codex_home / "config.toml").write_text(codex_config(gateway_url, row.model))
        env = self.base_env() | {"CODEX_HOME": str(codex_home)}
        answer = cwd.parent / f"{cwd.name}.last-message.txt"
        answer.unlink(missing_ok=True)
        argv = [
            str(self.exe),
            "exec",
            "--skip-git-repo-check",
            "--output-last-message",
            str(answer),
            PROMPT,
        ]
        return Prepared(argv, env, cwd, answer)


# ---------------------------------------------------------------------- claude code


def claude_env(base_url: str, model: str, aux_model: str) -> dict[str, str]:
    """The variables a user sets (docs/compatibility.md)."""
    return {
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": API_KEY,
        "ANTHROPIC_MODEL": model,
        # side requests (titles, quick checks) use the "small fast" model
        "ANTHROPIC_SMALL_FAST_MODEL": aux_model,
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": aux_model,
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }


class ClaudeCode(Client):
    name = "claude"
    package = "@anthropic-ai/claude-code"
    binary = "claude"
    default_tool = "Bash"

    def prepare(self, row: Row, gateway_url: str, cwd: Path) -> Prepared:
        config_dir = self.home() / ".claude"
        config_dir.mkdir(parents=True, exist_ok=True)
        env = self.base_env() | claude_env(gateway_url, row.model, row.aux_model)
        env |= {
            "CLAUDE_CONFIG_DIR": str(config_dir),
            "CLAUDE_CODE_MAX_RETRIES": "0",
        }
        argv = [
            str(self.exe),
            "-p",
            PROMPT,
            "--output-format",
            "text",
            "--allowedTools",
            "Bash",
        ]
        return Prepared(argv, env, cwd)


# ------------------------------------------------------------------------- opencode

#: opencode.json provider id per SDK package
OPENCODE_PROVIDERS = {
    "@ai-sdk/openai-compatible": "omniroute-chat",
    "@ai-sdk/openai": "omniroute-responses",
    "@ai-sdk/anthropic": "omniroute-messages",
}


def opencode_config(base_url: str, sdk: str, model: str, aux_model: str) -> Any:
    """The opencode.json a user needs (docs/compatibility.md), for one SDK package."""
    provider = OPENCODE_PROVIDERS[sdk]
    return {
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": False,
        "share": "disabled",
        "model": f"{provider}/{model}",
        "small_model": f"{provider}/{aux_model}",
        "enabled_providers": [provider],
        "permission": {"bash": "allow", "edit": "allow", "webfetch": "deny"},
        "provider": {
            provider: {
                "npm": sdk,
                "name": f"OmniRoute ({sdk})",
                "options": {
                    "baseURL": f"{base_url}/v1",
                    "apiKey": "{env:" + KEY_ENV + "}",
                },
                "models": {
                    model: {"name": model, "tool_call": True},
                    aux_model: {"name": aux_model, "tool_call": True},
                },
            }
        },
    }


class OpenCode(Client):
    name = "opencode"
    package = "opencode-ai"
    binary = "opencode"
    default_tool = "bash"

    @property
    def plugin_deps(self) -> Path:
        """``@opencode-ai/plugin``, installed by ``run.install()`` (see ``deps``)."""
        return self.prefix / "opencode-config"

    def deps(self) -> None:
        """opencode installs ``@opencode-ai/plugin`` (its own version) into its config
        directory from npm on first start; a copy installed beforehand keeps the runs
        offline."""
        target = self.home() / ".config" / "opencode"
        if (target / "node_modules").exists() or not self.plugin_deps.exists():
            return
        target.mkdir(parents=True, exist_ok=True)
        for name in ("package.json", "package-lock.json"):
            if (self.plugin_deps / name).exists():
                shutil.copy2(self.plugin_deps / name, target / name)
        shutil.copytree(
            self.plugin_deps / "node_modules", target / "node_modules", symlinks=True
        )

    def prepare(self, row: Row, gateway_url: str, cwd: Path) -> Prepared:
        self.deps()
        config = opencode_config(gateway_url, row.sdk, row.model, row.aux_model)
        path = cwd.parent / f"{cwd.name}.opencode.json"
        path.write_text(json.dumps(config, indent=2) + "\n")
        env = self.base_env() | {
            "OPENCODE_CONFIG": str(path),
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_SHARE": "1",
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
            "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
            "OPENCODE_DISABLE_CLAUDE_CODE": "1",
        }
        argv = [str(self.exe), "run", PROMPT, "--print-logs", "--title", "compat"]
        return Prepared(argv, env, cwd)

    def runtime_packages(self) -> list[str]:
        """Provider packages opencode installed at run time into its cache (none:
        the three SDK packages are bundled in the opencode binary)."""
        base = self.home() / ".cache" / "opencode"
        found = base.glob("**/node_modules/@ai-sdk/*")
        return sorted({str(p.relative_to(base)) for p in found})


CLIENTS: dict[str, type[Client]] = {
    "codex": Codex,
    "claude": ClaudeCode,
    "opencode": OpenCode,
}

ROWS = (
    Row(
        "codex-chat",
        "codex",
        "Responses",
        "oa",
        "openai, chat only",
        "/chat/completions",
    ),
    Row(
        "codex-responses",
        "codex",
        "Responses",
        "rs",
        "openai, wire: responses",
        "/responses",
    ),
    Row("claude-anthropic", "claude", "Messages", "an", "anthropic", "/messages"),
    Row(
        "claude-openai",
        "claude",
        "Messages",
        "oa",
        "openai, chat only",
        "/chat/completions",
    ),
    Row(
        "opencode-chat",
        "opencode",
        "Chat Completions",
        "oa",
        "openai, chat only",
        "/chat/completions",
        sdk="@ai-sdk/openai-compatible",
    ),
    Row(
        "opencode-responses",
        "opencode",
        "Responses",
        "oa",
        "openai, chat only",
        "/chat/completions",
        sdk="@ai-sdk/openai",
    ),
    Row(
        "opencode-messages",
        "opencode",
        "Messages",
        "an",
        "anthropic",
        "/messages",
        sdk="@ai-sdk/anthropic",
    ),
)
