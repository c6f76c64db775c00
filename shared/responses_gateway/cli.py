"""The ``responses-gateway`` command: run the gateway (or a fake upstream) locally.

Owns argument parsing and process startup only. ``serve`` runs the app under uvicorn with the
configuration from the environment (see :mod:`responses_gateway.config`) and the store
``store.select`` picks (an SQLite file by default: ``--db`` / ``GATEWAY_DB_PATH``); with no upstream
configured it starts the bundled scripted ``demo`` model on a loopback port and routes to it, so
every feature can be tried offline. ``fake-upstream`` runs the scripted upstream alone.

Operator commands: ``keys create|list|revoke --tenant T`` (against the local key file named by
``GATEWAY_API_KEYS_FILE`` or ``--file``; deployed, against the stack's API Gateway usage plan with
``--stack NAME`` or ``--usage-plan-id ID``), ``usage`` (the ledger's totals) and
``budget show|set|clear --tenant T`` (a tenant's own limits). ``usage`` and ``budget`` read the
store ``serve`` uses, chosen the same way: ``--db`` / ``GATEWAY_DB_PATH`` for the SQLite file,
``--table`` / ``DYNAMODB_TABLE`` (``--endpoint-url``, ``--region``) for DynamoDB. Output is for
people; ``--json`` prints it for programs. Every error is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import os
import socket
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

__all__ = ["build_parser", "main"]

DESCRIPTION = (
    "Run a Responses API gateway locally (serve), a scripted model (fake-upstream), and the "
    "operator commands: API keys (keys), usage and cost (usage), per-tenant budgets (budget). "
    "usage and budget read the store serve uses: the SQLite file (--db, GATEWAY_DB_PATH) or "
    "the DynamoDB table (--table, DYNAMODB_TABLE)."
)
"""``--help``'s description: plain text (the module docstring is for readers of the code)."""

DEMO_MODELS = {"demo": "chat", "demo-responses": "responses"}
"""Model names served by the bundled demo upstream, and the wire format each goes through."""


def _bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound before ``serve`` says it listens.

    Raises:
        OSError: the address is taken or cannot be bound.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def _serve(host: str, port: int, db_path: str | None, enforce_budgets: bool = False) -> int:
    import uvicorn

    from responses_gateway.app import create_app
    from responses_gateway.config import ENFORCE_BUDGETS_ENV, ConfigError, load_config, parse_config
    from responses_gateway.settings import check_environment

    if enforce_budgets:  # as GATEWAY_ENFORCE_BUDGETS=1: every configuration below reads it
        os.environ[ENFORCE_BUDGETS_ENV] = "1"
    try:
        check_environment(os.environ)
        config = load_config()
    except ConfigError as exc:
        return _fail(f"bad configuration: {exc}")
    try:
        sock = _bind(host, port)
    except OSError as exc:
        return _fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
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
        for provider in config.providers:
            if provider.key_reference is not None:
                print(
                    f"responses-gateway: provider {provider.name!r} names its key with "
                    f"{provider.key_reference}, which the deployed functions read: serve calls "
                    "it without a key (locally: api_key_env)",
                    flush=True,
                )
    from responses_gateway.store import StoreError, open_store

    try:
        opened = open_store(db_path=db_path)
    except (ConfigError, StoreError) as exc:
        sock.close()
        if demo is not None:
            demo.stop()
        return _fail(f"cannot open the store: {exc}")
    print(f"responses-gateway: keeping state {opened.description}", flush=True)
    print(f"responses-gateway: listening on http://{host}:{port}/v1", flush=True)
    from responses_gateway.observability import AccessLog, TelemetryMiddleware

    app = TelemetryMiddleware(create_app(config, opened.store), AccessLog(sys.stdout))
    try:
        from responses_gateway.sockets.serving import LazyWebSocketProtocol

        server = uvicorn.Server(
            uvicorn.Config(
                app,
                log_level="warning",
                log_config=None,  # uvicorn's records go through the JSON log lines below
                ws=LazyWebSocketProtocol,  # WebSocket mode, imported on the first upgrade
            )
        )
        server.run(sockets=[sock])
    finally:
        sock.close()
        opened.close()
        if demo is not None:
            demo.stop()
    return 0


class JsonLogLines(logging.Formatter):
    """Log records as JSON lines shaped like the access log's (``ts``, ``msg``, plus ``level``
    and ``logger``): what ``serve`` writes to stdout is JSON lines after its startup lines."""

    def format(self, record: logging.LogRecord) -> str:
        fields: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.created)),
            "msg": record.getMessage(),
            "level": record.levelname.lower(),
            "logger": record.name,
        }
        if record.exc_info:
            fields["exception"] = self.formatException(record.exc_info)
        return json.dumps(fields, separators=(",", ":"))


