"""The gateway's DynamoDB table: its definition, and creating it on an endpoint.

Owns ``TABLE_DEFINITION`` (one table: string ``PK``/``SK`` keys, on-demand billing, encryption at
rest, no secondary index: every access path is a key lookup or a Query on one partition), creating
the table idempotently, enabling TTL on ``ttl``, building boto3 clients, and the client settings'
defaults the store's own HTTP client shares. These are synchronous setup calls made at startup or
from the command line, never on the request path (the store's calls go over ``_http.py``). The same
definition belongs in ``template.yaml``.

Command line (creates the table on any endpoint; prints what it did)::

    python -m responses_gateway.store.table --table NAME [--endpoint-url URL] [--region REGION]
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "TABLE_DEFINITION",
    "TTL_ATTRIBUTE",
    "create_table",
    "enable_ttl",
    "ensure_local_table",
    "main",
    "make_client",
]

TTL_ATTRIBUTE = "ttl"

TABLE_DEFINITION: dict[str, Any] = {
    "AttributeDefinitions": [
        {"AttributeName": "PK", "AttributeType": "S"},
        {"AttributeName": "SK", "AttributeType": "S"},
    ],
    "KeySchema": [
        {"AttributeName": "PK", "KeyType": "HASH"},
        {"AttributeName": "SK", "KeyType": "RANGE"},
    ],
    "BillingMode": "PAY_PER_REQUEST",
    "SSESpecification": {"Enabled": True},
}
"""``CreateTable`` parameters other than ``TableName``."""

_LOCAL_CREDENTIALS = ("local", "local")


def _error_code(exc: BaseException) -> str | None:
    response = getattr(exc, "response", None)
    return response.get("Error", {}).get("Code") if isinstance(response, dict) else None


DEFAULT_MAX_ATTEMPTS = 4
"""Attempts per call, the first included, of the store's HTTP client and of boto3 clients alike
(botocore's standard retry mode: throttling, 5xx, timeouts and connection errors are retried with
exponential backoff and jitter)."""
DEFAULT_CONNECT_TIMEOUT = 3.0
DEFAULT_READ_TIMEOUT = 10.0
"""Seconds to wait for a connection, and for an answer, before an attempt fails (botocore's own
default is 60 s, so a stalled endpoint would hold a request for minutes)."""


def make_client(
    *,
    endpoint_url: str | None = None,
    region: str = "us-east-1",
    credentials: tuple[str, str] | None = None,
    max_pool_connections: int = 32,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    read_timeout: float = DEFAULT_READ_TIMEOUT,
) -> Any:
    """A boto3 DynamoDB client (thread-safe: build one per process).

    A call waits at most about ``max_attempts * (connect_timeout + read_timeout)`` plus the
    backoff between attempts, then fails (the store turns that into a 500 envelope).

    With an ``endpoint_url`` (moto, DynamoDB Local) account-id based endpoints are turned off, and
    when no credentials are configured for a loopback endpoint, dummy ones are passed to this
    client only (the environment is never changed).
    """
    import boto3  # type: ignore[import-untyped]
    from botocore.config import Config  # type: ignore[import-untyped]

    options: dict[str, Any] = {
        "max_pool_connections": max_pool_connections,
        "retries": {"mode": "standard", "total_max_attempts": max_attempts},
        "connect_timeout": connect_timeout,
        "read_timeout": read_timeout,
    }
    if endpoint_url:
        options["account_id_endpoint_mode"] = "disabled"
        host = urlsplit(endpoint_url).hostname or ""
        loopback = host in ("127.0.0.1", "localhost", "::1")
        if credentials is None and loopback and boto3.session.Session().get_credentials() is None:
            credentials = _LOCAL_CREDENTIALS
    keys: dict[str, str] = {}
    if credentials is not None:
        keys = {"aws_access_key_id": credentials[0], "aws_secret_access_key": credentials[1]}
    return boto3.client(
        "dynamodb",
        endpoint_url=endpoint_url,
        region_name=region,
        config=Config(**options),
        **keys,
    )


def create_table(client: Any, name: str, *, wait: bool = True) -> bool:
    """Create the table (and enable TTL); an existing table is fine. Returns True when created.

    With ``wait``, returns once the table is ACTIVE.
    """
    created = True
    try:
        client.create_table(TableName=name, **TABLE_DEFINITION)
    except Exception as exc:
        if _error_code(exc) != "ResourceInUseException":
            raise
        created = False
    if wait:
        client.get_waiter("table_exists").wait(
            TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 120}
        )
    enable_ttl(client, name)
    return created


def enable_ttl(client: Any, name: str) -> None:
    """Turn on TTL with attribute ``ttl`` (no-op when already on)."""
    description = client.describe_time_to_live(TableName=name).get("TimeToLiveDescription", {})
    if description.get("TimeToLiveStatus") in ("ENABLED", "ENABLING"):
        if description.get("AttributeName") != TTL_ATTRIBUTE:
            raise ValueError(
                f"table {name} has TTL on attribute {description.get('AttributeName')!r}, "
                f"the gateway needs {TTL_ATTRIBUTE!r}"
            )
        return
    try:
        client.update_time_to_live(
            TableName=name,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE},
        )
    except Exception as exc:
        # Raced with another process enabling it.
        if _error_code(exc) != "ValidationException":
            raise


def ensure_local_table(endpoint_url: str, name: str, region: str = "us-east-1") -> Any:
    """A client for a local endpoint (moto, DynamoDB Local) with the table created on it."""
    client = make_client(endpoint_url=endpoint_url, region=region)
    create_table(client, name)
    return client


def main(argv: Sequence[str] | None = None) -> int:
    import argparse  # the command line only: the store imports this module for its defaults

    parser = argparse.ArgumentParser(description="Create the gateway's DynamoDB table.")
    parser.add_argument("--table", required=True)
    parser.add_argument("--endpoint-url", default=None)
    parser.add_argument("--region", default="us-east-1")
    args = parser.parse_args(argv)
    client = make_client(endpoint_url=args.endpoint_url, region=args.region)
    try:
        created = create_table(client, args.table)
    except Exception as exc:
        reason = _error_code(exc) or type(exc).__name__
        print(f"could not create table {args.table}: {reason}", file=sys.stderr)
        return 1
    print(json.dumps({"table": args.table, "created": created, "ttl_attribute": TTL_ATTRIBUTE}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
