"""Selection strategies: which of a model's available deployments takes the next call.

Owns :data:`STRATEGY_CHOOSERS`, one function per strategy of a route (``weighted``: at random in
proportion to the weights; ``least_loaded``: fewest calls in flight in this instance, weighted
among ties; ``lowest_latency``: deployments not measured yet first, then the lowest moving
average of call time in this instance) and :func:`by_key` (a request's ``prompt_cache_key``:
the same key, the same deployment while it is available). Pure functions of their arguments plus
a random source; nothing here knows about health, the store or HTTP.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Callable, Mapping, Sequence

from responses_gateway.routing.deployments import Deployment

__all__ = ["STRATEGY_CHOOSERS", "Chooser", "by_key", "choose"]

Chooser = Callable[
    [Sequence[Deployment], random.Random, Mapping[str, int], Mapping[str, float]], Deployment
]


def _weighted(
    candidates: Sequence[Deployment],
    rng: random.Random,
    in_flight: Mapping[str, int],
    latency: Mapping[str, float],
) -> Deployment:
    if len(candidates) == 1:
        return candidates[0]
    return rng.choices(list(candidates), weights=[d.weight for d in candidates])[0]


def _least_loaded(
    candidates: Sequence[Deployment],
    rng: random.Random,
    in_flight: Mapping[str, int],
    latency: Mapping[str, float],
) -> Deployment:
    lowest = min(in_flight.get(d.id, 0) for d in candidates)
    tied = [d for d in candidates if in_flight.get(d.id, 0) == lowest]
    return _weighted(tied, rng, in_flight, latency)


def _lowest_latency(
    candidates: Sequence[Deployment],
    rng: random.Random,
    in_flight: Mapping[str, int],
    latency: Mapping[str, float],
) -> Deployment:
    unmeasured = [d for d in candidates if d.id not in latency]
    if unmeasured:
        return _weighted(unmeasured, rng, in_flight, latency)
    return min(candidates, key=lambda d: latency[d.id])


STRATEGY_CHOOSERS: dict[str, Chooser] = {
    "weighted": _weighted,
    "least_loaded": _least_loaded,
    "lowest_latency": _lowest_latency,
}


def choose(
    strategy: str,
    candidates: Sequence[Deployment],
    rng: random.Random,
    in_flight: Mapping[str, int] | None = None,
    latency: Mapping[str, float] | None = None,
) -> Deployment:
    """The deployment ``strategy`` picks among ``candidates`` (non-empty)."""
    return STRATEGY_CHOOSERS[strategy](candidates, rng, in_flight or {}, latency or {})


def by_key(candidates: Sequence[Deployment], key: str) -> Deployment:
    """The deployment a cache key lands on (``candidates`` non-empty): weighted rendezvous
    hashing, so one key keeps its deployment while that one is a candidate, a deployment that
    leaves moves only its own keys, and keys spread over deployments in proportion to their
    weights. Calls sharing a prompt prefix (and so a ``prompt_cache_key``) meet a warm cache."""

    def score(deployment: Deployment) -> float:
        digest = hashlib.sha256(f"{key}\0{deployment.id}".encode()).digest()
        unit = (int.from_bytes(digest[:8], "big") + 1) / (2**64 + 2)  # in (0, 1)
        return deployment.weight / -math.log(unit)

    return max(candidates, key=score)