QUIET_LOGGERS = ("httpx", "httpcore")
"""Libraries whose INFO records repeat, per upstream call, what the access log says: warnings
and errors only."""


def _configure_logging(stream: Any) -> None:
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonLogLines())
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


def _fail(message: str) -> int:
    """One line on stderr, no traceback; the exit status of every refused command."""
    print(f"responses-gateway: {message}", file=sys.stderr)
    return 2


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
    """The store ``serve`` would use with the same environment and flags (an ``OpenedStore``).

    Raises:
        ConfigError, StoreError: as :func:`responses_gateway.store.open_store`.
    """
    from responses_gateway.store import open_store

    env = dict(os.environ)
    for name, value in (
        ("DYNAMODB_TABLE", args.table),
        ("DYNAMODB_ENDPOINT_URL", args.endpoint_url),
        ("AWS_REGION", args.region),
    ):
        if value:
            env[name] = value
    if args.table and not args.db:
        env["GATEWAY_STORE"] = "dynamodb"
    return open_store(env, db_path=args.db)


def _with_store(args: argparse.Namespace, run: Any) -> int:
    """``run(store)`` on the store of ``args``; a store or input error is one line, status 2."""
    from responses_gateway.config import ConfigError
    from responses_gateway.store import StoreError
    from responses_gateway.usage.budget import BudgetError

    try:
        opened = _open_store(args)
    except (ConfigError, StoreError) as exc:
        return _fail(f"cannot open the store: {exc}")
    try:
        return int(run(opened.store))
    except (BudgetError, ValueError) as exc:
        return _fail(str(exc))
    finally:
        opened.close()


def _day_start(text: str) -> int:
    try:
        day = datetime.strptime(text, "%Y-%m-%d")
    except ValueError:
        raise ValueError(f"{text!r} is not a day (YYYY-MM-DD)") from None
    return int(day.replace(tzinfo=UTC).timestamp())


USAGE_COLUMNS = {"project_id": "tenant", "model": "model", "api_key_id": "api key"}
"""``--group-by`` values (the usage API's) and the heading of their column."""


def _usage(args: argparse.Namespace) -> int:
    from responses_gateway.errors import GatewayError
    from responses_gateway.usage.report import GROUPS, build_page, parse_query, totals_by

    groups = [g.strip() for g in (args.group_by or "").split(",") if g.strip()]
    unknown = [g for g in groups if g not in GROUPS]
    if unknown:
        return _fail(f"--group-by {unknown[0]!r}: choose among {', '.join(GROUPS)}")

    def run(store: Any) -> int:
        now = int(time.time())
        start = _day_start(args.start) if args.start else now - now % 86_400
        end = _day_start(args.end) + 86_400 if args.end else now + 1
        if args.json:
            params: dict[str, list[str]] = {
                "start_time": [str(start)],
                "end_time": [str(end)],
                "bucket_width": [args.bucket_width],
                "limit": ["31" if args.bucket_width == "1d" else "168"],
                "group_by": groups if args.group_by is not None else ["project_id", "model"],
            }
            try:
                query = parse_query(params, now=now)
            except GatewayError as exc:
                raise ValueError(exc.message) from None
            rows = asyncio.run(store.read_usage(*query.read_range()))
            print(json.dumps(build_page(query, rows), indent=2))
            return 0
        rows = asyncio.run(store.read_usage(start, end))
        chosen = groups if args.group_by is not None else list(USAGE_COLUMNS)
        totals = totals_by(rows, [GROUPS[g] for g in chosen])
        header = (
            *(USAGE_COLUMNS[g] for g in chosen),
            "input",
            "cached",
            "output",
            "calls",
            "tools",
            "cost $",
        )
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
            cells = zip(row, widths, strict=True)
            print("  ".join(str(cell).ljust(width) for cell, width in cells).rstrip())
        total_cost = sum((c.cost_usd for c in totals.values()), Decimal(0))
        print(f"{len(totals)} rows, estimated cost {total_cost:.6f} USD")
        return 0

    return _with_store(args, run)


BUDGET_FLAGS = {
    "daily_tokens": "--daily-tokens",
    "monthly_tokens": "--monthly-tokens",
    "daily_cost_usd": "--daily-cost-usd",
    "monthly_cost_usd": "--monthly-cost-usd",
}
"""A tenant's limits and the ``budget set`` flag of each."""


