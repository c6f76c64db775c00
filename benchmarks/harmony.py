"""What the harmony adapter costs compared with the Chat Completions adapter, measured in one run.

Both adapters are run in this process on the same scripted content, against recorded upstream
answers, so only the adapters' own work is timed (building the request, then parsing the stream
into output items); the network, the gateway's HTTP layer and the sinks are the same for every
wire and are left out:

1. the scripted fake upstream (``create_fake_upstream_app``, on loopback) answers each adapter's
   exact payload once, in its own wire (``chat.completion.chunk`` SSE for chat, a harmony
   ``text_completion`` stream with one token per chunk for harmony); the bodies are recorded;
2. each adapter's ``call_llm`` then runs against its recorded body through
   ``httpx.MockTransport``, with a real ``LoopState`` and ``OutputWriter`` and a sink that drops
   events. The two wires alternate every iteration (who goes first alternates too); the garbage
   collector is off while timing.

Scenarios, the same for both wires:

* ``short``: input ``Hi``, answer :data:`SHORT_TEXT` (one text item);
* ``long``: the same input, answer :data:`LONG_WORDS` words, one token and one chunk each;
* ``history``: a 20-turn transcript (41 messages) with two function tools and a tool call, short
  answer: the same transcript every time, as an agent loop renders it again on each model call
  (harmony renders from its per-message cache);
* ``history-cold``: the same, with every message new on every iteration (nothing cached: what the
  first model call of a long conversation costs).

Reported: the median time per ``call_llm`` for each wire and scenario, harmony - chat and
harmony / chat per request, and the cost per streamed token ((long - short) / streamed tokens)
for each wire and their difference and ratio. The first load of the harmony encoding (reading and
hashing the 3.6 MB vocabulary, once per process) is reported on its own.

Usage::

    python benchmarks/harmony.py [--iterations N] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from datetime import date
from pathlib import Path
from typing import Any

import httpx

from responses_gateway._vocab import harmony_encoding
from responses_gateway.adapters.base import Adapter, ModelCall
from responses_gateway.adapters.chat_completions import (
    ChatCompletionsAdapter,
    to_chat_request,
)
from responses_gateway.adapters.harmony import HarmonyAdapter, to_harmony_request
from responses_gateway.loop.events import NullSink
from responses_gateway.loop.output import OutputWriter
from responses_gateway.loop.state import LoopState
from responses_gateway.testing import (
    ScriptedUpstream,
    Turn,
    create_fake_upstream_app,
    run_in_thread,
)

SHORT_TEXT = "Hello! How can I help you today?"
LONG_WORDS = 200
_WORDS = ("the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog")
LONG_TEXT = " ".join(_WORDS[i % len(_WORDS)] for i in range(LONG_WORDS))
"""Words that are one token each, so both wires stream :data:`LONG_WORDS` content chunks (the
fake chat upstream sends a word per chunk, the harmony one a token per chunk)."""
DAY = date(2025, 8, 5)
DEFAULT_ITERATIONS = 400
WIRES = ("chat", "harmony")
TOOLS = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "Weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
            "required": ["city"],
        },
    },
    {"type": "function", "name": "calc__add", "parameters": {"type": "object"}},
]


def _history(tag: int = 0) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for n in range(20):
        question = f"Question {n} about Oslo (#{tag})?"
        items.append({"type": "message", "role": "user", "content": question})
        items.append(
            {"type": "message", "role": "assistant", "content": f"Answer {n}: it is cold there."}
        )
    items += [
        {"type": "message", "role": "user", "content": "And the weather now?"},
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": '{"temp": -5}'},
    ]
    return items


HI = [{"type": "message", "role": "user", "content": "Hi"}]
SCENARIOS: dict[str, tuple[Callable[[int], ModelCall], str]] = {
    "short": (lambda i: ModelCall(model="gpt-oss", input=HI), SHORT_TEXT),
    "long": (lambda i: ModelCall(model="gpt-oss", input=HI), LONG_TEXT),
    "history": (lambda i: ModelCall(model="gpt-oss", input=_history(), tools=TOOLS), SHORT_TEXT),
    "history-cold": (
        lambda i: ModelCall(model="gpt-oss", input=_history(i + 1), tools=TOOLS),
        SHORT_TEXT,
    ),
}
"""Per scenario: the model call of iteration ``i``, and the answer."""


def _payload(wire: str, call: ModelCall) -> dict[str, Any]:
    return to_chat_request(call) if wire == "chat" else to_harmony_request(call, DAY)


def record_bodies() -> dict[tuple[str, str], bytes]:
    """Each wire's upstream answer to each scenario, from the scripted fake upstream."""
    upstream = ScriptedUpstream(demo=False)
    bodies: dict[tuple[str, str], bytes] = {}
    with (
        run_in_thread(create_fake_upstream_app(upstream)) as server,
        httpx.Client(base_url=f"{server.url}/v1", timeout=30) as client,
    ):
        for name, (call, text) in SCENARIOS.items():
            for wire in WIRES:
                upstream.push(Turn(text=text))
                path = "/chat/completions" if wire == "chat" else "/completions"
                answer = client.post(path, json=_payload(wire, call(0)))
                answer.raise_for_status()
                bodies[(wire, name)] = answer.content
    return bodies


