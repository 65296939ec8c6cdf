"""The pure core is plain Python (style §1.2): importing the kernel, the dialects or the
ordering strategies loads no framework, no I/O."""

import json
import pkgutil
import subprocess
import sys

FORBIDDEN = (
    "django",
    "rest_framework",
    "channels",
    "daphne",
    "asgiref",
    "celery",
    "redis",
    "httpx",
    "httpcore",
    "prometheus_client",
    "orjson",
    "asyncio",
    "omniroute_site",
    "providers",
    "combos",
    "telemetry",
)


PURE_PACKAGES = ("gateway.kernel", "gateway.dialects", "gateway.planning.strategies")


def _engine_modules() -> tuple[str, ...]:
    """Every module of the pure packages, found on disk (new ones are included)."""
    import importlib

    names: list[str] = []
    for package in PURE_PACKAGES:
        path = importlib.import_module(package).__path__
        names.append(package)
        names += sorted(
            info.name for info in pkgutil.walk_packages(path, prefix=f"{package}.")
        )
    return tuple(names)


ENGINE_MODULES = _engine_modules()


def _loaded_top_level_modules(*modules: str) -> set[str]:
    """Import ``modules`` in a fresh interpreter; the top-level names it then holds."""
    script = (
        "import importlib, json, sys\n"
        f"for name in {list(modules)!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return set(json.loads(done.stdout))


def test_importing_the_engine_package_loads_no_forbidden_module():
    loaded = _loaded_top_level_modules("gateway.kernel")

    assert sorted(loaded & set(FORBIDDEN)) == []


def test_importing_every_engine_module_loads_no_forbidden_module():
    loaded = _loaded_top_level_modules(*ENGINE_MODULES)

    assert sorted(loaded & set(FORBIDDEN)) == []


def test_the_probe_does_see_a_forbidden_module_when_one_is_imported():
    loaded = _loaded_top_level_modules("gateway.kernel", "asyncio")

    assert "asyncio" in loaded
