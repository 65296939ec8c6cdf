"""The credential cache of kinds whose credential takes I/O (spec 10 §1, §3)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from types import MappingProxyType
from typing import Any

import pytest

from gateway.kernel.types import Auth
from providers import credential_sources
from providers.credential_sources import CredentialUnavailable, Minted


class FakeMinter:
    def __init__(self, life_s: float = 3600.0) -> None:
        self.calls = 0
        self.life_s = life_s
        self.now = 1_000.0
        self.fail: Exception | None = None
        self.gate: asyncio.Event | None = None

    def wants(self, auth: Auth) -> bool:
        return "client_secret" in auth.secrets

    async def mint(self, auth: Auth, outbound: Any) -> Minted:
        self.calls += 1
        if self.gate is not None:
            await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        token = f"tok-{self.calls}"
        return Minted(
            Auth(
                kind=auth.kind,
                secrets=auth.secrets,
                settings=auth.settings,
                token=token,
            ),
            self.now + self.life_s,
        )


@pytest.fixture
def minter(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeMinter]:
    fake = FakeMinter()
    monkeypatch.setitem(credential_sources.MINTERS, "fakekind", fake)
    credential_sources.forget()
    yield fake
    credential_sources.forget()


def auth(secret: str = "s3cret") -> Auth:
    return Auth(
        kind="fakekind",
        secrets=MappingProxyType({"client_secret": secret}),
        settings=MappingProxyType({"tenant_id": "t"}),
    )


async def test_a_key_alone_passes_through_untouched(minter: FakeMinter) -> None:
    plain = Auth(kind="fakekind", settings=MappingProxyType({"resource": "r"}))
    assert credential_sources.needs_minting(plain) is False
    assert await credential_sources.ready(plain) is plain
    assert await credential_sources.ready(None) is None
    other = Auth(kind="openai", secrets=MappingProxyType({"client_secret": "x"}))
    assert credential_sources.needs_minting(other) is False  # no minter for the kind
    assert minter.calls == 0


async def test_a_fresh_token_is_minted_once_and_reused(minter: FakeMinter) -> None:
    clock = lambda: minter.now  # noqa: E731
    first = await credential_sources.ready(auth(), clock=clock)
    minter.now += 3000  # 10 minutes left: still fresh (margin is 5)
    again = await credential_sources.ready(auth(), clock=clock)

    assert first is not None
    assert first.token == "tok-1"
    assert again is not None
    assert again.token == "tok-1"
    assert minter.calls == 1


async def test_within_the_margin_the_old_token_serves_while_one_refresh_runs(
    minter: FakeMinter,
) -> None:
    clock = lambda: minter.now  # noqa: E731
    await credential_sources.ready(auth(), clock=clock)
    minter.now += 3400  # 200 s left

    served = [await credential_sources.ready(auth(), clock=clock) for _ in range(3)]
    await asyncio.sleep(0)  # let the background refresh run
    await asyncio.sleep(0)
    after = await credential_sources.ready(auth(), clock=clock)

    assert [a.token for a in served if a] == ["tok-1"] * 3
    assert minter.calls == 2  # one refresh, not three
    assert after is not None
    assert after.token == "tok-2"


async def test_an_expired_token_waits_for_one_shared_mint(minter: FakeMinter) -> None:
    clock = lambda: minter.now  # noqa: E731
    await credential_sources.ready(auth(), clock=clock)
    minter.now += 4000  # past expiry
    minter.gate = asyncio.Event()

    waiting = [
        asyncio.create_task(credential_sources.ready(auth(), clock=clock))
        for _ in range(5)
    ]
    await asyncio.sleep(0.01)
    minter.gate.set()
    results = await asyncio.gather(*waiting)

    assert {a.token for a in results if a} == {"tok-2"}
    assert minter.calls == 2


async def test_a_refused_credential_fails_every_waiter_and_is_retried_later(
    minter: FakeMinter,
) -> None:
    minter.fail = CredentialUnavailable("auth", "the token endpoint refused it")
    with pytest.raises(CredentialUnavailable) as refused:
        await credential_sources.ready(auth())
    minter.fail = None
    retried = await credential_sources.ready(auth())

    assert refused.value.reason == "auth"
    assert retried is not None
    assert retried.token == "tok-2"


async def test_a_minter_bug_is_a_connection_error_that_names_no_secret(
    minter: FakeMinter, caplog: pytest.LogCaptureFixture
) -> None:
    minter.fail = RuntimeError("boom with s3cret inside")
    with pytest.raises(CredentialUnavailable) as failed:
        await credential_sources.ready(auth())

    assert failed.value.reason == "connection_error"
    assert "s3cret" not in str(failed.value)
    assert "s3cret" not in caplog.text


async def test_a_changed_secret_is_a_new_credential(minter: FakeMinter) -> None:
    first = await credential_sources.ready(auth("one"))
    second = await credential_sources.ready(auth("two"))

    assert first is not None
    assert second is not None
    assert (first.token, second.token) == ("tok-1", "tok-2")


def test_auth_never_shows_its_secrets_or_token() -> None:
    shown = repr(Auth(kind="k", secrets={"client_secret": "s3cret"}, token="tok-x"))
    assert "s3cret" not in shown
    assert "tok-x" not in shown


async def test_a_refused_token_is_dropped_and_the_next_request_mints_anew(
    minter: FakeMinter,
) -> None:
    clock = lambda: minter.now  # noqa: E731
    stale = await credential_sources.ready(auth(), clock=clock)
    assert stale is not None
    assert credential_sources.refused(auth(), stale) is True
    fresh = await credential_sources.ready(auth(), clock=clock)

    assert fresh is not None
    assert (stale.token, fresh.token) == ("tok-1", "tok-2")
    assert minter.calls == 2


async def test_a_late_refusal_of_an_old_token_keeps_the_newer_one(
    minter: FakeMinter,
) -> None:
    clock = lambda: minter.now  # noqa: E731
    old = await credential_sources.ready(auth(), clock=clock)
    assert old is not None
    credential_sources.refused(auth(), old)
    newer = await credential_sources.ready(auth(), clock=clock)
    # a request that was still using the old token reports its 401 now
    assert credential_sources.refused(auth(), old) is False
    assert await credential_sources.ready(auth(), clock=clock) is newer
    assert minter.calls == 2


def test_a_refused_plain_key_touches_nothing(minter: FakeMinter) -> None:
    plain = Auth(kind="fakekind", settings=MappingProxyType({"resource": "r"}))
    assert credential_sources.refused(plain, plain) is False


async def test_an_attempt_answered_401_drops_its_minted_token(
    minter: FakeMinter,
) -> None:
    """``upstream.drop_refused``: what the attempt runner calls after each call."""
    from gateway.kernel.types import ConnectionInfo, ModelInfo, ProviderInfo, Target
    from gateway.pipeline import upstream

    target = Target(
        provider=ProviderInfo(slug="p", kind="fakekind", base_url="http://p.test"),
        model=ModelInfo(provider="p", model_id="m"),
        connection=ConnectionInfo(provider="p", name="main", auth=auth()),
    )
    clock = lambda: minter.now  # noqa: E731
    used = await credential_sources.ready(auth(), clock=clock)
    served = upstream.AttemptResult(started=0.0, http_status=200)
    upstream.drop_refused(target, used, served)
    assert await credential_sources.ready(auth(), clock=clock) is used
    refused = upstream.AttemptResult(started=0.0, http_status=401)
    upstream.drop_refused(target, used, refused)
    fresh = await credential_sources.ready(auth(), clock=clock)
    assert fresh is not None
    assert fresh.token == "tok-2"
