"""API key administration: create, list and revoke tenants' keys.

Owns the two places keys live:

- :class:`LocalKeyFile`: the file ``GATEWAY_API_KEYS_FILE`` names (``key:tenant`` lines, see
  :mod:`responses_gateway.tenancy`). The gateway re-reads it whenever it changes, so a revoked
  key stops working on the next request. Written atomically (a new file renamed over the old
  one), mode 0600;
- :class:`ApiGatewayKeys`: the deployed stack's API Gateway API keys in its usage plan. A key is
  created enabled, tagged with its tenant (``gateway-tenant``) and added to the plan, and to the
  WebSocket API's plan when the stack has one; revoking deletes it. API Gateway then refuses it
  at once for new authorizer evaluations; an answer the authorizer cached
  (``AuthorizerCacheSeconds``, default 300 s) may still let it through until that TTL ends.
  Deployed, the tenant scoping stored state is the key's id (see tenancy).
  :class:`StackKeys` finds a stack's plans on first use (the console's Keys page, deployed).

A key's value is returned once, by ``create``, and never listed, logged or stored in clear by
this module (the local file holds keys by necessity: it is the gateway's key store). Listings
show key ids: ``key_<16 hex>`` (SHA-256 prefix) locally, API Gateway's id when deployed, with
the key's name and creation time (locally kept in the comment of the key's line:
``# created=<ISO 8601> name=<name>``).
"""

from __future__ import annotations

import builtins
import os
import re
import secrets
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from responses_gateway.tenancy import key_id_of, valid_tenant

__all__ = [
    "PLAN_OUTPUT",
    "SOCKET_PLAN_OUTPUT",
    "TENANT_TAG",
    "ApiGatewayKeys",
    "CreatedKey",
    "KeyInfo",
    "KeysError",
    "KeysUnavailableError",
    "LocalKeyFile",
    "StackKeys",
]

TENANT_TAG = "gateway-tenant"
"""The tag naming a deployed API key's tenant."""
PLAN_OUTPUT = "UsagePlanId"
"""The stack output naming the REST API's usage plan (the keys listed and revoked)."""
SOCKET_PLAN_OUTPUT = "SocketUsagePlanId"
"""The stack output naming the WebSocket API's usage plan (new keys join it too)."""


class KeysError(ValueError):
    """A key operation cannot be done (bad tenant, no such key, missing stack output)."""


class KeysUnavailableError(KeysError):
    """Where the keys live cannot be found (the stack lacks its usage plan's output): no fault
    of the request."""


@dataclass(frozen=True, slots=True)
class KeyInfo:
    """A key as listings show it (never its value)."""

    key_id: str
    tenant: str
    enabled: bool = True
    name: str = ""
    created_at: int | None = None
    """Unix seconds of its creation (None: not known, e.g. a key written by hand)."""


@dataclass(frozen=True, slots=True)
class CreatedKey:
    """A new key: its value is shown once."""

    info: KeyInfo
    value: str


def _check_tenant(tenant: str) -> str:
    if not valid_tenant(tenant):
        raise KeysError(f"tenant {tenant!r} must be 1-128 of A-Z a-z 0-9 . _ @ -")
    return tenant


_NAME = re.compile(r"^[A-Za-z0-9._@-]{1,64}$")


def _check_name(name: str) -> str:
    if name and not _NAME.match(name):
        raise KeysError(f"key name {name!r} must be 1-64 of A-Z a-z 0-9 . _ @ -")
    return name


def _meta(comment: str) -> tuple[str, int | None]:
    """(name, created) from a key line's comment (``created=<ISO> name=<name>``)."""
    name, created = "", None
    for word in comment.split():
        field, _, value = word.partition("=")
        if field == "name":
            name = value
        elif field == "created":
            try:
                created = int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp())
            except ValueError:
                created = None
    return name, created


def _is_meta(comment: str) -> bool:
    return comment.strip().startswith("created=")


def _split(entry: str) -> tuple[str, str]:
    """(key, tenant) of a ``key:tenant`` entry (a bare key acts for ``local``)."""
    key, sep, tenant = entry.rpartition(":")
    if not sep:
        return entry.strip(), "local"
    return key.strip(), tenant.strip()


def new_key_value() -> str:
    """A fresh random API key (256 bits)."""
    return "sk-gw-" + secrets.token_urlsafe(32)


