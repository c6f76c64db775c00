"""decide_after_llm_failure on hand-built attempts: no I/O, no router."""

from __future__ import annotations

from responses_gateway.context.errors import ContextLengthExceeded
from responses_gateway.errors import (
    UpstreamStatusError,
    UpstreamTransportError,
)
from responses_gateway.loop.failover import decide_after_llm_failure
from responses_gateway.routing.attempts import Attempts, GiveUp, RetryOn
from responses_gateway.routing.deployments import Deployment, ModelRoute
from responses_gateway.routing.failures import LlmFailure, classify

ROUTE = ModelRoute(
    model="m",
    deployments=(Deployment("a", None, "m"), Deployment("b", None, "m")),
    fallbacks=("f1", "f2"),
    context_window_fallback="big",
    max_attempts=5,
    max_wait_seconds=10,
)


def _failure(status: int = 503, *, streamed: bool = False) -> LlmFailure:
    return classify(UpstreamStatusError(status, "boom"), streamed=streamed)


def test_decide_after_llm_failure_with_an_untried_sibling_retries_on_it() -> None:
    attempts = Attempts("m", count=1, tried={"a"})
    assert decide_after_llm_failure(attempts, _failure(429), ROUTE, 1) == RetryOn("m")


def test_decide_after_llm_failure_after_output_reached_the_client_gives_up() -> None:
    verdict = decide_after_llm_failure(Attempts("m", count=1), _failure(streamed=True), ROUTE, 1)
    assert isinstance(verdict, GiveUp)


def test_decide_after_llm_failure_on_context_length_moves_to_the_larger_model_once() -> None:
    failure = classify(ContextLengthExceeded(), streamed=False)
    assert decide_after_llm_failure(Attempts("m", count=1), failure, ROUTE, 1) == RetryOn("big")
    on_big = Attempts("m", model="big", count=2)
    assert isinstance(decide_after_llm_failure(on_big, failure, ROUTE, 1), GiveUp)


def test_decide_after_llm_failure_on_a_request_error_gives_up() -> None:
    verdict = decide_after_llm_failure(Attempts("m", count=1), _failure(400), ROUTE, 1)
    assert verdict == GiveUp("fatal is not retryable")


def test_decide_after_llm_failure_without_siblings_takes_the_fallbacks_in_order() -> None:
    attempts = Attempts("m", count=2, tried={"a", "b"})
    assert decide_after_llm_failure(attempts, _failure(), ROUTE, 0) == RetryOn("f1")
    attempts.apply(RetryOn("f1"))
    assert attempts.tried == set() and attempts.fallbacks_used == ["f1"]
    assert decide_after_llm_failure(attempts, _failure(), ROUTE, 0) == RetryOn("f2")


def test_decide_after_llm_failure_with_everything_failed_waits_for_a_new_round() -> None:
    attempts = Attempts("m", model="f2", count=4, fallbacks_used=["f1", "f2"])
    verdict = decide_after_llm_failure(attempts, _failure(), ROUTE, 0)
    assert verdict == RetryOn("m", fresh=True)
    attempts.waited = 10
    assert isinstance(decide_after_llm_failure(attempts, _failure(), ROUTE, 0), GiveUp)


def test_decide_after_llm_failure_at_max_attempts_gives_up() -> None:
    verdict = decide_after_llm_failure(Attempts("m", count=5), _failure(), ROUTE, 1)
    assert verdict == GiveUp("max_attempts reached")


def test_decide_after_llm_failure_on_the_larger_model_never_goes_back_to_smaller_ones() -> None:
    attempts = Attempts("m", model="big", count=2, fallbacks_used=[], tried={"x"})
    transport = classify(UpstreamTransportError("reset"), streamed=False)
    assert decide_after_llm_failure(attempts, transport, ROUTE, 0) == RetryOn("big", fresh=True)
