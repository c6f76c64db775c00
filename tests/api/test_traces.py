"""The ingest batch check (api.traces.split_batch): traces and spans apart, errors on the field."""

from __future__ import annotations

import pytest

from responses_gateway.api.traces import MAX_BATCH, split_batch
from responses_gateway.errors import InvalidRequestError


def test_split_batch_separates_traces_and_spans() -> None:
    trace = {"object": "trace", "id": "trace_1", "workflow_name": "w"}
    span = {"object": "trace.span", "id": "span_1", "trace_id": "trace_1", "span_data": {}}
    assert split_batch({"data": [trace, span]}) == ([trace], [span])
    assert split_batch({"data": []}) == ([], [])


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({}, "data"),
        ([], "data"),
        ({"data": [{"object": "trace"}]}, "data[0].id"),
        ({"data": [{"object": "trace.span", "id": "s"}]}, "data[0].trace_id"),
        ({"data": [{"object": "trace", "id": "t"}, {"object": "span"}]}, "data[1].object"),
        ({"data": [{"object": "trace", "id": "t"}] * (MAX_BATCH + 1)}, "data"),
    ],
)
def test_split_batch_rejects_bad_batches(body: object, param: str) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        split_batch(body)
    assert caught.value.param == param
