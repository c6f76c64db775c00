"""Which store a locally run gateway (``responses-gateway serve``) keeps its state in.

Owns the choice and its environment, and nothing else: building each store is its module's job.

- ``GATEWAY_STORE=sqlite`` (the default when ``DYNAMODB_TABLE`` is unset): the embedded
  :class:`~responses_gateway.store.sqlite.SqliteStore` on ``GATEWAY_DB_PATH``; durable, one file;
- ``GATEWAY_STORE=dynamodb`` (the default when ``DYNAMODB_TABLE`` is set): a
  :class:`~responses_gateway.store.dynamo.DynamoStore` on ``DYNAMODB_TABLE`` (at
  ``DYNAMODB_ENDPOINT_URL`` when set), as deployed;
- ``GATEWAY_STORE=moto``: a ``DynamoStore`` on an embedded moto endpoint, to exercise the
  DynamoDB code offline; lost on exit.

``GATEWAY_DB_PATH`` (or ``serve --db``) is the SQLite file; ``:memory:`` keeps everything in
memory. Its default is ``$XDG_DATA_HOME/responses-gateway/gateway.db``, i.e.
``~/.local/share/responses-gateway/gateway.db`` when ``XDG_DATA_HOME`` is unset. A file named
there must be in an existing directory (a typo is an error, not a new directory); only the
default location's directory is created.
``RETENTION_DAYS`` applies to every store. The deployed functions do not come here: they always
use DynamoDB (``observability``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from responses_gateway.config import ConfigError
from responses_gateway.store.base import Store

__all__ = [
    "DB_PATH_ENV",
    "STORE_ENV",
    "OpenedStore",
    "default_db_path",
    "open_store",
]

STORE_ENV = "GATEWAY_STORE"
DB_PATH_ENV = "GATEWAY_DB_PATH"
_APP_DIR = "responses-gateway"
_DB_FILE = "gateway.db"


@dataclass(slots=True)
class OpenedStore:
    """A store ready to use, what to tell the operator about it, and how to release it."""

    store: Store
    kind: str
    """``sqlite``, ``dynamodb`` or ``moto``."""
    description: str
    """Where the state lives, for the startup line (no secrets)."""
    close: Callable[[], None]


def default_db_path(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_DATA_HOME/responses-gateway/gateway.db`` (``~/.local/share/...`` by default)."""
    env = os.environ if env is None else env
    base = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base).expanduser() / _APP_DIR / _DB_FILE


def _open_sqlite(env: Mapping[str, str], db_path: str | None) -> OpenedStore:
    from responses_gateway.store.dynamo import retention_days_from_env
    from responses_gateway.store.sqlite import MEMORY, SqliteStore

    named = db_path or env.get(DB_PATH_ENV)
    if named and named != MEMORY:
        parent = Path(named).expanduser().parent
        if not parent.is_dir():
            source = "--db" if db_path else DB_PATH_ENV
            raise ConfigError(
                f"{source} {named}: the directory {parent} does not exist (create it first; "
                "only the default location's directory is created)"
            )
    path = named or str(default_db_path(env))
    store = SqliteStore(path, retention_days=retention_days_from_env(env))
    where = (
        "in memory (lost on exit)"
        if store.path == MEMORY
        else f"in the SQLite database {store.path}"
    )
    return OpenedStore(store, "sqlite", where, store.close)


def _open_dynamodb(env: Mapping[str, str], db_path: str | None) -> OpenedStore:
    from responses_gateway.store.dynamo import DynamoStore

    store = DynamoStore.from_env(env)
    where = f"in the DynamoDB table {store.table_name}"
    if env.get("DYNAMODB_ENDPOINT_URL"):
        where += " at DYNAMODB_ENDPOINT_URL"
    return OpenedStore(store, "dynamodb", where, store.close)


def _open_moto(env: Mapping[str, str], db_path: str | None) -> OpenedStore:
    from responses_gateway.store.dynamo import DynamoStore, region_from_env, retention_days_from_env
    from responses_gateway.store.local import start_local_dynamodb

    local = start_local_dynamodb(region=region_from_env(env))
    store = DynamoStore(local.client, local.table_name, retention_days=retention_days_from_env(env))

    def close() -> None:
        store.close()
        local.stop()

    where = (
        f"in an embedded DynamoDB-compatible endpoint (moto) at {local.endpoint_url}, lost on exit"
    )
    return OpenedStore(store, "moto", where, close)


_OPENERS: dict[str, Callable[[Mapping[str, str], str | None], OpenedStore]] = {
    "sqlite": _open_sqlite,
    "dynamodb": _open_dynamodb,
    "moto": _open_moto,
}


def open_store(env: Mapping[str, str] | None = None, *, db_path: str | None = None) -> OpenedStore:
    """The store the environment asks for (see the module's table).

    Args:
        env: the environment (default: the process's).
        db_path: the SQLite file, overriding ``GATEWAY_DB_PATH`` (``serve --db``).

    Raises:
        ConfigError: an unknown ``GATEWAY_STORE``, or ``dynamodb`` without ``DYNAMODB_TABLE``.
        StoreError: the SQLite file cannot be opened or has another schema version.
    """
    env = os.environ if env is None else env
    kind = (env.get(STORE_ENV) or "").strip().lower()
    if not kind:
        kind = "dynamodb" if env.get("DYNAMODB_TABLE") else "sqlite"
    opener = _OPENERS.get(kind)
    if opener is None:
        raise ConfigError(f"{STORE_ENV} must be one of {', '.join(_OPENERS)}, got {kind!r}")
    return opener(env, db_path)
