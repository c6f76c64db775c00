"""An embedded DynamoDB-compatible endpoint for tests and ``GATEWAY_STORE=moto`` (moto's server).

Owns starting moto's ``ThreadedMotoServer`` on a loopback port in this process, creating the
gateway's table on it and handing back a ready client, so the DynamoDB store runs offline with no
AWS account and no Docker (``serve`` keeps its state in SQLite unless asked for this: moto answers
a Query by walking the whole table, so it slows down as it fills). moto is imported only inside
:func:`start_local_dynamodb`: it is heavy (about 2-3 s to import) and must never be loaded on the
Lambda path. The dummy credentials live in the client built here only; the process environment is
not touched. moto keeps TTL settings but never expires items: the store treats expired items as
gone on read, so behaviour is the same.

The endpoint answers one request at a time: moto's transactions deep-copy the table and are not
safe against a concurrent write in another server thread (a copy fails with "dictionary changed
size during iteration"). Serialized, every request is atomic, as DynamoDB's items are; clients
still send concurrently.

moto keeps a transaction's rollback copy by deep-copying the whole table once per item of the
transaction: the cost of every write grows with everything stored before it (a ten-item ledger
transaction on a table of a few thousand responses copies it ten times, and a test session's
memory balloons). :func:`_rollback_by_item` replaces that copy with one of the items the
transaction names, restored when moto cancels it: the same all-or-nothing outcome.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from responses_gateway.store.table import create_table, make_client

__all__ = ["DEFAULT_LOCAL_TABLE", "LocalDynamo", "start_local_dynamodb"]

DEFAULT_LOCAL_TABLE = "responses-gateway"


@dataclass(slots=True)
class LocalDynamo:
    """A running embedded endpoint with the table created on it."""

    endpoint_url: str
    table_name: str
    region: str
    client: Any
    """A boto3 DynamoDB client for this endpoint (dummy credentials): for setup and inspection;
    a ``DynamoStore`` given it makes its own calls over its HTTP client, with these settings."""
    started_in: float
    """Seconds from the call to a ready table (moto import included)."""
    _server: Any = field(repr=False)

    def reset(self) -> None:
        """Drop every table (``POST /moto-api/reset``) and create the gateway's table again."""
        import urllib.request

        request = urllib.request.Request(f"{self.endpoint_url}/moto-api/reset", method="POST")
        with urllib.request.urlopen(request, timeout=10):
            pass
        create_table(self.client, self.table_name)

    def stop(self) -> None:
        self._server.stop()


def _serialized(app: Callable[..., Iterable[bytes]]) -> Callable[..., list[bytes]]:
    """A WSGI app answering one request at a time (see the module docstring)."""
    lock = threading.Lock()

    def serve(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        with lock:
            return list(app(environ, start_response))

    return serve


class _TableCopies(threading.local):
    skip = False


def _rollback_by_item() -> None:
    """Make moto's ``transact_write_items`` keep a copy of the items it names instead of the
    tables (see the module docstring). Idempotent; applies to this process's moto."""
    import copy
    import types

    from moto.dynamodb import models
    from moto.dynamodb.models.table import Table

    if getattr(models.DynamoDBBackend.transact_write_items, "_by_item", False):
        return
    state = _TableCopies()
    real_deepcopy = copy.deepcopy

    def deepcopy(value: Any, memo: Any = None) -> Any:
        if state.skip and isinstance(value, Table):
            return value  # rolled back item by item by the wrapper below
        return real_deepcopy(value, memo)

    models.copy = types.SimpleNamespace(deepcopy=deepcopy)  # type: ignore[attr-defined,assignment]
    original = models.DynamoDBBackend.transact_write_items

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        saved: list[tuple[str, dict[str, Any], Any]] = []
        for entry in transact_items:
            _, op = next(iter(entry.items()))
            name = op.get("TableName")
            table = self.tables.get(name)
            if table is None:
                continue
            key = op.get("Key")
            if key is None:
                item = op.get("Item") or {}
                attrs = [a for a in (table.hash_key_attr, table.range_key_attr) if a]
                key = {a: item[a] for a in attrs if a in item}
            try:
                current = self.get_item(name, key)
            except Exception:  # an invalid key: moto refuses the transaction before writing
                continue
            saved.append((name, key, real_deepcopy(current) if current is not None else None))
        state.skip = True
        try:
            original(self, transact_items)
        except Exception:
            state.skip = False
            for name, key, item in reversed(saved):
                if item is None:
                    self.delete_item(name, key)
                else:
                    self.put_item(name, item.to_json()["Attributes"])
            raise
        finally:
            state.skip = False

    transact_write_items._by_item = True  # type: ignore[attr-defined]
    models.DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]


def _server_class() -> Any:
    from moto.moto_server.threaded_moto_server import ThreadedMotoServer
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    class SerializedMotoServer(ThreadedMotoServer):
        def _server_entry(self) -> None:
            app = _serialized(DomainDispatcherApplication(create_backend_app))
            self._server = make_server(
                self._ip_address, self._port, app, True, request_handler=MotoRequestHandler
            )
            self._server_ready_event.set()
            self._server.serve_forever()

    return SerializedMotoServer


def start_local_dynamodb(
    table_name: str = DEFAULT_LOCAL_TABLE, region: str = "us-east-1"
) -> LocalDynamo:
    """Start moto's DynamoDB on ``127.0.0.1`` (a free port) and create the table on it."""
    started = time.perf_counter()
    server_class = _server_class()
    _rollback_by_item()
    # moto serves through werkzeug, which logs every request at INFO to stderr unless its logger
    # was configured; keep that quiet (an explicitly set level is left alone).
    werkzeug_log = logging.getLogger("werkzeug")
    if werkzeug_log.level == logging.NOTSET:
        werkzeug_log.setLevel(logging.WARNING)
    server = server_class(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint_url = f"http://{host}:{port}"
        client = make_client(
            endpoint_url=endpoint_url, region=region, credentials=("local", "local")
        )
        create_table(client, table_name)
    except BaseException:
        server.stop()
        raise
    return LocalDynamo(
        endpoint_url=endpoint_url,
        table_name=table_name,
        region=region,
        client=client,
        started_in=time.perf_counter() - started,
        _server=server,
    )
