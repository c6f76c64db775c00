"""Both specs as one oracle: OpenAI's OpenAPI document and the Open Responses one.

Owns :class:`SpecOracle`, which holds every Response object, stream event, WebSocket-mode event,
output item and compaction object the gateway emits to the JSON Schemas of both documents
(``tests/fixtures/openapi/gateway.json``, OpenAI's spec trimmed to what the gateway serves, and
``tests/fixtures/openresponses/openapi.json``, the Open Responses spec as published; both vendored
with their licences), and :class:`SpecViolation`, the error naming the spec, the schema and the
first failing path. It counts what it checked (:attr:`SpecOracle.counts`).

The two documents disagree in three places, each settled by a named table rather than by loosening
a check:

* ``protocol.contract.GATEWAY_INCOMPLETE_REASONS``: ``incomplete_details.reason`` values the gateway
  itself produces, each named with why. OpenAI's spec enumerates ``max_output_tokens |
  content_filter``; Open Responses takes any string. A reason in the table is held to OpenAI's
  schema as ``max_output_tokens`` (the shape is the same); any other reason outside OpenAI's enum
  fails. ``protocol.contract.GATEWAY_FAILURE_CODES`` does the same for a failed response's
  ``error.code`` (OpenAI's spec enumerates its codes; the gateway's ``context_length_exceeded``
  is named there).
* OpenAI's item, tool, tool choice and event types that Open Responses does not define
  (``mcp_call``, ``shell_call``, ``web_search``, ``response.mcp_call.completed``...): Open
  Responses asks a provider to prefix its own types (``openai:web_search_call``); the gateway
  speaks OpenAI's API, whose clients expect them unprefixed. They are held to OpenAI's schema
  only (:meth:`SpecOracle.extension_types` lists them, derived from the two documents, never
  typed by hand); a type neither document defines fails both.
* OpenAI's ``error`` stream event is flat (``code``, ``message``, ``param``) and Open Responses'
  nests an ``error`` object: the gateway sends both, and each spec checks its own.

Two more tables name where a document itself is behind or broken, never where the gateway is:

* event types the pinned ``openai`` SDK declares and OpenAI's vendored document predates
  (``response.compaction.compacting``): held to the SDK's own event model, no unknown field
  allowed (:meth:`SpecOracle.sdk_only_events`, derived);
* :data:`OPEN_RESPONSES_ERRATA`: schema paths of the Open Responses document that no value can
  satisfy as published; the oracle holds those values to OpenAI's schema instead.

It imports nothing from the code that produces responses (only the contract's declared table of
incomplete reasons) and never repairs what it is given (the views it validates against are
copies). ``jsonschema`` is a dev dependency: this module is for
tests.
"""

from __future__ import annotations

import copy
import functools
import json
import os
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from responses_gateway.protocol.contract import GATEWAY_FAILURE_CODES, GATEWAY_INCOMPLETE_REASONS

__all__ = [
    "OPEN_RESPONSES_ERRATA",
    "SPEC_DIR",
    "SpecOracle",
    "SpecViolation",
    "errata_view",
    "spec_oracle",
]

SPEC_DIR = Path(
    os.environ.get("GATEWAY_SPEC_DIR") or Path(__file__).resolve().parents[3] / "tests" / "fixtures"
)
"""Where the vendored documents live (``openapi/gateway.json``, ``openresponses/openapi.json``);
``GATEWAY_SPEC_DIR`` overrides it (an installed package has no ``tests/``)."""

_OPENAI_REASON_STAND_IN = "max_output_tokens"
_OPENAI_CODE_STAND_IN = "server_error"

OPEN_RESPONSES_ERRATA: dict[str, str] = {
    "ReasoningEffortEnum.minimal": (
        "the enum leaves out minimal though its own descriptions define it (and OpenAI's spec "
        "and SDK take it): a response echoing reasoning.effort minimal is held to OpenAI's enum"
    ),
    "JsonSchemaResponseFormat.schema": (
        "published as anyOf [null] only (the object type was lost): a response echoing a "
        "json_schema text format with its schema could never validate; text.format.schema is "
        "held to OpenAI's schema (an object) and shown to Open Responses' as null"
    ),
}
"""Open Responses schema paths the oracle does not hold values to, and why (the document as
published; to be dropped when the document is fixed)."""

OPENAI = "OpenAI"
OPEN_RESPONSES = "Open Responses"


