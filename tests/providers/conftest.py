"""Builders for the scheduled-job tests: the models.dev fixture, payload files, and a
registered test job whose behaviour each test chooses."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from providers.jobs import REGISTRY, JobContext, JobResult, JobSpec, load_jobs

MODELS_DEV_FIXTURE = Path(__file__).parents[1] / "fixtures" / "models-dev-sample.json"
_PAYLOAD = json.loads(MODELS_DEV_FIXTURE.read_text(encoding="utf-8"))


@pytest.fixture
def models_dev() -> dict[str, Any]:
    """A fresh copy of the models.dev fixture, to edit inside a test."""
    return copy.deepcopy(_PAYLOAD)


@pytest.fixture
def write_payload(tmp_path: Path) -> Callable[[Any], Path]:
    """``write_payload(data)`` -> a file holding ``data`` as JSON."""
    counter = iter(range(1000))

    def write(data: Any) -> Path:
        path = tmp_path / f"payload-{next(counter)}.json"
        path.write_text(json.dumps(data), encoding="utf-8")
        return path

    return write


@pytest.fixture
def make_job(monkeypatch: pytest.MonkeyPatch) -> Callable[..., JobSpec]:
    """``make_job(func, name="test_job", soft_s=, hard_s=, schedule=)`` registers a
    job for the test only."""
    load_jobs()

    def make(
        func: Callable[[JobContext], JobResult],
        *,
        name: str = "test_job",
        soft_s: int = 10,
        hard_s: int = 20,
        schedule: str | int = 600,
    ) -> JobSpec:
        spec = JobSpec(
            name=name,
            func=func,
            soft_s=soft_s,
            hard_s=hard_s,
            schedule=schedule,
            task=f"tests.{name}_task",
        )
        monkeypatch.setitem(REGISTRY, name, spec)
        return spec

    return make
