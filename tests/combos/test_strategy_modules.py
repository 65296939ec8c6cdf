"""Custom router strategies load at start-up, before any config is validated (spec 04
§8): the modules of ``OMNIROUTE_ROUTER_STRATEGY_MODULES`` are imported by the
``combos`` app's ``ready()``, so ``manage.py import_config`` accepts a combo whose
``routerStrategy`` they register, and a module that cannot be imported stops
start-up naming the module and the variable."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from pytest_django.fixtures import Settings

from combos.apps import load_router_strategy_modules
from gateway.auto.engine import routers as router_strategies

ROOT = Path(__file__).resolve().parents[2]
ENV_VAR = "OMNIROUTE_ROUTER_STRATEGY_MODULES"
MODULE = "omniroute_test_prefer_last"
STRATEGY_MODULE = """
from gateway.auto.engine import RouterStrategy, register_router_strategy


class PreferLast(RouterStrategy):
    name = "prefer-last"

    def select(self, pool, ctx):
        return pool[-1] if pool else None


register_router_strategy(PreferLast())
"""
CONFIG = """
providers:
  - slug: pa
    kind: openai
    base_url: http://127.0.0.1:9/v1
    connections: [{name: main}]
    models: [{id: m1}]
combos:
  - name: pool
    strategy: auto
    targets: []
    config: {auto: {routerStrategy: prefer-last}}
"""


@pytest.fixture
def plugin_dir(tmp_path: Path) -> Path:
    """A directory holding the strategy module (a stand-in for an installed one)."""
    directory = tmp_path / "plugins"
    directory.mkdir()
    (directory / f"{MODULE}.py").write_text(STRATEGY_MODULE, "utf-8")
    return directory


# ------------------------------------------------------------------ in process


@pytest.fixture
def clean_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(router_strategies, "_CUSTOM", {})
    yield
    sys.modules.pop(MODULE, None)


def test_the_loader_imports_the_configured_modules(
    plugin_dir: Path,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    clean_registry: None,
) -> None:
    monkeypatch.syspath_prepend(str(plugin_dir))
    settings.OMNIROUTE_ROUTER_STRATEGY_MODULES = [MODULE]

    load_router_strategy_modules()

    assert router_strategies.is_known_strategy("prefer-last")


def test_a_module_that_cannot_be_imported_is_improperly_configured(
    settings: Settings, clean_registry: None
) -> None:
    settings.OMNIROUTE_ROUTER_STRATEGY_MODULES = ["omniroute_no_such_plugin"]

    with pytest.raises(ImproperlyConfigured) as caught:
        load_router_strategy_modules()

    assert str(caught.value).startswith(
        "Cannot import router strategy module 'omniroute_no_such_plugin' "
        f"({ENV_VAR}): No module named 'omniroute_no_such_plugin'"
    )
    assert isinstance(caught.value.__cause__, ImportError)


def test_an_error_of_the_modules_own_code_propagates_naming_the_module(
    plugin_dir: Path,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    clean_registry: None,
) -> None:
    (plugin_dir / "omniroute_test_broken.py").write_text(
        STRATEGY_MODULE.replace('"prefer-last"', '"cost"'), "utf-8"
    )
    monkeypatch.syspath_prepend(str(plugin_dir))
    settings.OMNIROUTE_ROUTER_STRATEGY_MODULES = ["omniroute_test_broken"]

    with pytest.raises(ValueError, match="is a built-in name or alias") as caught:
        load_router_strategy_modules()

    assert caught.value.__notes__ == [
        "while importing router strategy module 'omniroute_test_broken'"
    ]


def test_no_modules_configured_loads_nothing(
    settings: Settings, clean_registry: None
) -> None:
    settings.OMNIROUTE_ROUTER_STRATEGY_MODULES = []

    load_router_strategy_modules()

    assert router_strategies._CUSTOM == {}


# ------------------------------------------------------------------ real processes


def manage(
    data_dir: Path,
    *args: str,
    modules: str | None,
    pythonpath: Path | None = None,
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """``manage.py`` as an operator runs it: real settings, embedded SQLite."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "DATABASE_URL", "REDIS_URL", "OMNIROUTE_"))
    }
    env["DJANGO_SETTINGS_MODULE"] = "omniroute_site.settings"
    env["OMNIROUTE_DATA_DIR"] = str(data_dir)
    if modules is not None:
        env[ENV_VAR] = modules
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(pythonpath), env.get("PYTHONPATH")) if p
        )
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A migrated embedded data directory (SQLite)."""
    directory = tmp_path / "data"
    directory.mkdir()
    migrated = manage(directory, "migrate", "--noinput", "-v0", modules=None)
    assert migrated.returncode == 0, migrated.stderr
    return directory


def test_import_config_accepts_a_strategy_registered_by_a_configured_module(
    data_dir: Path, plugin_dir: Path
) -> None:
    # Blank entries and spaces around names are ignored, as in the env var's spec.
    result = manage(
        data_dir,
        "import_config",
        "-",
        modules=f" {MODULE} ,",
        pythonpath=plugin_dir,
        stdin=CONFIG,
    )

    assert result.returncode == 0, result.stderr
    assert "configuration changed" in result.stdout


def test_import_config_rejects_the_strategy_when_no_module_registers_it(
    data_dir: Path, plugin_dir: Path
) -> None:
    result = manage(
        data_dir,
        "import_config",
        "-",
        modules=None,
        pythonpath=plugin_dir,
        stdin=CONFIG,
    )

    assert result.returncode != 0
    assert (
        "error: combos[0].config.auto.routerStrategy: must be one of: rules,"
        in result.stderr
    )
    assert '(got "prefer-last";' in result.stderr
    assert "nothing was written" in result.stderr


def test_a_module_that_cannot_be_imported_stops_start_up(tmp_path: Path) -> None:
    result = manage(tmp_path, "check", modules="omniroute_no_such_plugin")

    assert result.returncode != 0
    assert (
        "django.core.exceptions.ImproperlyConfigured: Cannot import router strategy "
        f"module 'omniroute_no_such_plugin' ({ENV_VAR})" in result.stderr
    )


def test_check_passes_with_a_configured_module(
    tmp_path: Path, plugin_dir: Path
) -> None:
    result = manage(tmp_path, "check", modules=MODULE, pythonpath=plugin_dir)

    assert result.returncode == 0, result.stderr