class SpecViolation(AssertionError):
    """An object breaks a spec; the message names the spec, the schema and the failing path."""


def _schema_ref(name: str) -> str:
    return f"#/components/schemas/{name}"


def _ref_name(node: Mapping[str, Any]) -> str:
    return str(node["$ref"]).rsplit("/", 1)[-1]


@dataclass
class _Document:
    """One OpenAPI document and the validators built from it (one per schema name, cached)."""

    name: str
    document: dict[str, Any]
    uri: str
    _validators: dict[str, Any] = field(default_factory=dict)
    _registry: Any = None

    @property
    def schemas(self) -> dict[str, Any]:
        schemas: dict[str, Any] = self.document["components"]["schemas"]
        return schemas

    def validator(self, schema_name: str) -> Any:
        found = self._validators.get(schema_name)
        if found is None:
            from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
            from referencing import Registry
            from referencing.jsonschema import DRAFT202012

            if self._registry is None:
                resource = DRAFT202012.create_resource(self.document)
                self._registry = Registry().with_resource(self.uri, resource)
            if schema_name not in self.schemas:
                raise KeyError(f"{self.name} has no schema {schema_name!r}")
            schema = {"$ref": self.uri + _schema_ref(schema_name)}
            found = Draft202012Validator(schema, registry=self._registry)
            self._validators[schema_name] = found
        return found

    def properties(self, schema_name: str) -> set[str]:
        """The property names of a schema, its ``allOf`` parts included."""
        names: set[str] = set()
        pending = [self.schemas[schema_name]]
        while pending:
            schema = pending.pop()
            names |= set(schema.get("properties") or {})
            for part in schema.get("allOf") or ():
                pending.append(self.schemas[_ref_name(part)] if "$ref" in part else part)
        return names

    def members(self, union: Mapping[str, Any]) -> dict[str, str]:
        """``type`` value -> schema name, for the ``$ref`` members of a union schema."""
        found: dict[str, str] = {}
        for member in union.get("oneOf") or union.get("anyOf") or ():
            if "$ref" not in member:
                continue
            name = _ref_name(member)
            for value in self._type_values(self.schemas[name]):
                found.setdefault(value, name)
        return found

    def required_sample(self, schema_name: str) -> dict[str, Any]:
        """The smallest value of each property a schema requires (its ``allOf`` parts
        included); a required name the schema does not declare gets a string."""
        sample: dict[str, Any] = {}
        pending = [self.schemas[schema_name]]
        while pending:
            schema = pending.pop()
            declared = schema.get("properties") or {}
            for name in schema.get("required") or ():
                sample.setdefault(name, self._sample(declared.get(name, {"type": "string"})))
            for part in schema.get("allOf") or ():
                pending.append(self.schemas[_ref_name(part)] if "$ref" in part else part)
        return sample

    def _sample(self, schema: Mapping[str, Any], depth: int = 0) -> Any:
        if "$ref" in schema:
            return self._sample(self.schemas[_ref_name(schema)], depth + 1)
        if "enum" in schema:
            return schema["enum"][0]
        if "const" in schema:
            return schema["const"]
        options = schema.get("anyOf") or schema.get("oneOf")
        if options:
            kept = [o for o in options if o.get("type") != "null"] or options
            return self._sample(kept[0], depth + 1)
        kind = schema.get("type")
        kind = next((k for k in kind if k != "null"), "null") if isinstance(kind, list) else kind
        if kind == "object" and depth < 8:
            declared = schema.get("properties") or {}
            return {
                n: self._sample(declared.get(n, {}), depth + 1)
                for n in schema.get("required") or ()
            }
        simple = {"string": "x", "integer": 0, "number": 0, "boolean": False, "array": []}
        return simple.get(str(kind))

    def _type_values(self, schema: Mapping[str, Any]) -> list[str]:
        kind = (schema.get("properties") or {}).get("type") or {}
        values = list(kind.get("enum") or ())
        if "const" in kind:
            values.append(kind["const"])
        for part in schema.get("allOf") or ():
            values += self._type_values(self.schemas[_ref_name(part)] if "$ref" in part else part)
        return [str(v) for v in values]

    def check(self, schema_name: str, instance: Any, what: str) -> None:
        from jsonschema.exceptions import relevance  # type: ignore[import-untyped]

        validator = self.validator(schema_name)
        errors = sorted(validator.iter_errors(instance), key=relevance, reverse=True)
        if not errors:
            return
        lines: list[str] = []
        for error in errors:  # the most relevant error of each path, at most three paths
            path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
            path = path.lstrip(".") or "<root>"
            if any(line.startswith(f"'{path}'") for line in lines) or len(lines) == 3:
                continue
            shown = json.dumps(error.instance, ensure_ascii=False, default=str)
            shown = shown if len(shown) <= 200 else shown[:200] + "..."
            lines.append(f"'{path}': {error.message[:300]} (value: {shown})")
        raise SpecViolation(f"{what} breaks {self.name}'s {schema_name}: " + "; ".join(lines))


