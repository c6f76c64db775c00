"""Request units and round trips spent by a store, per store operation.

Owns the bookkeeping only: :class:`UnitMeter` adds up what :mod:`store._calls` reports after each
DynamoDB call. The units are *computed* from the sizes of the items read and written, following
DynamoDB's on-demand billing rules (1 read unit per 4 KB of a strongly consistent read, each item
of a batch rounded up separately, a Query's items summed before rounding; 1 write unit per 1 KB
written; transactions cost twice). ``reported_units`` separately adds up what the endpoint itself
returned in ``ConsumedCapacity`` (accurate on real DynamoDB; moto's figures are placeholders).
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, replace
from typing import Any

__all__ = ["OperationUnits", "UnitMeter"]


@dataclass(slots=True)
class OperationUnits:
    """What one store operation (e.g. ``get_responses``) has cost so far."""

    read_units: int = 0
    write_units: int = 0
    round_trips: int = 0
    """DynamoDB API requests sent (batch retries included; parallel requests each count)."""
    reported_units: float = 0.0
    """Sum of ``ConsumedCapacity.CapacityUnits`` the endpoint returned."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class UnitMeter:
    """Thread-safe counters of units and round trips by operation name."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_op: dict[str, OperationUnits] = {}

    def record(
        self,
        operation: str,
        *,
        read_units: int = 0,
        write_units: int = 0,
        round_trips: int = 0,
        reported_units: float = 0.0,
    ) -> None:
        with self._lock:
            units = self._by_op.setdefault(operation, OperationUnits())
            units.read_units += read_units
            units.write_units += write_units
            units.round_trips += round_trips
            units.reported_units += reported_units

    def snapshot(self) -> dict[str, OperationUnits]:
        """A copy of the counters, by operation name."""
        with self._lock:
            return {op: replace(units) for op, units in self._by_op.items()}

    def total(self) -> OperationUnits:
        """All operations added together."""
        total = OperationUnits()
        for units in self.snapshot().values():
            total.read_units += units.read_units
            total.write_units += units.write_units
            total.round_trips += units.round_trips
            total.reported_units += units.reported_units
        return total

    def reset(self) -> None:
        with self._lock:
            self._by_op.clear()
