"""The auto engine is plain Python (spec 04, style §1.2): no framework, no app.

Like ``tests/engine/test_purity.py``: every module of ``gateway.auto.engine`` (found on
disk, so new ones are included) is imported in a fresh interpreter, then the loaded
modules are checked.  ``gateway.auto.engine`` may use ``gateway.kernel`` and, unlike the
engine, ``asyncio`` (router strategies and the Nadir call are awaited); the
classifier, fitness and effort modules use neither asyncio nor any I/O library.
"""

import json
import pkgutil
import subprocess
import sys

#: the engine's list (tests/engine/test_purity.py) without asyncio
FORBIDDEN_TOP_LEVEL = (
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
    "django_prometheus",
    "orjson",
    "omniroute_site",
    "providers",
    "combos",
    "telemetry",
)
#: the data plane above the auto engine
FORBIDDEN_GATEWAY = (
    "gateway.pipeline.handle",
    "gateway.edge.asgi",
    "gateway.pipeline.upstream",
)
PURE_MODULES = (
    "gateway.auto.engine.classify",
    "gateway.auto.engine.fitness",
    "gateway.auto.engine.effort",
)


def _routing_modules() -> tuple[str, ...]:
    import gateway.auto.engine

    names = [
        info.name
        for info in pkgutil.walk_packages(
            gateway.auto.engine.__path__, prefix="gateway.auto.engine."
        )
    ]
    return ("gateway.auto.engine", *sorted(names))


def _loaded_modules(*modules: str) -> set[str]:
    """Import ``modules`` in a fresh interpreter; every module it then holds."""
    script = (
        "import importlib, json, sys\n"
        f"for name in {list(modules)!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return set(json.loads(done.stdout))


def _forbidden(loaded: set[str], top_level: tuple[str, ...]) -> list[str]:
    tops = {name.split(".")[0] for name in loaded}
    gateway = {
        name
        for name in loaded
        if any(name == f or name.startswith(f + ".") for f in FORBIDDEN_GATEWAY)
    }
    return sorted((tops & set(top_level)) | gateway)


def test_importing_every_routing_module_loads_no_forbidden_module():
    loaded = _loaded_modules(*_routing_modules())

    assert _forbidden(loaded, FORBIDDEN_TOP_LEVEL) == []


def test_the_probe_does_see_a_forbidden_module_when_one_is_imported():
    loaded = _loaded_modules(*PURE_MODULES, "asyncio")

    assert _forbidden(loaded, ("asyncio",)) == ["asyncio"]


def test_the_gateway_check_matches_whole_module_names():
    loaded = {
        "gateway.pipeline.upstream",
        "gateway.pipeline.handle.stream",
        "gateway.asgi_tools",
        "gateway",
    }

    assert _forbidden(loaded, FORBIDDEN_TOP_LEVEL) == [
        "gateway.pipeline.handle.stream",
        "gateway.pipeline.upstream",
    ]
