"""What compaction and truncation cost: model calls, tokenizer calls and DynamoDB units.

Serves the real app (DynamoDB store on an embedded moto server, the scripted fake upstream over
loopback HTTP, a chat-wire model with a 600-token window) and drives it with plain HTTP. For each
request the store's :class:`~responses_gateway.store.UnitMeter` is reset first and read after, and
the upstream's recorded requests are counted by endpoint. Rows:

- ``chain turn, truncation auto``: a turn of a ``previous_response_id`` chain with no
  compaction, at depth 1, 50 and 100 (every ancestor is read on every turn; past the window the
  oldest items are dropped from what the model sees);
- ``compacted chain``: the same 100-turn chain with ``context_management`` (threshold 300
  tokens): an ordinary turn and a compacting turn, at the end of the chain;
- ``POST /responses/compact``: a 20-item input, no stored context;
- ``truncation auto``: a create whose input is 1.5 windows long.

Usage::

    python benchmarks/context_costs.py [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import httpx

from responses_gateway.app import create_app
from responses_gateway.config import parse_config
from responses_gateway.store.dynamo import DynamoStore
from responses_gateway.store.local import start_local_dynamodb
from responses_gateway.testing.fake_upstream import create_fake_upstream_app
from responses_gateway.testing.script import ScriptedUpstream, Turn
from responses_gateway.testing.server import run_in_thread

MODEL = "bench-chat"
WINDOW = 600
_MODEL_PATHS = ("/v1/chat/completions", "/v1/responses", "/v1/completions")


def _answer(body: dict[str, Any], wire: str) -> Turn:
    if "compacting a conversation" in json.dumps(body):
        return Turn(text="Summary: the user counted turns and every one was noted.")
    return Turn(text="Noted, carry on.")


class Bench:
    def __init__(self) -> None:
        self.upstream = ScriptedUpstream(_answer, demo=False)
        self.upstream_server = run_in_thread(create_fake_upstream_app(self.upstream))
        self.dynamo = start_local_dynamodb(table_name="context-bench")
        self.store = DynamoStore(self.dynamo.client, self.dynamo.table_name)
        config = parse_config(
            {
                "providers": [
                    {
                        "name": "bench",
                        "base_url": f"{self.upstream_server.url}/v1",
                        "api": "chat",
                        "models": [MODEL],
                        "context_window": WINDOW,
                    }
                ]
            }
        )
        self.gateway = run_in_thread(create_app(config, self.store))
        self.http = httpx.Client(base_url=f"{self.gateway.url}/v1", timeout=30)

    def close(self) -> None:
        self.http.close()
        self.gateway.stop()
        self.upstream_server.stop()
        self.store.close()
        self.dynamo.stop()

    def post(self, path: str, body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """The answer, and what the request cost."""
        self.upstream.push(_answer, _answer)  # a compacting turn makes two model calls
        self.store.meter.reset()
        before = len(self.upstream.requests)
        answer = self.http.post(path, json=body)
        answer.raise_for_status()
        total = self.store.meter.total()
        sent = self.upstream.requests[before:]
        return answer.json(), {
            "read_units": total.read_units,
            "write_units": total.write_units,
            "round_trips": total.round_trips,
            "model_calls": sum(1 for r in sent if r.path in _MODEL_PATHS),
            "tokenizer_calls": sum(1 for r in sent if r.path == "/tokenize"),
        }


def _chain(bench: Bench, turns: int, managed: bool) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    previous = None
    last_plain: dict[str, Any] | None = None
    last_compacting: dict[str, Any] | None = None
    for turn in range(1, turns + 1):
        body: dict[str, Any] = {
            "model": MODEL,
            "input": f"Turn {turn}: please note the words alpha beta gamma delta epsilon.",
        }
        if previous:
            body["previous_response_id"] = previous
        if managed:
            body["context_management"] = [{"type": "compaction", "compact_threshold": 300}]
        else:
            body["truncation"] = "auto"  # past the window, the oldest turns are dropped
        response, cost = bench.post("/responses", body)
        previous = response["id"]
        compacted = any(item["type"] == "compaction" for item in response["output"])
        if compacted:
            last_compacting = cost
        else:
            last_plain = cost
        if not managed and turn in (1, 50, 100):
            rows[f"chain turn, truncation auto @{turn}"] = cost
    if managed:
        rows["compacted chain: ordinary turn (end)"] = last_plain
        rows["compacted chain: compacting turn (end)"] = last_compacting
    return rows


def run(bench: Bench) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    rows.update(_chain(bench, 100, managed=False))
    rows.update(_chain(bench, 100, managed=True))
    items = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} " * 10}
        for i in range(20)
    ]
    _, rows["POST /responses/compact (20 items)"] = bench.post(
        "/responses/compact", {"model": MODEL, "input": items}
    )
    long_input = [{"role": "user", "content": "word " * 300} for _ in range(3)]
    _, rows["truncation auto (1.5 windows)"] = bench.post(
        "/responses", {"model": MODEL, "input": long_input, "truncation": "auto"}
    )
    _, rows["create under the window"] = bench.post("/responses", {"model": MODEL, "input": "hi"})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args(argv)
    bench = Bench()
    try:
        rows = run(bench)
    finally:
        bench.close()
    header = f"{'operation':<42} {'RRU':>5} {'WRU':>5} {'trips':>6} {'model':>6} {'tokenize':>9}"
    print(header)
    print("-" * len(header))
    for name, row in rows.items():
        print(
            f"{name:<42} {row['read_units']:>5} {row['write_units']:>5} {row['round_trips']:>6} "
            f"{row['model_calls']:>6} {row['tokenizer_calls']:>9}"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
