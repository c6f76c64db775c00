"""loads_json: upstream JSON decoded as ``json.loads`` decodes it, lone surrogates replaced;
the scanner fast path gives the same values and errors as the full parser."""

from __future__ import annotations

import json

import pytest

from responses_gateway.adapters.wire import loads_json


@pytest.mark.parametrize(
    "text",
    [
        '{"type":"response.output_text.delta","delta":" w001","logprobs":[]}',
        '{"a":[1,2.5,-0.0,1e-07,true,false,null],"b":{"c":"d"}}',
        '{"big":123456789012345678901234567890}',
        '{"a":1,"a":2}',
        '"just a string"',
        "[NaN, Infinity]",
        ' {"padded": true}\n',
        '{"emoji":"\\ud83d\\ude00","raw":"😀 ü"}',
    ],
)
def test_loads_json_equals_json_loads(text: str) -> None:
    assert repr(loads_json(text)) == repr(json.loads(text))


def test_loads_json_escaped_lone_surrogate_replaced() -> None:
    assert loads_json('{"a":"x\\ud83dy","b":["\\uDC00"]}') == {"a": "x\ufffdy", "b": ["\ufffd"]}


def test_loads_json_raw_lone_surrogate_replaced() -> None:
    assert loads_json('{"a":"é\ud800"}') == {"a": "é\ufffd"}


@pytest.mark.parametrize("text", ["", "{", '{"a":1} x', "\ufeff{}", "[1,]"])
def test_loads_json_invalid_raises_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        loads_json(text)