class SpecOracle:
    """Checks what the gateway emits against both documents.

    Args:
        openai: OpenAI's OpenAPI document (trimmed or whole).
        open_responses: the Open Responses OpenAPI document.
    """

    def __init__(self, openai: dict[str, Any], open_responses: dict[str, Any]) -> None:
        self.openai = _Document(OPENAI, openai, "urn:spec:openai")
        self.open_responses = _Document(OPEN_RESPONSES, open_responses, "urn:spec:openresponses")
        self.counts: Counter[str] = Counter()
        """What was checked against both documents, by kind (``response``, ``sse_event``...)."""
        oa, orr = self.openai, self.open_responses
        self._openai_events = oa.members(oa.schemas["ResponseStreamEvent"])
        self._openai_items = oa.members(oa.schemas["OutputItem"])
        self._openai_tools = oa.members(oa.schemas["Tool"])
        stream = open_responses["paths"]["/responses"]["post"]["responses"]["200"]["content"]
        self._or_events = orr.members(stream["text/event-stream"]["schema"])
        self._or_items = orr.members(orr.schemas["ItemField"])
        self._or_tools = orr.members(orr.schemas["Tool"])
        self._or_choices = orr.members(orr.schemas["ResponseResource"]["properties"]["tool_choice"])
        self._sdk_models: dict[str, Any] | None = None

    def required_of_item(self, item_type: str) -> dict[str, Any]:
        """The smallest values of the fields either document requires of an output item of
        ``item_type`` (OpenAI's values win where both require one)."""
        sample: dict[str, Any] = {}
        for document, items in (
            (self.open_responses, self._or_items),
            (self.openai, self._openai_items),
        ):
            if item_type in items:
                sample.update(document.required_sample(items[item_type]))
        return sample

    @classmethod
    def load(cls, directory: Path | None = None) -> SpecOracle:
        """The oracle over the vendored documents in ``directory`` (default :data:`SPEC_DIR`)."""
        where = directory or SPEC_DIR
        openai = json.loads((where / "openapi" / "gateway.json").read_text())
        open_responses = json.loads((where / "openresponses" / "openapi.json").read_text())
        return cls(openai, open_responses)

    # ------------------------------------------------------------------ the tables

    def extension_types(self) -> dict[str, frozenset[str]]:
        """The types OpenAI's spec defines and Open Responses does not, per family: held to
        OpenAI's schema only (see the module docstring)."""
        return {
            "items": frozenset(self._openai_items.keys() - self._or_items.keys()),
            "tools": frozenset(self._openai_tools.keys() - self._or_tools.keys()),
            "events": frozenset(self._openai_events.keys() - self._or_events.keys()),
        }

    def sdk_only_events(self) -> dict[str, Any]:
        """Event type -> the pinned SDK's model, for the events the SDK declares and OpenAI's
        vendored document does not (it is older than the SDK)."""
        if self._sdk_models is None:
            from typing import get_args

            from openai.types.responses import ResponseStreamEvent

            models: dict[str, Any] = {}
            for model in get_args(get_args(ResponseStreamEvent)[0]):
                (kind,) = get_args(model.model_fields["type"].annotation)
                if kind not in self._openai_events:
                    models[kind] = model
            self._sdk_models = models
        return self._sdk_models

    def create_fields(self) -> dict[str, frozenset[str]]:
        """The create-request fields each document declares (OpenAI's ``CreateResponse``, Open
        Responses' ``CreateResponseBody``): the contract's create-field rows must cover both."""
        return {
            OPENAI: frozenset(self.openai.properties("CreateResponse")),
            OPEN_RESPONSES: frozenset(self.open_responses.properties("CreateResponseBody")),
        }

    # ------------------------------------------------------------------ checks

    def check_response(self, response: Any, what: str = "response") -> None:
        """A Response object (JSON body, snapshot in an event, stored or retrieved)."""
        self._require_object(response, what)
        for index, item in enumerate(response.get("output") or ()):  # first: precise messages
            self.check_output_item(item, f"{what}.output[{index}]", count=False)
        self.openai.check("Response", self._openai_view(response), what)
        self.open_responses.check("ResponseResource", self._open_responses_view(response), what)
        self.counts["response"] += 1

    def check_output_item(self, item: Any, what: str = "output item", count: bool = True) -> None:
        """One output item, against its type's schema in each document that defines it."""
        self._require_object(item, what)
        kind = str(item.get("type"))
        openai_schema = self._openai_items.get(kind)
        or_schema = self._or_items.get(kind)
        if openai_schema is None and or_schema is None:
            raise SpecViolation(f"{what}: item type {kind!r} is defined by neither spec")
        if openai_schema is not None:
            self.openai.check(openai_schema, item, what)
        if or_schema is not None:
            self.open_responses.check(or_schema, item, what)
        if count:
            self.counts["output_item"] += 1

    def check_event(self, event: Any, what: str = "event") -> None:
        """One SSE stream event (``sequence_number`` and all)."""
        self._require_object(event, what)
        kind = str(event.get("type"))
        what = f"{what} ({kind})"
        openai_schema = self._openai_events.get(kind)
        sdk_model = self.sdk_only_events().get(kind) if openai_schema is None else None
        if openai_schema is None and sdk_model is None:
            raise SpecViolation(f"{what}: an event type neither OpenAI's spec nor its SDK define")
        response = event.get("response")
        if isinstance(response, Mapping):  # first: precise messages
            self.check_response(response, f"{what}.response")
        item = event.get("item")
        if kind.startswith("response.output_item.") and isinstance(item, Mapping):
            self.check_output_item(item, f"{what}.item", count=False)
        if openai_schema is not None:
            self.openai.check(openai_schema, self._openai_view(event), what)
        else:
            self._check_sdk_event(sdk_model, event, what)
        or_schema = self._or_events.get(kind)
        if or_schema is not None:
            self.open_responses.check(or_schema, self._open_responses_view(event), what)
        self.counts["sse_event"] += 1

    @staticmethod
    def _check_sdk_event(model: Any, event: Mapping[str, Any], what: str) -> None:
        import pydantic

        try:
            model.model_validate(event)
        except pydantic.ValidationError as error:
            raise SpecViolation(f"{what} breaks the SDK's {model.__name__}: {error}") from None
        unknown = sorted(set(event) - set(model.model_fields) - {"obfuscation"})
        if unknown:
            raise SpecViolation(f"{what}: fields the SDK's {model.__name__} lacks: {unknown}")

    def check_socket_event(self, event: Any, what: str = "WebSocket event") -> None:
        """One WebSocket-mode server message: a stream event (with ``stream_id`` when the create
        named one), or the socket's ``error`` event (``status`` and a nested ``error``)."""
        self._require_object(event, what)
        if "stream_id" in event and not isinstance(event["stream_id"], str):
            raise SpecViolation(f"{what}: stream_id must be a string")
        if event.get("type") == "error" and "status" in event:
            self.openai.check("ResponseWsError", event, what)
            self.open_responses.check("WebSocketErrorEvent", event, what)
        else:
            self.check_event({k: v for k, v in event.items() if k != "stream_id"}, what)
            self.counts["sse_event"] -= 1
        self.counts["socket_event"] += 1

    def check_compaction(self, compacted: Any, what: str = "compaction") -> None:
        """The object ``POST /v1/responses/compact`` answers (``response.compaction``): its
        output holds input items too (the user's messages), which each document's
        ``CompactResource`` types itself."""
        self._require_object(compacted, what)
        self.openai.check("CompactResource", compacted, what)
        view = dict(compacted)
        view["output"] = [i for i in compacted.get("output") or () if self._or_defines_item(i)]
        self.open_responses.check("CompactResource", view, what)
        self.counts["compaction"] += 1

    def check_all_events(self, events: Iterable[Any], what: str = "stream") -> None:
        for position, event in enumerate(events):
            self.check_event(event, f"{what}[{position}]")

    # ------------------------------------------------------------------ views

    @staticmethod
    def _require_object(value: Any, what: str) -> None:
        if not isinstance(value, Mapping):
            raise SpecViolation(f"{what} is not a JSON object: {value!r}"[:300])

    def _or_defines_item(self, item: Any) -> bool:
        kind = item.get("type") if isinstance(item, Mapping) else None
        if kind in self._or_items:
            return True
        if kind not in self._openai_items:
            raise SpecViolation(f"item type {kind!r} is defined by neither spec")
        return False

    def _openai_view(self, value: Mapping[str, Any]) -> Any:
        """``value`` as OpenAI's schema is asked about it: a gateway incomplete reason or
        failure code (the contract's named tables) shown as the enum's stand-in; nothing else
        changes."""
        response = value.get("response") if "response" in value else value
        if not isinstance(response, Mapping):
            return value
        swaps: dict[str, dict[str, Any]] = {}
        details = response.get("incomplete_details")
        if isinstance(details, Mapping) and details.get("reason") in GATEWAY_INCOMPLETE_REASONS:
            swaps["incomplete_details"] = {**details, "reason": _OPENAI_REASON_STAND_IN}
        error = response.get("error")
        if isinstance(error, Mapping) and error.get("code") in GATEWAY_FAILURE_CODES:
            swaps["error"] = {**error, "code": _OPENAI_CODE_STAND_IN}
        if not swaps:
            return value
        view = copy.deepcopy(dict(value))
        target = view["response"] if "response" in value else view
        target.update(swaps)
        return view

    def _open_responses_view(self, value: Mapping[str, Any]) -> Any:
        """``value`` without what Open Responses leaves to providers (OpenAI's own item, tool
        and tool-choice types, held to OpenAI's schema instead): a copy when anything was left
        out."""
        if "response" in value and isinstance(value["response"], Mapping):
            inner = self._response_view(value["response"])
            return value if inner is value["response"] else {**value, "response": inner}
        if "item" in value and isinstance(value["item"], Mapping):
            if self._or_defines_item(value["item"]):
                return value
            self.counts["extension_item"] += 1
            return {**value, "item": None}  # Open Responses' events allow a null item
        if "output" in value or "tools" in value:
            return self._response_view(value)
        return value

    def _response_view(self, response: Mapping[str, Any]) -> Mapping[str, Any]:
        view = errata_view(response)
        output = response.get("output")
        if isinstance(output, list):
            kept = [i for i in output if self._or_defines_item(i)]
            self.counts["extension_item"] += len(output) - len(kept)
            view["output"] = kept
        tools = response.get("tools")
        if isinstance(tools, list):
            kept_tools = []
            for tool in tools:
                kind = tool.get("type") if isinstance(tool, Mapping) else None
                if kind in self._or_tools:
                    kept_tools.append(tool)
                elif kind not in self._openai_tools:
                    raise SpecViolation(f"tool type {kind!r} is defined by neither spec")
            view["tools"] = kept_tools
        choice = response.get("tool_choice")
        if isinstance(choice, Mapping) and choice.get("type") not in self._or_choices:
            view["tool_choice"] = "auto"  # an OpenAI tool choice: held to OpenAI's schema
        elif isinstance(choice, Mapping) and isinstance(choice.get("tools"), list):
            named = [t for t in choice["tools"] if isinstance(t, Mapping)]
            view["tool_choice"] = {  # allowed_tools naming OpenAI's tool types: those left out
                **choice,
                "tools": [t for t in named if t.get("type") in self._or_tools],
            }
        return view


def errata_view(response: Mapping[str, Any]) -> dict[str, Any]:
    """``response`` as held to the Open Responses document at the paths of
    :data:`OPEN_RESPONSES_ERRATA`: ``reasoning.effort`` minimal as low, a ``json_schema`` text
    format's ``schema`` as null (a new dict; ``response`` is not changed)."""
    view = dict(response)
    reasoning = response.get("reasoning")
    if isinstance(reasoning, Mapping) and reasoning.get("effort") == "minimal":
        # OPEN_RESPONSES_ERRATA["ReasoningEffortEnum.minimal"]
        view["reasoning"] = {**reasoning, "effort": "low"}
    text = response.get("text")
    fmt = text.get("format") if isinstance(text, Mapping) else None
    if (
        isinstance(text, Mapping)
        and isinstance(fmt, Mapping)
        and isinstance(fmt.get("schema"), Mapping)
    ):
        # OPEN_RESPONSES_ERRATA["JsonSchemaResponseFormat.schema"]
        view["text"] = {**text, "format": {**fmt, "schema": None}}
    return view


@functools.cache
def spec_oracle() -> SpecOracle:
    """The process's oracle over the vendored documents (loaded once)."""
    return SpecOracle.load()
