"""Deployment health and per-minute call counters in DynamoDB.

Owns the item layout of :class:`~responses_gateway.store.base.HealthStore` (see DESIGN.md,
"Deployment health"), plus :func:`after_failure`, the one rule both stores apply when a failure
is counted:

- ``PK = D#<deployment id>``, ``SK = H``: failures in the current window (``f``, ``ws``), the
  cooldown end (``cu``), the probe lease (``pu``), a version (``v``, optimistic concurrency) and
  the TTL; read with one BatchGet for all deployments of a model;
- same PK, ``SK = M#<unix minute>``: requests (``r``) and tokens (``t``) of that minute, one
  conditional ``ADD`` per call (the condition enforces ``rpm``/``tpm``), expiring after two
  minutes.

Entries past their time are ignored whether DynamoDB's sweeper removed them or not. It knows
nothing about routing strategies, HTTP or the loop, and logs nothing.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from responses_gateway.store._calls import ConditionFailed, TableClient
from responses_gateway.store._codec import TTL_ATTR, Item, escape, key
from responses_gateway.store.base import DeploymentHealth

__all__ = ["HealthTable", "after_failure", "health_ttl"]

_HEALTH_SK = "H"
_COUNTER_TTL = 120
_ATTEMPTS = 4


def _pk(deployment_id: str) -> str:
    return f"D#{escape(deployment_id)}"


def after_failure(
    old: DeploymentHealth | None,
    *,
    now: float,
    allowed_fails: int,
    window: float,
    cooldown: float,
) -> DeploymentHealth:
    """The entry after one more failure: counted in its window (a new window once the old one
    passed), and a cooldown from ``now`` once ``allowed_fails`` is reached."""
    if old is None or old.window_start + window <= now:
        old = DeploymentHealth(cooldown_until=old.cooldown_until if old else 0.0)
        old = dataclasses.replace(old, window_start=now)
    fails = old.fails + 1
    if fails >= allowed_fails:
        return DeploymentHealth(fails=0, window_start=now, cooldown_until=now + cooldown)
    return dataclasses.replace(old, fails=fails, probe_until=0.0)


def health_ttl(health: DeploymentHealth, window: float) -> int:
    """When the entry means nothing any more (Unix seconds): its window and cooldown passed."""
    return int(max(health.cooldown_until, health.window_start + window, health.probe_until)) + 60


def _decode(item: Item) -> DeploymentHealth:
    def num(name: str) -> float:
        return float(item[name]["N"]) if name in item else 0.0

    return DeploymentHealth(
        fails=int(num("f")), window_start=num("ws"), cooldown_until=num("cu"), probe_until=num("pu")
    )


def _n(value: float) -> dict[str, str]:
    return {"N": repr(round(value, 3))}


class HealthTable:
    """The health entries and counters of deployments, in the gateway's table."""

    def __init__(self, db: TableClient) -> None:
        self._db = db

    async def read(self, deployment_ids: list[str], now: float) -> dict[str, DeploymentHealth]:
        keys = [key(_pk(d), _HEALTH_SK) for d in deployment_ids]
        found = await self._db.batch_get("read_health", keys)
        result: dict[str, DeploymentHealth] = {}
        for deployment_id in deployment_ids:
            item = found.get((_pk(deployment_id), _HEALTH_SK))
            if item is not None and float(item.get(TTL_ATTR, {"N": "0"})["N"]) > now:
                result[deployment_id] = _decode(item)
        return result

    async def record_failure(
        self,
        deployment_id: str,
        *,
        now: float,
        allowed_fails: int,
        window: float,
        cooldown: float,
    ) -> DeploymentHealth:
        k = key(_pk(deployment_id), _HEALTH_SK)
        for _ in range(_ATTEMPTS):
            item = await self._db.get_item("record_failure", k)
            live = item is not None and float(item.get(TTL_ATTR, {"N": "0"})["N"]) > now
            old = _decode(item) if item is not None and live else None
            new = after_failure(
                old, now=now, allowed_fails=allowed_fails, window=window, cooldown=cooldown
            )
            version = int(item["v"]["N"]) if item is not None and "v" in item else 0
            values: dict[str, Any] = {":v": {"N": str(version)}}
            condition = "attribute_not_exists(PK)" if item is None else "v = :v"
            try:
                await self._db.put_item(
                    "record_failure",
                    {
                        **k,
                        "f": {"N": str(new.fails)},
                        "ws": _n(new.window_start),
                        "cu": _n(new.cooldown_until),
                        "pu": _n(new.probe_until),
                        "v": {"N": str(version + 1)},
                        TTL_ATTR: {"N": str(health_ttl(new, window))},
                    },
                    condition=condition,
                    values=values if item is not None else None,
                )
            except ConditionFailed:
                continue
            return new
        return new  # contended: another instance counted at the same time; good enough

    async def claim_probe(self, deployment_id: str, *, now: float, lease: float) -> bool:
        try:
            await self._db.update_item(
                "claim_probe",
                key(_pk(deployment_id), _HEALTH_SK),
                "SET pu = :lease, v = v + :one",
                condition="cu <= :now AND pu <= :now AND cu > :zero",
                values={
                    ":now": _n(now),
                    ":lease": _n(now + lease),
                    ":one": {"N": "1"},
                    ":zero": {"N": "0"},
                },
            )
        except ConditionFailed:
            return False
        return True

    async def clear(self, deployment_id: str) -> None:
        await self._db.delete_item("clear_health", key(_pk(deployment_id), _HEALTH_SK))

    async def count_call(
        self,
        deployment_id: str,
        *,
        minute: int,
        requests: int,
        tokens: int,
        rpm: int | None,
        tpm: int | None,
    ) -> bool:
        values: dict[str, Any] = {
            ":r": {"N": str(requests)},
            ":t": {"N": str(tokens)},
            ":ttl": {"N": str(minute * 60 + _COUNTER_TTL)},
        }
        conditions = []
        if rpm is not None:
            conditions.append("(attribute_not_exists(r) OR r < :rpm)")
            values[":rpm"] = {"N": str(rpm)}
        if tpm is not None:
            conditions.append("(attribute_not_exists(t) OR t < :tpm)")
            values[":tpm"] = {"N": str(tpm)}
        try:
            await self._db.update_item(
                "count_call",
                key(_pk(deployment_id), f"M#{minute}"),
                "ADD r :r, t :t SET #ttl = :ttl",
                condition=" AND ".join(conditions) or None,
                names={"#ttl": TTL_ATTR},
                values=values,
            )
        except ConditionFailed:
            return False
        return True