class LocalKeyFile:
    """The local key file (``key:tenant`` entries; comments and blank lines are kept)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def _lines(self) -> builtins.list[str]:
        try:
            return self.path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []

    def _entries(self) -> Iterator[tuple[int, str, str, str]]:
        """(line number, key, tenant, the line's comment) of every entry."""
        for number, line in enumerate(self._lines()):
            body, _, comment = line.partition("#")
            for raw in body.split(","):
                entry = raw.strip()
                if not entry:
                    continue
                key, tenant = _split(entry)
                yield number, key, tenant, comment

    def _write(self, lines: builtins.list[str]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=self.path.parent, prefix=".keys-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write("".join(f"{line}\n" for line in lines))
            os.chmod(temp, 0o600)
            os.replace(temp, self.path)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise

    def create(self, tenant: str, name: str = "") -> CreatedKey:
        """Add a new key for ``tenant`` (named ``name``), noting when it was created."""
        value = new_key_value()
        now = datetime.now(UTC).replace(microsecond=0)
        meta = f"created={now.strftime('%Y-%m-%dT%H:%M:%SZ')}"
        if _check_name(name):
            meta += f" name={name}"
        self._write([*self._lines(), f"{value}:{_check_tenant(tenant)}  # {meta}"])
        return CreatedKey(
            KeyInfo(key_id_of(value), tenant, True, name, int(now.timestamp())), value
        )

    def list(self, tenant: str | None = None) -> builtins.list[KeyInfo]:
        """The keys (of ``tenant``, or all), in file order."""
        found = []
        for _, key, owner, comment in self._entries():
            if tenant is None or owner == tenant:
                name, created = _meta(comment)
                found.append(KeyInfo(key_id_of(key), owner, True, name, created))
        return found

    def revoke(self, tenant: str, key_id: str | None = None) -> builtins.list[KeyInfo]:
        """Remove ``tenant``'s keys (only ``key_id`` when given); returns what was removed.
        Other entries and comments stay as they were.

        Raises:
            KeysError: nothing matched.
        """

        def doomed(entry: str) -> bool:
            key, sep, owner = entry.rpartition(":")
            if not sep:
                key, owner = entry, "local"
            return owner.strip() == tenant and (key_id is None or key_id_of(key.strip()) == key_id)

        removed: builtins.list[KeyInfo] = []
        kept: builtins.list[str] = []
        for line in self._lines():
            body, hash_, comment = line.partition("#")
            entries = [e.strip() for e in body.split(",") if e.strip()]
            gone = [e for e in entries if doomed(e)]
            if not gone:
                kept.append(line)
                continue
            removed += [KeyInfo(key_id_of(_split(e)[0]), tenant) for e in gone]
            rest = ", ".join(e for e in entries if e not in gone)
            if rest or (comment.strip() and not _is_meta(comment)):
                kept.append(f"{rest}  {hash_}{comment}".strip() if hash_ else rest)
        if not removed:
            raise KeysError(f"no key of tenant {tenant!r} matches")
        self._write(kept)
        return removed


class ApiGatewayKeys:
    """API keys of a deployed stack's usage plan (boto3 ``apigateway`` client); new keys also
    join ``more_plan_ids`` (the WebSocket API's plan), so one key works on both APIs."""

    def __init__(
        self, client: Any, usage_plan_id: str, *, more_plan_ids: Sequence[str] = ()
    ) -> None:
        self._client = client
        self.usage_plan_id = usage_plan_id
        self.more_plan_ids = tuple(more_plan_ids)

    @classmethod
    def for_stack(
        cls, stack: str, *, region: str | None, endpoint_url: str | None = None
    ) -> ApiGatewayKeys:
        """The keys of the stack named ``stack`` (its ``UsagePlanId`` output, and its
        ``SocketUsagePlanId`` output when it has one).

        Raises:
            KeysUnavailableError: the stack has no ``UsagePlanId`` output.
        """
        import boto3  # type: ignore[import-untyped]

        cloudformation = boto3.client(
            "cloudformation", region_name=region, endpoint_url=endpoint_url
        )
        outputs = cloudformation.describe_stacks(StackName=stack)["Stacks"][0].get("Outputs", [])
        found = {output.get("OutputKey"): output.get("OutputValue") for output in outputs}
        if not found.get(PLAN_OUTPUT):
            raise KeysUnavailableError(f"stack {stack!r} has no {PLAN_OUTPUT} output")
        more = [found[SOCKET_PLAN_OUTPUT]] if found.get(SOCKET_PLAN_OUTPUT) else []
        return cls.connect(
            found[PLAN_OUTPUT], region=region, endpoint_url=endpoint_url, more_plan_ids=more
        )

    @classmethod
    def connect(
        cls,
        usage_plan_id: str,
        *,
        region: str | None,
        endpoint_url: str | None = None,
        more_plan_ids: Sequence[str] = (),
    ) -> ApiGatewayKeys:
        import boto3

        return cls(
            boto3.client("apigateway", region_name=region, endpoint_url=endpoint_url),
            usage_plan_id,
            more_plan_ids=more_plan_ids,
        )

    def _plan_key_ids(self) -> set[str]:
        ids: set[str] = set()
        for page in self._client.get_paginator("get_usage_plan_keys").paginate(
            usagePlanId=self.usage_plan_id
        ):
            ids.update(item["id"] for item in page.get("items", []))
        return ids

    def create(self, tenant: str, name: str = "") -> CreatedKey:
        """Create an enabled key tagged with ``tenant`` and add it to the usage plans (a
        failure on the way deletes it again, so no half-made key is left)."""
        _check_tenant(tenant)
        created = self._client.create_api_key(
            name=f"{tenant}-{_check_name(name) or secrets.token_hex(4)}",
            description=f"responses-gateway key of tenant {tenant}",
            enabled=True,
            value=new_key_value(),
            tags={TENANT_TAG: tenant},
        )
        key_id = created["id"]
        try:
            for plan_id in (self.usage_plan_id, *self.more_plan_ids):
                self._client.create_usage_plan_key(
                    usagePlanId=plan_id, keyId=key_id, keyType="API_KEY"
                )
        except BaseException:
            self._client.delete_api_key(apiKey=key_id)
            raise
        return CreatedKey(
            KeyInfo(
                key_id, tenant, True, created.get("name", ""), _epoch(created.get("createdDate"))
            ),
            created["value"],
        )

    def list(self, tenant: str | None = None) -> builtins.list[KeyInfo]:
        """The plan's keys (of ``tenant``, or all; keys without the tag show tenant ``?``)."""
        in_plan = self._plan_key_ids()
        found: builtins.list[KeyInfo] = []
        for page in self._client.get_paginator("get_api_keys").paginate(includeValues=False):
            for item in page.get("items", []):
                if item["id"] not in in_plan:
                    continue
                owner = (item.get("tags") or {}).get(TENANT_TAG, "?")
                if tenant is None or owner == tenant:
                    found.append(
                        KeyInfo(
                            item["id"],
                            owner,
                            bool(item.get("enabled")),
                            item.get("name", ""),
                            _epoch(item.get("createdDate")),
                        )
                    )
        return found

    def revoke(self, tenant: str, key_id: str | None = None) -> builtins.list[KeyInfo]:
        """Delete ``tenant``'s keys in the plan (only ``key_id`` when given).

        Raises:
            KeysError: nothing matched.
        """
        doomed = [k for k in self.list(tenant) if key_id is None or k.key_id == key_id]
        if not doomed:
            raise KeysError(f"no key of tenant {tenant!r} matches")
        for key in doomed:
            self._client.delete_api_key(apiKey=key.key_id)
        return doomed


def _epoch(value: Any) -> int | None:
    """Unix seconds of an API Gateway date (a ``datetime`` from boto3), or None."""
    return int(value.timestamp()) if isinstance(value, datetime) else None


class StackKeys:
    """A deployed stack's keys (:class:`ApiGatewayKeys`), its usage plans found on first use
    from the stack's outputs (one ``DescribeStacks``, then kept; a failed look-up is tried
    again next time). Its methods block (boto3): call them off the event loop. Holds no key."""

    def __init__(self, stack: str, *, region: str | None, endpoint_url: str | None = None) -> None:
        self.stack = stack
        self._region = region
        self._endpoint_url = endpoint_url
        self._lock = threading.Lock()
        self._keys: ApiGatewayKeys | None = None

    def _resolved(self) -> ApiGatewayKeys:
        with self._lock:
            if self._keys is None:
                self._keys = ApiGatewayKeys.for_stack(
                    self.stack, region=self._region, endpoint_url=self._endpoint_url
                )
            return self._keys

    def create(self, tenant: str, name: str = "") -> CreatedKey:
        return self._resolved().create(tenant, name)

    def list(self, tenant: str | None = None) -> builtins.list[KeyInfo]:
        return self._resolved().list(tenant)

    def revoke(self, tenant: str, key_id: str | None = None) -> builtins.list[KeyInfo]:
        return self._resolved().revoke(tenant, key_id)
