"""Selection strategies: weighted shares, least loaded, lowest latency, and a cache key's
deployment."""

from __future__ import annotations

import random
from collections import Counter

from responses_gateway.routing.choose import by_key, choose
from responses_gateway.routing.deployments import Deployment

A = Deployment("a", None, "m", weight=1)
B = Deployment("b", None, "m", weight=3)
C = Deployment("c", None, "m", weight=6)


def test_weighted_selection_is_within_5_percent_of_the_weights_over_1000_picks() -> None:
    rng = random.Random(22)
    picks = Counter(choose("weighted", [A, B, C], rng).id for _ in range(1000))
    for deployment in (A, B, C):
        share = picks[deployment.id] / 1000
        assert abs(share - deployment.weight / 10) < 0.05, picks


def test_least_loaded_takes_the_fewest_calls_in_flight() -> None:
    rng = random.Random(1)
    assert choose("least_loaded", [A, B, C], rng, {"a": 2, "b": 0, "c": 1}).id == "b"


def test_lowest_latency_measures_unmeasured_deployments_first_then_the_fastest() -> None:
    rng = random.Random(1)
    assert choose("lowest_latency", [A, B], rng, latency={"a": 0.5}).id == "b"
    assert choose("lowest_latency", [A, B], rng, latency={"a": 0.5, "b": 0.9}).id == "a"


KEYS = [f"key-{n}" for n in range(1000)]


def test_by_key_one_key_always_lands_on_the_same_deployment() -> None:
    first = {key: by_key([A, B, C], key).id for key in KEYS}
    assert {key: by_key([C, A, B], key).id for key in KEYS} == first  # order does not matter


def test_by_key_spreads_keys_within_5_percent_of_the_weights() -> None:
    picks = Counter(by_key([A, B, C], key).id for key in KEYS)
    for deployment in (A, B, C):
        assert abs(picks[deployment.id] / 1000 - deployment.weight / 10) < 0.05, picks


def test_by_key_a_deployment_leaving_moves_only_its_own_keys() -> None:
    before = {key: by_key([A, B, C], key).id for key in KEYS}
    after = {key: by_key([A, C], key).id for key in KEYS}
    moved = {key for key in KEYS if before[key] != after[key]}
    assert moved == {key for key in KEYS if before[key] == "b"}
