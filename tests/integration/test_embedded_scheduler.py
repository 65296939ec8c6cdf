"""Issue #15: the embedded default runs the beat schedule in-process.

A gateway started as ``make run`` starts it (SQLite, no broker, no beat) runs the
scheduled jobs by itself: the 24 h reliability statistics that feed ``auto`` are
computed without anyone starting ``run_jobs`` or Celery beat.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import pytest

from tests.integration.conftest import Gateway, free_port, inherited_env

pytestmark = pytest.mark.integration

LIST_RUNS = (
    "import json; from providers.models import JobRun; "
    "print(json.dumps(list(JobRun.objects.values_list('job', 'triggered_by'))))"
)


def test_a_gateway_in_the_embedded_default_runs_its_jobs_on_the_schedule() -> None:
    data_dir = Path(tempfile.mkdtemp(prefix="omniroute-scheduler-"))
    env = inherited_env()
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "omniroute_site.settings",
            "OMNIROUTE_DATA_DIR": str(data_dir),
            "OMNIROUTE_SCHEDULER": "in-process",
            # no network here: the catalog sync fails at once instead of retrying
            "OMNIROUTE_MODELS_DEV_URL": f"http://127.0.0.1:{free_port()}/api.json",
            "PYTHONUNBUFFERED": "1",
        }
    )
    gateway = Gateway(data_dir, free_port(), env)
    gateway.start()
    try:
        runs: list[list[str]] = []
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            listed = gateway.manage("shell", "-c", LIST_RUNS)
            assert listed.returncode == 0, listed.stderr
            runs = json.loads(listed.stdout.strip().splitlines()[-1])
            if ["compute_reliability_24h", "beat"] in runs:
                break
            time.sleep(0.5)
        assert ["compute_reliability_24h", "beat"] in runs
        assert ["sync_models_dev", "beat"] in runs  # tried (and failed: no network)
    finally:
        gateway.stop()
