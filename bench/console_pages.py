"""Server time of each admin console page with 10 000 request-log rows (issue #15).

    .venv/bin/python bench/console_pages.py [--rows 10000] [--repeat 7]

A fresh embedded install (SQLite in a temporary data directory) gets the demo
configuration, ``--rows`` request-log rows spread over the last 24 hours (each with
one or two attempts, a tenth of them failed), and a superuser.  Each page is then
requested ``--repeat`` times in process through Django's test client, logged in; the
figure is the median wall time of the request, which is the server's time (no
network, no browser).  Prints a Markdown table; the target is 300 ms per page.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_MS = 300.0

PAGES = (
    ("dashboard", "/admin/"),
    ("dashboard panels (refresh)", "/admin/dashboard/panels/"),
    ("connections", "/admin/providers/connection/"),
    ("providers", "/admin/providers/provider/"),
    ("combos", "/admin/combos/combo/"),
    ("combo editor", "/admin/combos/combo/1/change/"),
    ("API keys", "/admin/combos/apikey/"),
    ("gateway settings", "/admin/combos/gatewaysettings/1/change/"),
    ("request log", "/admin/telemetry/requestlog/"),
    ("overview 1 h by minute", "/admin/telemetry/overview/?period=1h"),
    ("overview 24 h", "/admin/telemetry/overview/?period=24h"),
    ("overview 7 d", "/admin/telemetry/overview/?period=7d"),
    ("live routing", "/admin/telemetry/live-routing/"),
    ("jobs", "/admin/providers/jobrun/jobs/"),
    ("explain route", "/admin/explain-route/?model=demo-chain"),
    ("playground", "/admin/playground/"),
    ("config as code", "/admin/config/"),
)


def _setup(data_dir: Path) -> None:
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "omniroute_site.settings",
            "OMNIROUTE_DATA_DIR": str(data_dir),
            "OMNIROUTE_SCHEDULER": "off",
            "OMNIROUTE_LOG_LEVEL": "WARNING",
        }
    )
    for name in ("DATABASE_URL", "REDIS_URL"):
        os.environ.pop(name, None)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def _fill(rows: int) -> None:
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.utils import timezone

    from combos.models import ApiKey, GatewaySettings
    from telemetry.models import AttemptLog, RequestLog

    call_command("migrate", verbosity=0)
    call_command("import_config", str(ROOT / "omniroute_site" / "demo.yaml"))
    GatewaySettings.objects.get_or_create(id=1, defaults={"data": {}})
    key = ApiKey.objects.get(name="demo")
    now = timezone.now()
    requests, attempts = [], []
    for i in range(rows):
        created = now - timedelta(seconds=(i * 86_400) / rows)
        failed = i % 10 == 0
        request_id = uuid.uuid4()
        requests.append(
            RequestLog(
                id=request_id,
                created_at=created,
                finished_at=created + timedelta(milliseconds=120),
                api_key=key,
                api_key_prefix=key.prefix,
                endpoint="chat",
                requested_model="demo-chain",
                route="combo:demo-chain",
                strategy="priority",
                served_model="demo/mock-large" if failed else "demo/mock-small",
                provider="demo",
                connection="main",
                status="success",
                http_status=200,
                attempt_count=2 if failed else 1,
                failover=failed,
                latency_ms=120,
                ttft_ms=40,
                prompt_tokens=30,
                completion_tokens=60,
                cost_usd=0.0001,
            )
        )
        attempts.append(
            AttemptLog(
                request_id=request_id,
                attempt_no=1,
                started_at=created,
                provider="demo",
                model="mock-small",
                connection="main",
                target="demo/mock-small@main",
                result="server_error" if failed else "success",
                reason="server_error" if failed else None,
                http_status=500 if failed else 200,
                latency_ms=60,
            )
        )
        if failed:
            attempts.append(
                AttemptLog(
                    request_id=request_id,
                    attempt_no=2,
                    started_at=created,
                    provider="demo",
                    model="mock-large",
                    connection="main",
                    target="demo/mock-large@main",
                    result="success",
                    http_status=200,
                    latency_ms=60,
                )
            )
    RequestLog.objects.bulk_create(requests, batch_size=2000)
    AttemptLog.objects.bulk_create(attempts, batch_size=2000)
    get_user_model().objects.create_superuser("bench", "b@example.com", "pw")


def _measure(repeat: int) -> list[tuple[str, str, int, float]]:
    from django.contrib.auth import get_user_model
    from django.test import Client

    client = Client()
    client.force_login(get_user_model().objects.get(username="bench"))
    results = []
    for label, path in PAGES:
        times, status = [], 0
        for _ in range(repeat):
            started = time.perf_counter()
            response = client.get(path, HTTP_HOST="127.0.0.1")
            times.append((time.perf_counter() - started) * 1000)
            status = response.status_code
        results.append((label, path, status, statistics.median(times)))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="omniroute-console-") as tmp:
        _setup(Path(tmp))
        _fill(args.rows)
        results = _measure(args.repeat)
    load = os.getloadavg()[0]
    print(
        f"{args.rows} request-log rows, median of {args.repeat} requests per page, "
        f"SQLite, 1-minute load average {load:.2f} after the run.\n"
    )
    print("| page | path | status | server ms (median) | ≤ 300 ms |")
    print("|---|---|---|---:|---|")
    for label, path, status, ms in results:
        mark = "✓" if ms <= TARGET_MS else "✗"
        print(f"| {label} | `{path}` | {status} | {ms:.1f} | {mark} |")


if __name__ == "__main__":
    main()
