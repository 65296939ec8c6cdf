"""Issue #16 point 7, one regression test each: no 500 on a wrong type or on a string
no column can store, no traceback from ``import_config``, a malformed base URL is
refused, the admin token tolerates a doubled space as /v1 does, an absurd
``max_tokens`` is a bad value, "an integer", the key digest is compared with the
stored one, dead workers' live gauges are forgotten, and a missing metrics folder
does not crash ``manage.py``."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from combos.api_auth import issue_admin_token
from gateway.edge.auth import key_digest
from gateway.kernel.exchange import RequestError
from gateway.kernel.types import KeyPolicy, RoutingTable
from providers.models import Provider
from telemetry import metrics

ROOT = Path(__file__).resolve().parents[2]


def _post(client: Client, url: str, body: Any) -> Any:
    return client.post(url, json.dumps(body), content_type="application/json")


@pytest.mark.django_db
def test_targets_of_the_wrong_type_are_a_400(world, superuser_client):
    response = _post(superuser_client, "/api/combos", {"name": "x", "targets": True})
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "targets"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("url", "body", "param"),
    [
        ("/api/combos", {"name": "a\x00b", "targets": [{"model": "pa/m1"}]}, "name"),
        ("/api/combos", {"name": "a\ud800x", "targets": [{"model": "pa/m1"}]}, "name"),
        ("/api/api-keys", {"name": "k\x00"}, "name"),
        (
            "/api/providers",
            {
                "slug": "pz",
                "kind": "openai",
                "base_url": "http://127.0.0.1:9/v1",
                "models": [{"id": "m\x00"}],
            },
            "models[0].id",
        ),
        (
            "/api/combos",
            {"name": "c", "targets": [{"model": "pa/m1"}], "config": {"x": "\x00"}},
            "config.x",
        ),
    ],
)
def test_unstorable_strings_are_a_400_naming_the_field(
    world, superuser_client, url, body, param
):
    response = _post(superuser_client, url, body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == param
    assert "NUL or unpaired surrogate" in error["message"]


@pytest.mark.django_db
@pytest.mark.parametrize("bad", ["\\0", "\\ud800x"])
def test_import_config_names_an_unstorable_string_without_a_traceback(tmp_path, bad):
    source = tmp_path / "bad.yaml"
    source.write_text(
        "providers:\n"
        "  - slug: pa\n"
        "    kind: openai\n"
        "    base_url: http://127.0.0.1:9/v1\n"
        f'    models: [{{id: "m{bad}"}}]\n'
    )
    err = io.StringIO()
    with pytest.raises(CommandError):
        call_command("import_config", str(source), stderr=err)
    assert "providers[0].models[0].id" in err.getvalue()
    assert "unpaired surrogate" in err.getvalue()
    assert "Traceback" not in err.getvalue()
    assert not Provider.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["http://[::1", "http://h:99999/v1", "http://a b/v1"])
def test_a_malformed_base_url_is_refused(superuser_client, url):
    response = _post(
        superuser_client,
        "/api/providers",
        {"slug": "pz", "kind": "openai", "base_url": url},
    )
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "base_url"


@pytest.mark.django_db
def test_an_admin_token_after_two_spaces_still_authenticates(superuser):
    token = issue_admin_token(superuser, "tests")
    client = Client(headers={"authorization": f"Bearer  {token}"})
    assert client.get("/api/combos").status_code == 200


def test_a_max_tokens_beyond_any_model_is_a_bad_value_naming_it():
    from gateway.inbound.chat import parse_chat_request

    body = {"model": "pa/m1", "messages": [{"role": "user", "content": "x"}]}
    with pytest.raises(RequestError) as caught:
        parse_chat_request(json.dumps({**body, "max_tokens": 2**31}).encode())
    assert (caught.value.code, caught.value.param) == ("invalid_value", "max_tokens")
    with pytest.raises(RequestError) as caught:
        parse_chat_request(json.dumps({**body, "n": "2"}).encode())
    assert caught.value.message == "'n' must be an integer"


def test_a_presented_key_is_compared_with_the_stored_digest():
    from gateway.edge.auth import authenticate_key

    key = "sk-or-test-0000000000000000000000000000000000000000"
    digest = key_digest(key)
    good = KeyPolicy(id=1, name="k", prefix="sk-or-test", key_hash=digest)
    table = RoutingTable(keys_by_digest={digest: good})
    assert authenticate_key(key, table, 0.0) is good
    # a table whose entry does not hold the digest it is filed under refuses
    wrong = KeyPolicy(id=1, name="k", prefix="sk-or-test", key_hash="0" * 64)
    with pytest.raises(RequestError):
        authenticate_key(key, RoutingTable(keys_by_digest={digest: wrong}), 0.0)


def test_the_live_gauges_of_a_dead_worker_are_forgotten(tmp_path):
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    dead_pid = int(dead.stdout)
    for pid in (dead_pid, os.getpid()):
        (tmp_path / f"gauge_livesum_{pid}.db").write_bytes(b"")
    (tmp_path / f"counter_{dead_pid}.db").write_bytes(b"")

    assert metrics.forget_dead_workers(str(tmp_path)) == [dead_pid]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f"counter_{dead_pid}.db", f"gauge_livesum_{os.getpid()}.db"]
    )


def test_manage_py_creates_a_missing_metrics_folder(tmp_path):
    folder = tmp_path / "prom" / "deeper"
    env = {
        **os.environ,
        "PROMETHEUS_MULTIPROC_DIR": str(folder),
        "OMNIROUTE_DATA_DIR": str(tmp_path / "data"),
        "DJANGO_SETTINGS_MODULE": "omniroute_site.settings",
    }
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "check"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert folder.is_dir()
