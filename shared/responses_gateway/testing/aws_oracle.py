"""AWS's own code as the judge of what the gateway sends to Bedrock and what it reads back.

Owns three checks, each made by botocore (the reference implementation of the wire), never by
code of ours:

- :func:`converse_problems`: a ``Converse`` / ``ConverseStream`` HTTP request (path and JSON
  body) turned back into operation parameters along ``bedrock-runtime``'s service model, checked
  by botocore's ``ParamValidator``, then serialized again by botocore's ``rest-json`` serializer,
  whose path and body must equal what was sent;
- :func:`signature_problem`: the request's SigV4 ``Authorization`` recomputed by botocore's
  ``SigV4Auth`` from the same method, URL, signed headers, body and credentials;
- :func:`botocore_events`: an event stream decoded and parsed by botocore's ``EventStream``
  (frames, CRCs, then each event against the ``ConverseStreamOutput`` shape).

Testing only: botocore is imported here, never on the gateway's request path.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any
from urllib.parse import unquote

__all__ = ["botocore_events", "converse_problems", "operation_of", "signature_problem"]

_OPERATIONS = {"converse": "Converse", "converse-stream": "ConverseStream"}


@cache
def _service() -> Any:
    import botocore.session  # type: ignore[import-untyped]

    return botocore.session.get_session().get_service_model("bedrock-runtime")


def operation_of(raw_path: str) -> tuple[str, str] | None:
    """(operation name, model id) of a ``/model/{modelId}/converse[-stream]`` path, or None."""
    parts = raw_path.split("/")
    if len(parts) != 4 or parts[0] or parts[1] != "model" or parts[3] not in _OPERATIONS:
        return None
    return _OPERATIONS[parts[3]], unquote(parts[2])


def _params(value: Any, shape: Any, where: str, problems: list[str]) -> Any:
    """JSON as botocore's parameters: blobs decoded from base64, the rest as it is."""
    kind = shape.type_name
    if kind == "structure" and isinstance(value, dict):
        members = shape.members
        return {
            k: _params(v, members[k], f"{where}.{k}", problems) if k in members else v
            for k, v in value.items()
        }
    if kind == "list" and isinstance(value, list):
        return [_params(v, shape.member, f"{where}[{i}]", problems) for i, v in enumerate(value)]
    if kind == "map" and isinstance(value, dict):
        return {k: _params(v, shape.value, f"{where}.{k}", problems) for k, v in value.items()}
    if kind == "blob" and isinstance(value, str):
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            problems.append(f"{where}: not base64")
    return value


def converse_problems(raw_path: str, body: bytes) -> list[str]:
    """What botocore finds wrong with a Converse request (empty: nothing)."""
    from botocore.serialize import create_serializer  # type: ignore[import-untyped]
    from botocore.validate import ParamValidator  # type: ignore[import-untyped]

    found = operation_of(raw_path)
    if found is None:
        return [f"not a Converse path: {raw_path}"]
    operation, model_id = found
    model = _service().operation_model(operation)
    try:
        sent = json.loads(body)
    except ValueError:
        return ["the body is not JSON"]
    if not isinstance(sent, dict):
        return ["the body is not a JSON object"]
    problems: list[str] = []
    params = {"modelId": model_id, **_params(sent, model.input_shape, "body", problems)}
    report = ParamValidator().validate(params, model.input_shape)
    if report.has_errors():
        problems.append(report.generate_report())
        return problems
    again = create_serializer("rest-json", include_validation=False).serialize_to_request(
        params, model
    )
    if again["url_path"] != raw_path:
        problems.append(f"botocore sends the path {again['url_path']}, not {raw_path}")
    if json.loads(again["body"] or b"{}") != sent:
        problems.append("botocore serializes these parameters to another body")
    return problems


def signature_problem(
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes,
    credentials: Mapping[str, tuple[str, str | None]],
) -> str | None:
    """Why botocore's signer disagrees with the request's ``Authorization`` (None: it agrees).

    ``credentials`` maps access key ids to (secret, session token) that may have signed it.
    """
    from botocore.auth import SigV4Auth  # type: ignore[import-untyped]
    from botocore.awsrequest import AWSRequest  # type: ignore[import-untyped]
    from botocore.credentials import Credentials  # type: ignore[import-untyped]

    lowered = {k.lower(): v for k, v in headers.items()}
    authorization = lowered.get("authorization", "")
    if not authorization.startswith("AWS4-HMAC-SHA256 "):
        return "no SigV4 Authorization header"
    fields = dict(
        part.strip().split("=", 1) for part in authorization[len("AWS4-HMAC-SHA256 ") :].split(",")
    )
    access_key, day, region, service, _ = fields["Credential"].split("/")
    if access_key not in credentials:
        return f"unknown access key {access_key}"
    secret, token = credentials[access_key]
    if token is not None and lowered.get("x-amz-security-token") != token:
        return "the session token is missing or wrong"
    signed = fields["SignedHeaders"].split(";")
    request = AWSRequest(
        method=method, url=url, data=body, headers={name: lowered[name] for name in signed}
    )
    request.context["timestamp"] = lowered.get("x-amz-date", "")
    if not request.context["timestamp"].startswith(day):
        return "X-Amz-Date is not the credential scope's day"
    signer = SigV4Auth(Credentials(access_key, secret, token), service, region)
    canonical = signer.canonical_request(request)
    expected = signer.signature(signer.string_to_sign(request, canonical), request)
    if signer.signed_headers(signer.headers_to_sign(request)) != fields["SignedHeaders"]:
        return "botocore would sign other headers"
    if expected != fields["Signature"]:
        return "the signature does not match botocore's"
    return None


class _Raw:
    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self) -> Iterator[bytes]:
        yield self._data


def botocore_events(data: bytes) -> list[dict[str, Any]]:
    """A ``ConverseStream`` body as botocore parses it: one ``{event name: payload}`` per frame.

    Raises:
        botocore.exceptions.EventStreamError: an exception frame (as botocore raises it).
        botocore.eventstream.ParserError: a frame breaks the framing.
    """
    from botocore.eventstream import EventStream  # type: ignore[import-untyped]
    from botocore.parsers import EventStreamJSONParser  # type: ignore[import-untyped]

    shape = _service().operation_model("ConverseStream").output_shape.members["stream"]
    stream = EventStream(_Raw(data), shape, EventStreamJSONParser(), "ConverseStream")
    return list(stream)