def _adapter(wire: str, body: bytes, client: httpx.AsyncClient) -> Adapter:
    if wire == "chat":
        return ChatCompletionsAdapter(client, "http://upstream/v1")
    return HarmonyAdapter(client, "http://upstream/v1", today=lambda: DAY)


async def _one(adapter: Adapter, call: ModelCall) -> tuple[int, list[dict[str, Any]]]:
    state = LoopState(response_id="resp_b", created_at=0, model="m", request={}, upstream_input=[])
    out = OutputWriter(state, NullSink())
    start = time.perf_counter_ns()
    await adapter.call_llm(call, out)
    elapsed = time.perf_counter_ns() - start
    return elapsed, state.output


def _client(body: bytes) -> httpx.AsyncClient:
    headers = {"content-type": "text/event-stream"}

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers=headers, content=body)

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


async def measure(
    bodies: dict[tuple[str, str], bytes], iterations: int, warmup: int
) -> dict[str, dict[str, list[float]]]:
    """Microseconds per ``call_llm``, per scenario and wire, wires alternating."""
    samples: dict[str, dict[str, list[float]]] = {n: {w: [] for w in WIRES} for n in SCENARIOS}
    for name, (make, text) in SCENARIOS.items():
        clients = {w: _client(bodies[(w, name)]) for w in WIRES}
        adapters = {w: _adapter(w, bodies[(w, name)], clients[w]) for w in WIRES}
        for wire in WIRES:  # both wires must produce the same single message
            _, output = await _one(adapters[wire], make(0))
            assert [i["content"][0]["text"] for i in output] == [text], (wire, output)
        for n in range(warmup):
            for wire in WIRES:
                await _one(adapters[wire], make(iterations + n))
        calls = [make(i) for i in range(iterations)]
        gc.collect()
        gc.disable()
        try:
            for i in range(iterations):
                order = WIRES if i % 2 == 0 else WIRES[::-1]
                for wire in order:
                    elapsed, _ = await _one(adapters[wire], calls[i])
                    samples[name][wire].append(elapsed / 1000)
                if i % 50 == 49:
                    gc.collect()
        finally:
            gc.enable()
        for client in clients.values():
            await client.aclose()
    return samples


def _streamed_tokens(bodies: dict[tuple[str, str], bytes], wire: str, name: str) -> int:
    """How many data events carry content in a recorded body (chunks the adapter parses)."""
    return sum(
        1
        for line in bodies[(wire, name)].decode().splitlines()
        if line.startswith("data: {") and ('"text":"' in line or '"content":"' in line)
    )


def summarize(
    samples: dict[str, dict[str, list[float]]], bodies: dict[tuple[str, str], bytes]
) -> dict[str, Any]:
    medians = {n: {w: statistics.median(v) for w, v in s.items()} for n, s in samples.items()}
    result: dict[str, Any] = {"median_us": medians, "per_request": {}, "per_token": {}}
    for name, wires in medians.items():
        result["per_request"][name] = {
            "harmony_minus_chat_us": wires["harmony"] - wires["chat"],
            "harmony_over_chat": wires["harmony"] / wires["chat"],
        }
    per_token = {}
    for wire in WIRES:
        extra = _streamed_tokens(bodies, wire, "long") - _streamed_tokens(bodies, wire, "short")
        per_token[wire] = (medians["long"][wire] - medians["short"][wire]) / extra
        result["per_token"][f"{wire}_chunks_long_minus_short"] = extra
    result["per_token"]["chat_us"] = per_token["chat"]
    result["per_token"]["harmony_us"] = per_token["harmony"]
    result["per_token"]["harmony_minus_chat_us"] = per_token["harmony"] - per_token["chat"]
    result["per_token"]["harmony_over_chat"] = per_token["harmony"] / per_token["chat"]
    return result


def report(result: dict[str, Any], load_ms: float, iterations: int) -> str:
    lines = [
        f"harmony vs chat adapter, {iterations} iterations per wire and scenario "
        f"(Python {platform.python_version()}, {platform.machine()})",
        f"  first load of the harmony encoding (once per process): {load_ms:.1f} ms",
        "",
        f"  {'median per call_llm':<22}{'chat':>12}{'harmony':>12}{'h - c':>12}{'h / c':>9}",
    ]
    for name, wires in result["median_us"].items():
        per = result["per_request"][name]
        lines.append(
            f"  {name:<22}{wires['chat']:>9.1f} µs{wires['harmony']:>9.1f} µs"
            f"{per['harmony_minus_chat_us']:>9.1f} µs{per['harmony_over_chat']:>8.2f}x"
        )
    tok = result["per_token"]
    lines += [
        "",
        f"  per streamed token     {tok['chat_us']:>9.2f} µs{tok['harmony_us']:>9.2f} µs"
        f"{tok['harmony_minus_chat_us']:>9.2f} µs{tok['harmony_over_chat']:>8.2f}x",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS)
    parser.add_argument("--json", type=Path, help="also write every number as JSON")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    harmony_encoding()
    load_ms = (time.perf_counter() - start) * 1000
    bodies = record_bodies()
    warmup = max(20, args.iterations // 10)
    samples = asyncio.run(measure(bodies, args.iterations, warmup))
    result = summarize(samples, bodies)
    print(report(result, load_ms, args.iterations))
    if args.json:
        args.json.write_text(json.dumps({"encoding_load_ms": load_ms, **result}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
