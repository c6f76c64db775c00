"""The ``responses-gateway`` command: run the gateway (or a fake upstream) locally.

Owns argument parsing and process startup only. ``serve`` runs the app under uvicorn with the
configuration from the environment (see :mod:`responses_gateway.config`) and the store
``store.select`` picks (an SQLite file by default: ``--db`` / ``GATEWAY_DB_PATH``); with no upstream
configured it starts the bundled scripted ``demo`` model on a loopback port and routes to it, so
every feature can be tried offline. ``fake-upstream`` runs the scripted upstream alone.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

__all__ = ["main"]

DEMO_MODELS = {"demo": "chat", "demo-responses": "responses"}
"""Model names served by the bundled demo upstream, and the wire format each goes through."""


def _serve(host: str, port: int, db_path: str | None) -> int:
    import uvicorn

    from responses_gateway.app import create_app
    from responses_gateway.config import ConfigError, load_config, parse_config

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
    try:
        uvicorn.run(create_app(config, opened.store), host=host, port=port, log_level="warning")
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
    table = commands.add_parser("create-table", help="create the DynamoDB table")
    table.add_argument("--table", required=True)
    table.add_argument("--endpoint-url", default=None)
    table.add_argument("--region", default=None)
    fake = commands.add_parser("fake-upstream", help="run the scripted fake upstream model")
    fake.add_argument("--host", default="127.0.0.1")
    fake.add_argument("--port", type=int, default=8001)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if args.command == "serve":
        return _serve(args.host, args.port, args.db)
    if args.command == "create-table":
        return _create_table(args.table, args.endpoint_url, args.region)
    return _fake_upstream(args.host, args.port)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
