"""The app's routes, served by Starlette alone, answer exactly as FastAPI's routes do, and
FastAPI is loaded only when a console route is asked for.

The oracle is FastAPI itself: the same route tables, handlers and middleware assembled as one
FastAPI app (every route FastAPI's), asked the same requests as the app ``create_app`` builds.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.testclient import TestClient

from responses_gateway.api.mount import HandlerRoute, json_answer
from responses_gateway.api.routes import RouteSpec, RouteTable, build_api_router
from responses_gateway.app import (
    CONSOLE_PREFIXES,
    EXCEPTION_HANDLERS,
    ROUTE_TABLES,
    EdgeMiddleware,
    LazyRoutes,
    _console_routes,
    create_app,
)
from responses_gateway.config import parse_config
from responses_gateway.store.sqlite import SqliteStore

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
PATHS = (
    "/health",
    "/health/",
    "/v1/responses",
    "/v1/responses/",
    "/v1/responses/resp_1",
    "/v1/responses/resp_1/",
    "/v1/responses/resp_1/cancel",
    "/v1/responses/resp_1/input_items",
    "/v1/responses/input_tokens",
    "/v1/responses/compact",
    "/v1/responses/a/b/c",
    "/v1/conversations",
    "/v1/conversations/conv_1",
    "/v1/conversations/conv_1/items",
    "/v1/conversations/conv_1/items/item_1",
    "/v1/organization/usage/completions",
    "/v1/organization/prompts/p1",
    "/v1/organization/prompts/p1/versions",
    "/v1/console/me",
    "/nowhere",
    "/",
)


def _fastapi_edition(app: Starlette) -> FastAPI:
    """``app``'s routes, handlers and middleware with every route served by FastAPI."""
    oracle = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    oracle.state = app.state
    for kind, handler in EXCEPTION_HANDLERS.items():
        oracle.add_exception_handler(kind, handler)
    oracle.include_router(build_api_router(spec for table in ROUTE_TABLES for spec in table.specs))
    oracle.router.routes.append(LazyRoutes(CONSOLE_PREFIXES, _console_routes))
    oracle.add_middleware(EdgeMiddleware)
    return oracle


@pytest.fixture(scope="module")
def clients() -> Iterator[tuple[TestClient, TestClient]]:
    config = parse_config({"providers": [{"base_url": "http://127.0.0.1:9/v1", "api": "chat"}]})
    app = create_app(config, SqliteStore())
    with (
        TestClient(app, raise_server_exceptions=False) as served,
        TestClient(_fastapi_edition(app), raise_server_exceptions=False) as oracle,
    ):
        yield served, oracle


def _answer(client: TestClient, method: str, path: str) -> dict[str, Any]:
    body = b"{" if method in ("POST", "PUT", "PATCH") else None  # never valid: no side effects
    answer = client.request(
        method,
        path,
        content=body,
        headers={"content-type": "application/json", "x-request-id": "req_same"},
        follow_redirects=False,
    )
    return {
        "status": answer.status_code,
        "headers": sorted(answer.headers.multi_items()),
        "body": answer.content,
    }


@pytest.mark.parametrize("path", PATHS)
def test_every_method_and_path_answers_as_fastapi_would(
    clients: tuple[TestClient, TestClient], path: str
) -> None:
    served, oracle = clients

    for method in METHODS:
        assert _answer(served, method, path) == _answer(oracle, method, path), (method, path)


def test_routes_keep_fastapis_statuses_and_envelopes(
    clients: tuple[TestClient, TestClient],
) -> None:
    served, _ = clients

    assert served.head("/health").status_code == 405  # FastAPI's GET routes do not answer HEAD
    missing = served.get("/v1/responses/resp_1")
    assert missing.status_code == 404
    assert missing.json()["error"]["param"] == "response_id"
    assert missing.headers["x-request-id"].startswith("req_")
    refused = served.put("/v1/responses/resp_1")
    assert refused.status_code == 405
    assert refused.json()["error"]["message"] == "Method Not Allowed"
    assert "allow" not in refused.headers
    moved = served.post("/v1/responses/", follow_redirects=False)
    assert (moved.status_code, moved.headers["location"]) == (307, "http://testserver/v1/responses")


async def _echo_id(request: Request, item_id: str) -> dict[str, str]:
    return {"id": item_id, "method": request.method}


def test_a_route_passes_path_parameters_and_encodes_plain_values() -> None:
    table = RouteTable("/items")
    table.get("/{item_id}")(_echo_id)
    app = Starlette(routes=[HandlerRoute(table.specs[0])])

    with TestClient(app) as client:
        answer = client.get("/items/abc")
        head = client.head("/items/abc")

    assert answer.status_code == 200
    assert answer.json() == {"id": "abc", "method": "GET"}
    assert answer.headers["content-type"] == "application/json"
    assert head.status_code == 405


def test_a_route_refuses_parameters_that_are_not_path_segments() -> None:
    async def needs_query(request: Request, limit: int) -> None: ...

    with pytest.raises(TypeError, match="needs_query"):
        HandlerRoute(RouteSpec("/items", needs_query, ("GET",)))


def test_answers_that_are_not_plain_json_go_through_fastapis_encoder() -> None:
    import datetime
    import decimal

    answer = json_answer({"when": datetime.date(2026, 1, 2), "n": decimal.Decimal("1.5")})

    assert answer.body == b'{"when":"2026-01-02","n":1.5}'


_PROBE = textwrap.dedent(
    """
    import sys
    from starlette.testclient import TestClient
    from responses_gateway.app import create_app
    from responses_gateway.config import parse_config
    from responses_gateway.store.sqlite import SqliteStore

    config = parse_config({"providers": [{"base_url": "http://127.0.0.1:9/v1", "api": "chat"}]})
    with TestClient(create_app(config, SqliteStore())) as client:
        seen = []
        for method, path, status in [
            ("GET", "/health", 200),
            ("GET", "/nowhere", 404),
            ("PUT", "/v1/responses", 405),
            ("GET", "/v1/responses/resp_1", 404),
            ("DELETE", "/v1/conversations/conv_1", 404),
            ("GET", "/v1/organization/usage/completions", 403),
            ("GET", "/v1/console/me", 200),
        ]:
            assert client.request(method, path).status_code == status, path
            seen.append("fastapi" in sys.modules)
    print(seen)
    """
)


def test_fastapi_loads_on_the_first_request_to_a_console_route() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, check=False, timeout=120
    )

    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == [
        "[False,",
        "False,",
        "False,",
        "False,",
        "False,",
        "False,",
        "True]",
    ]
