"""The ``responses-gateway`` command: run the gateway (or a fake upstream) locally.

Owns argument parsing and process startup only. ``serve`` runs the app under uvicorn with the
configuration from the environment (see :mod:`responses_gateway.config`) and the store
``store.select`` picks (an SQLite file by default: ``--db`` / ``GATEWAY_DB_PATH``); with no upstream
configured it starts the bundled scripted ``demo`` model on a loopback port and routes to it, so
every feature can be tried offline. ``fake-upstream`` runs the scripted upstream alone.

Operator commands: ``keys create|list|revoke --tenant T`` (against the local key file named by
``GATEWAY_API_KEYS_FILE`` or ``--file``; deployed, against the stack's API Gateway usage plan with
``--stack NAME`` or ``--usage-plan-id ID``), ``usage`` (the ledger's totals from the table named
by ``DYNAMODB_TABLE`` or ``--table``) and ``budget show|set|clear --tenant T`` (a tenant's own
limits, stored in the table).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

__all__ = ["main"]

DEMO_MODELS = {"demo": "chat", "demo-responses": "responses"}
"""Model names served by the bundled demo upstream, and the wire format each goes through."""


def _serve(host: str, port: int, db_path: str | None, enforce_budgets: bool = False) -> int:
    import uvicorn

    from responses_gateway.app import create_app
    from responses_gateway.config import ENFORCE_BUDGETS_ENV, ConfigError, load_config, parse_config

    if enforce_budgets:  # as GATEWAY_ENFORCE_BUDGETS=1: every configuration below reads it
        os.environ[ENFORCE_BUDGETS_ENV] = "1"
    try:
        config = load_config()
    except (ConfigError, OSError) as exc:
        print(f"responses-gateway: bad configuration: {exc}", file=sys.stderr)
        return 2
    demo = None
    if config is None:
        from responses_gateway.testing.fake_upstream import create_fake_upstream_app
        from responses_gateway.testing.script import ScriptedUpstream
        from responses_gateway.testing.server import run_in_thread

        demo = run_in_thread(create_fake_upstream_app(ScriptedUpstream()))
        config = parse_config(
            {
                "providers": [
                    {
                        "name": f"demo-{wire}",
                        "base_url": f"{demo.url}/v1",
                        "api": wire,
                        "models": [model],
                    }
                    for model, wire in DEMO_MODELS.items()
                ]
            }
        )
        print(
            "responses-gateway: no upstream configured (UPSTREAM_BASE_URL / GATEWAY_CONFIG); "
            f"serving the bundled scripted demo model: use model 'demo' (Chat Completions "
            f"upstream) or 'demo-responses' (Responses upstream). Demo upstream at {demo.url}.",
            flush=True,
        )
    else:
        names = ", ".join(f"{p.name} ({p.api})" for p in config.providers)
        print(f"responses-gateway: providers: {names}", flush=True)
    from responses_gateway.store import StoreError, open_store

    try:
        opened = open_store(db_path=db_path)
    except (ConfigError, StoreError) as exc:
        print(f"responses-gateway: cannot open the store: {exc}", file=sys.stderr)
        if demo is not None:
            demo.stop()
        return 2
    print(f"responses-gateway: keeping state {opened.description}", flush=True)
    print(f"responses-gateway: listening on http://{host}:{port}/v1", flush=True)
    from responses_gateway.observability import AccessLog, TelemetryMiddleware

    app = TelemetryMiddleware(create_app(config, opened.store), AccessLog(sys.stdout))
    try:
        from responses_gateway.sockets.serving import LazyWebSocketProtocol

        uvicorn.run(
            app,
            host=host,
            port=port,
            log_level="warning",
            ws=LazyWebSocketProtocol,  # WebSocket mode, imported on the first upgrade
        )
    finally:
        opened.close()
        if demo is not None:
            demo.stop()
    return 0


def _create_table(name: str, endpoint_url: str | None, region: str | None) -> int:
    from responses_gateway.store.table import create_table, make_client

    client = make_client(endpoint_url=endpoint_url, region=region or "us-east-1")
    created = create_table(client, name)
    print(f"responses-gateway: table {name} {'created' if created else 'already exists'}")
    return 0


def _fake_upstream(host: str, port: int) -> int:
    from responses_gateway.testing.server import serve_fake_upstream

    print(f"responses-gateway: scripted fake upstream on http://{host}:{port}/v1", flush=True)
    serve_fake_upstream(host, port)
    return 0


def _key_store(args: argparse.Namespace) -> Any:
    from responses_gateway.keys import ApiGatewayKeys, KeysError, LocalKeyFile
    from responses_gateway.tenancy import KEYS_FILE_ENV

    if args.stack:
        return ApiGatewayKeys.for_stack(
            args.stack, region=args.region, endpoint_url=args.endpoint_url
        )
    if args.usage_plan_id:
        return ApiGatewayKeys.connect(
            args.usage_plan_id, region=args.region, endpoint_url=args.endpoint_url
        )
    path = args.file or os.environ.get(KEYS_FILE_ENV, "").strip()
    if not path:
        raise KeysError(
            f"name the key file (--file or {KEYS_FILE_ENV}), or a deployed stack (--stack or "
            "--usage-plan-id)"
        )
    return LocalKeyFile(path)


def _keys(args: argparse.Namespace) -> int:
    from responses_gateway.keys import KeysError

    try:
        keys = _key_store(args)
        if args.action == "create":
            created = keys.create(args.tenant)
            print(f"key id: {created.info.key_id}")
            print(f"tenant: {created.info.tenant}")
            print(f"key:    {created.value}")
            print("The key is shown once: store it now.", file=sys.stderr)
        elif args.action == "list":
            for info in keys.list(args.tenant):
                state = "" if info.enabled else "  (disabled)"
                print(f"{info.key_id}  {info.tenant}{state}")
        else:
            if not args.tenant:
                raise KeysError("revoke needs --tenant")
            for info in keys.revoke(args.tenant, args.key_id):
                print(f"revoked {info.key_id} ({info.tenant})")
    except KeysError as exc:
        print(f"responses-gateway: {exc}", file=sys.stderr)
        return 2
    return 0


def _open_store(args: argparse.Namespace) -> Any:
    from responses_gateway.store.dynamo import DynamoStore

    env = dict(os.environ)
    for name, value in (
        ("DYNAMODB_TABLE", args.table),
        ("DYNAMODB_ENDPOINT_URL", args.endpoint_url),
        ("AWS_REGION", args.region),
    ):
        if value:
            env[name] = value
    return DynamoStore.from_env(env)


def _day_start(text: str) -> int:
    return int(datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=UTC).timestamp())


def _usage(args: argparse.Namespace) -> int:
    from responses_gateway.usage.report import build_page, parse_query, totals_by

    now = int(time.time())
    start = _day_start(args.start) if args.start else now - now % 86_400
    end = _day_start(args.end) + 86_400 if args.end else now + 1
    store = _open_store(args)
    try:
        if args.json:
            params: dict[str, list[str]] = {
                "start_time": [str(start)],
                "end_time": [str(end)],
                "bucket_width": [args.bucket_width],
                "limit": ["31" if args.bucket_width == "1d" else "168"],
                "group_by": [g for g in args.group_by.split(",") if g],
            }
            query = parse_query(params, now=now)
            rows = asyncio.run(store.read_usage(*query.read_range()))
            print(json.dumps(build_page(query, rows), indent=2))
            return 0
        rows = asyncio.run(store.read_usage(start, end))
    finally:
        store.close()
    fields = ("tenant", "model", "api_key_id")
    totals = totals_by(rows, fields)
    header = ("tenant", "model", "api key", "input", "cached", "output", "calls", "tools", "cost $")
    table = [
        (
            *group,
            str(c.input_tokens),
            str(c.cached_tokens),
            str(c.output_tokens),
            str(c.model_calls),
            str(c.tool_calls),
            f"{c.cost_usd:.6f}",
        )
        for group, c in sorted(totals.items())
    ]
    widths = [max(len(str(row[i])) for row in [header, *table]) for i in range(len(header))]
    for row in [header, *table]:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)))
    total_cost = sum((c.cost_usd for c in totals.values()), Decimal(0))
    print(f"{len(totals)} rows, estimated cost {total_cost:.6f} USD")
    return 0


def _budget(args: argparse.Namespace) -> int:
    from responses_gateway.store.base import BudgetLimits
    from responses_gateway.usage.budget import BudgetError, parse_limits

    store = _open_store(args)
    try:
        if args.action == "set":
            raw = {
                "daily_tokens": args.daily_tokens,
                "monthly_tokens": args.monthly_tokens,
                "daily_cost_usd": args.daily_cost_usd,
                "monthly_cost_usd": args.monthly_cost_usd,
            }
            try:
                limits = parse_limits({k: v for k, v in raw.items() if v is not None}, "budget")
            except BudgetError as exc:
                print(f"responses-gateway: {exc}", file=sys.stderr)
                return 2
            asyncio.run(store.put_budget(args.tenant, limits))
        elif args.action == "clear":
            asyncio.run(store.put_budget(args.tenant, None))
        own: BudgetLimits | None = asyncio.run(store.get_budget(args.tenant))
        spend = asyncio.run(store.get_spend(args.tenant, int(time.time())))
    finally:
        store.close()
    described = own if own is not None else "none (the configured ones apply)"
    print(f"tenant {args.tenant}: own limits {described}")
    print(
        f"spent today {spend.day_tokens} tokens / {spend.day_cost_usd:.6f} USD; "
        f"this month {spend.month_tokens} tokens / {spend.month_cost_usd:.6f} USD"
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``responses-gateway`` command."""
    parser = argparse.ArgumentParser(prog="responses-gateway", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the gateway API")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8080)
    serve.add_argument(
        "--db",
        default=None,
        metavar="PATH",
        help="the SQLite database file (default: GATEWAY_DB_PATH, else "
        "~/.local/share/responses-gateway/gateway.db; ':memory:' keeps nothing)",
    )
    serve.add_argument(
        "--enforce-budgets",
        action="store_true",
        help="refuse requests over the budgets set per tenant (console, `budget set`) even "
        "without a budgets table in the configuration (as GATEWAY_ENFORCE_BUDGETS=1)",
    )
    table = commands.add_parser("create-table", help="create the DynamoDB table")
    table.add_argument("--table", required=True)
    table.add_argument("--endpoint-url", default=None)
    table.add_argument("--region", default=None)
    fake = commands.add_parser("fake-upstream", help="run the scripted fake upstream model")
    fake.add_argument("--host", default="127.0.0.1")
    fake.add_argument("--port", type=int, default=8001)
    keys = commands.add_parser("keys", help="create, list or revoke API keys")
    keys.add_argument("action", choices=("create", "list", "revoke"))
    keys.add_argument("--tenant", default=None)
    keys.add_argument("--key-id", default=None, help="revoke only this key")
    keys.add_argument("--file", default=None, help="local key file (GATEWAY_API_KEYS_FILE)")
    keys.add_argument("--stack", default=None, help="deployed stack name")
    keys.add_argument("--usage-plan-id", default=None)
    keys.add_argument("--region", default=None)
    keys.add_argument("--endpoint-url", default=None)
    usage = commands.add_parser("usage", help="usage and estimated cost from the ledger")
    usage.add_argument("--start", default=None, help="first UTC day (YYYY-MM-DD); default today")
    usage.add_argument("--end", default=None, help="last UTC day (YYYY-MM-DD); default now")
    usage.add_argument("--json", action="store_true", help="the usage API's page instead")
    usage.add_argument("--bucket-width", default="1d", choices=("1d", "1h"))
    usage.add_argument("--group-by", default="project_id,model")
    budget = commands.add_parser("budget", help="show, set or clear a tenant's own limits")
    budget.add_argument("action", choices=("show", "set", "clear"))
    budget.add_argument("--tenant", required=True)
    budget.add_argument("--daily-tokens", default=None)
    budget.add_argument("--monthly-tokens", default=None)
    budget.add_argument("--daily-cost-usd", default=None)
    budget.add_argument("--monthly-cost-usd", default=None)
    for command in (usage, budget):
        command.add_argument("--table", default=None, help="default: DYNAMODB_TABLE")
        command.add_argument("--endpoint-url", default=None)
        command.add_argument("--region", default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if args.command == "serve":
        return _serve(args.host, args.port, args.db, args.enforce_budgets)
    if args.command == "create-table":
        return _create_table(args.table, args.endpoint_url, args.region)
    if args.command == "keys":
        if args.action == "create" and not args.tenant:
            parser.error("keys create needs --tenant")
        return _keys(args)
    if args.command == "usage":
        return _usage(args)
    if args.command == "budget":
        return _budget(args)
    return _fake_upstream(args.host, args.port)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
