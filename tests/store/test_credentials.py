"""Credential sources of the DynamoDB client: explicit, the environment, botocore's chain (off
the loop, resolved once, refreshed near expiry), the loopback fallback."""

from __future__ import annotations

import asyncio
import datetime
import threading
from typing import Any

import pytest
from botocore.credentials import RefreshableCredentials

from responses_gateway.store._credentials import (
    LOCAL_CREDENTIALS,
    BotocoreCredentials,
    NoCredentialsError,
    StaticCredentials,
    credential_source,
    is_loopback,
)
from responses_gateway.store._sigv4 import Credentials

LAMBDA_ENV = {
    "AWS_ACCESS_KEY_ID": "ASIAEXAMPLE",
    "AWS_SECRET_ACCESS_KEY": "lambda-secret",
    "AWS_SESSION_TOKEN": "lambda-token",
}


async def test_environment_credentials_as_lambda_sets_them() -> None:
    source = credential_source(LAMBDA_ENV, loopback=False)

    assert isinstance(source, StaticCredentials)
    assert await source.get() == Credentials("ASIAEXAMPLE", "lambda-secret", "lambda-token")


async def test_environment_security_token_is_read_when_session_token_is_absent() -> None:
    env = {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s", "AWS_SECURITY_TOKEN": "t"}

    assert await credential_source(env, loopback=False).get() == Credentials("k", "s", "t")


async def test_explicit_credentials_win_over_environment() -> None:
    source = credential_source(LAMBDA_ENV, loopback=True, explicit=("local", "local"))

    assert await source.get() == Credentials("local", "local")


def test_expiring_environment_credentials_are_left_to_botocore() -> None:
    env = {**LAMBDA_ENV, "AWS_CREDENTIAL_EXPIRATION": "2030-01-01T00:00:00Z"}

    assert isinstance(credential_source(env, loopback=False), BotocoreCredentials)


def test_without_environment_credentials_botocore_chain_is_used() -> None:
    partial = {"AWS_ACCESS_KEY_ID": "k"}  # botocore reports a partial set itself

    assert isinstance(credential_source({}, loopback=False), BotocoreCredentials)
    assert isinstance(credential_source(partial, loopback=False), BotocoreCredentials)


async def test_chain_is_resolved_once_off_the_loop_thread_for_concurrent_callers() -> None:
    threads: list[int] = []

    def resolve() -> Any:
        threads.append(threading.get_ident())
        return _Frozen("AKIDCHAIN", "chain-secret", None)

    source = BotocoreCredentials(resolve)

    got = await asyncio.gather(*(source.get() for _ in range(5)))

    assert got == [Credentials("AKIDCHAIN", "chain-secret")] * 5
    assert len(threads) == 1 and threads[0] != threading.get_ident()


async def test_chain_without_credentials_on_loopback_falls_back_to_local_ones() -> None:
    source = BotocoreCredentials(lambda: None, fallback=LOCAL_CREDENTIALS)

    assert await source.get() == Credentials("local", "local")


async def test_chain_without_credentials_elsewhere_raises_no_credentials() -> None:
    source = BotocoreCredentials(lambda: None)

    with pytest.raises(NoCredentialsError):
        await source.get()


async def test_refreshable_credentials_in_refresh_window_refresh_off_the_loop() -> None:
    refreshed_on: list[int] = []
    expiring = _expiry(seconds=60)  # inside botocore's 15-minute advisory window

    def refresh() -> dict[str, str]:
        refreshed_on.append(threading.get_ident())
        return {
            "access_key": "ASIANEW",
            "secret_key": "new-secret",
            "token": "new-token",
            "expiry_time": _expiry(seconds=3600),
        }

    botocore_credentials = RefreshableCredentials.create_from_metadata(
        {
            "access_key": "ASIAOLD",
            "secret_key": "old-secret",
            "token": "old-token",
            "expiry_time": expiring,
        },
        refresh,
        "test",
    )
    source = BotocoreCredentials.of(botocore_credentials)

    first = await source.get()
    second = await source.get()

    assert first == second == Credentials("ASIANEW", "new-secret", "new-token")
    assert len(refreshed_on) == 1 and refreshed_on[0] != threading.get_ident()


async def test_fresh_refreshable_credentials_are_read_without_refreshing() -> None:
    calls: list[str] = []

    def refresh() -> dict[str, str]:
        calls.append("refresh")
        raise AssertionError("not due")

    botocore_credentials = RefreshableCredentials.create_from_metadata(
        {"access_key": "A", "secret_key": "S", "token": "T", "expiry_time": _expiry(7200)},
        refresh,
        "test",
    )

    got = await BotocoreCredentials.of(botocore_credentials).get()

    assert got == Credentials("A", "S", "T") and calls == []


@pytest.mark.parametrize(
    ("host", "expected"),
    [("127.0.0.1", True), ("localhost", True), ("::1", True), ("[::1]", True), ("10.0.0.1", False)],
)
def test_is_loopback(host: str, expected: bool) -> None:
    assert is_loopback(host) is expected


class _Frozen:
    def __init__(self, access_key: str, secret_key: str, token: str | None) -> None:
        self.access_key, self.secret_key, self.token = access_key, secret_key, token

    def get_frozen_credentials(self) -> _Frozen:
        return self


def _expiry(seconds: int) -> str:
    moment = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=seconds)
    return moment.isoformat()
