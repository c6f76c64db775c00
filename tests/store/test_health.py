"""The HealthStore contract, on both stores: failures, cooldowns, probes, per-minute counters,
and entries that are ignored once past their time (whether swept or not)."""

from __future__ import annotations

from tests.store.conftest import FakeClock, StoreFactory

from responses_gateway.store.base import DeploymentHealth


async def test_failures_below_the_threshold_are_counted_then_start_a_cooldown(
    make_store: StoreFactory, clock: FakeClock
) -> None:
    store = make_store()
    now = clock()
    args = {"allowed_fails": 2, "window": 30.0, "cooldown": 10.0}
    first = await store.record_failure("dep-a", now=now, **args)
    assert first == DeploymentHealth(fails=1, window_start=now)
    second = await store.record_failure("dep-a", now=now + 1, **args)
    assert second == DeploymentHealth(fails=0, window_start=now + 1, cooldown_until=now + 11)
    assert await store.read_health(["dep-a", "dep-b"]) == {"dep-a": second}


async def test_a_failure_after_the_window_starts_counting_again(
    make_store: StoreFactory, clock: FakeClock
) -> None:
    store = make_store()
    args = {"allowed_fails": 2, "window": 30.0, "cooldown": 10.0}
    await store.record_failure("dep-w", now=clock(), **args)
    later = await store.record_failure("dep-w", now=clock() + 31, **args)
    assert later.fails == 1 and later.cooldown_until == 0


async def test_one_caller_takes_the_probe_after_the_cooldown_and_clear_forgets_it(
    make_store: StoreFactory, clock: FakeClock
) -> None:
    store = make_store()
    now = clock()
    await store.record_failure("dep-p", now=now, allowed_fails=1, window=30.0, cooldown=5.0)
    assert not await store.claim_probe("dep-p", now=now + 1, lease=30.0)  # still cooling
    assert await store.claim_probe("dep-p", now=now + 6, lease=30.0)
    assert not await store.claim_probe("dep-p", now=now + 7, lease=30.0)  # taken
    await store.clear_health("dep-p")
    assert await store.read_health(["dep-p"]) == {}
    assert not await store.claim_probe("dep-p", now=now + 8, lease=30.0)  # nothing to probe


async def test_entries_past_their_time_are_ignored_before_any_sweep(
    make_store: StoreFactory, clock: FakeClock
) -> None:
    store = make_store()
    await store.record_failure("dep-old", now=clock(), allowed_fails=1, window=30.0, cooldown=5.0)
    clock.advance(3600)
    assert await store.read_health(["dep-old"]) == {}


async def test_per_minute_counters_refuse_calls_over_rpm_and_tpm(
    make_store: StoreFactory, clock: FakeClock
) -> None:
    store = make_store()
    minute = int(clock() // 60)
    limits = {"rpm": 2, "tpm": 100}
    assert await store.count_call("dep-r", minute=minute, requests=1, tokens=0, **limits)
    assert await store.count_call("dep-r", minute=minute, requests=1, tokens=0, **limits)
    assert not await store.count_call("dep-r", minute=minute, requests=1, tokens=0, **limits)
    assert await store.count_call("dep-r", minute=minute + 1, requests=1, tokens=0, **limits)
    assert await store.count_call("dep-r", minute=minute + 1, requests=0, tokens=150)
    assert not await store.count_call("dep-r", minute=minute + 1, requests=1, tokens=0, **limits)
