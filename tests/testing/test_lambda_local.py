"""lambda_local's routing: the REST API's routes read from the template's ``Api`` events.

GIVEN ``template.yaml``, WHEN a request's method and path are matched, THEN it reaches the
function API Gateway would invoke, streamed exactly where the template streams, with its path
parameters, and a literal resource wins over a templated one.
"""

from __future__ import annotations

import sys

from responses_gateway.testing.lambda_local import ROOT, routes_of

sys.path.insert(0, str(ROOT / "infra"))
from check_template import load_template  # type: ignore[import-not-found]  # noqa: E402

ROUTES = routes_of(load_template())


def _route(method: str, path: str) -> tuple[str, bool, dict[str, str]]:
    for route in ROUTES:
        found = route.match(method, path)
        if found is not None:
            return route.function, route.streaming, found
    raise AssertionError(f"no route for {method} {path}")


def test_creates_and_reads_stream_from_the_streaming_function() -> None:
    assert _route("POST", "/v1/responses") == ("StreamingFunction", True, {})
    assert _route("GET", "/v1/responses/resp_1") == (
        "StreamingFunction",
        True,
        {"response_id": "resp_1"},
    )


def test_other_routes_are_the_buffered_function_s() -> None:
    assert _route("POST", "/v1/responses/resp_1/cancel") == (
        "BufferedFunction",
        False,
        {"response_id": "resp_1"},
    )
    assert _route("POST", "/v1/responses/compact")[0] == "StreamingFunction"  # not {response_id}
    assert _route("POST", "/v1/conversations") == ("BufferedFunction", False, {})


def test_an_unknown_route_matches_nothing() -> None:
    assert not [r for r in ROUTES if r.match("GET", "/v1/nothing/here")]
    assert not [r for r in ROUTES if r.match("DELETE", "/v1/responses")]