def _limits_text(limits: Any) -> str:
    if limits is None or limits.empty:
        return "none set (the configured limits apply)"
    parts = []
    for name in BUDGET_FLAGS:
        value = getattr(limits, name)
        if value is not None:
            unit = "USD" if name.endswith("_usd") else "tokens"
            parts.append(f"{name.rsplit('_', 2 if unit == 'USD' else 1)[0]} {value} {unit}")
    return ", ".join(parts)


def _budget(args: argparse.Namespace) -> int:
    from responses_gateway.usage.budget import parse_limits

    raw = {name: getattr(args, name) for name in BUDGET_FLAGS}
    given = {name: value for name, value in raw.items() if value is not None}
    if args.action == "set" and not given:
        return _fail(
            f"budget set needs at least one limit ({', '.join(BUDGET_FLAGS.values())}); "
            "`budget clear` removes the tenant's limits"
        )
    if args.action != "set" and given:
        return _fail(f"budget {args.action} takes no limit; use `budget set`")

    def run(store: Any) -> int:
        if args.action == "set":
            limits = parse_limits(given, "budget")
            if args.replace:
                new = limits
            else:  # the limits not named keep their values
                current = asyncio.run(store.get_budget(args.tenant))
                new = dataclasses.replace(current, **given_values(limits)) if current else limits
            asyncio.run(store.put_budget(args.tenant, new))
        elif args.action == "clear":
            asyncio.run(store.put_budget(args.tenant, None))
        own = asyncio.run(store.get_budget(args.tenant))
        spend = asyncio.run(store.get_spend(args.tenant, int(time.time())))
        if args.json:
            limits_json = (
                None
                if own is None
                else {
                    k: _number(getattr(own, k)) for k in BUDGET_FLAGS if getattr(own, k) is not None
                }
            )
            document = {
                "tenant": args.tenant,
                "limits": limits_json,
                "spent": {
                    "day_tokens": spend.day_tokens,
                    "day_cost_usd": _number(spend.day_cost_usd),
                    "month_tokens": spend.month_tokens,
                    "month_cost_usd": _number(spend.month_cost_usd),
                },
            }
            print(json.dumps(document, indent=2))
            return 0
        print(f"tenant {args.tenant}")
        print(f"  own limits:  {_limits_text(own)}")
        print(f"  spent today: {spend.day_tokens} tokens, {spend.day_cost_usd:.6f} USD")
        print(f"  this month:  {spend.month_tokens} tokens, {spend.month_cost_usd:.6f} USD")
        return 0

    def given_values(limits: Any) -> dict[str, Any]:
        return {name: getattr(limits, name) for name in given}

    return _with_store(args, run)


def _number(value: Any) -> Any:
    """A ``Decimal`` as JSON shows it: an int when whole, else a float."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value


def build_parser() -> argparse.ArgumentParser:
    """The command's parser: every subcommand and flag (the docs' command lines are checked
    against it)."""
    parser = argparse.ArgumentParser(prog="responses-gateway", description=DESCRIPTION)
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
    usage.add_argument(
        "--group-by",
        default=None,
        help="comma-separated: project_id (the tenant), model, api_key_id (default: all three "
        "in the table, project_id,model with --json)",
    )
    budget = commands.add_parser("budget", help="show, set or clear a tenant's own limits")
    budget.add_argument("action", choices=("show", "set", "clear"))
    budget.add_argument("--tenant", required=True)
    for name, flag in BUDGET_FLAGS.items():
        unit = "US dollars" if name.endswith("_usd") else "input + output tokens"
        budget.add_argument(flag, dest=name, default=None, help=f"set: the limit, in {unit}")
    budget.add_argument(
        "--replace",
        action="store_true",
        help="set: drop the limits not given (by default they keep their values)",
    )
    budget.add_argument("--json", action="store_true", help="print the result as JSON")
    for command in (usage, budget):
        command.add_argument(
            "--db",
            default=None,
            metavar="PATH",
            help="the SQLite database file, as for serve (default: GATEWAY_DB_PATH, else "
            "~/.local/share/responses-gateway/gateway.db)",
        )
        command.add_argument(
            "--table", default=None, help="a DynamoDB table instead (default: DYNAMODB_TABLE)"
        )
        command.add_argument("--endpoint-url", default=None, help="the table's endpoint")
        command.add_argument("--region", default=None, help="the table's region")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``responses-gateway`` command."""
    parser = build_parser()
    args = parser.parse_args(argv)
    _configure_logging(sys.stdout if args.command == "serve" else sys.stderr)
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
