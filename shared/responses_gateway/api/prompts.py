"""Routes of ``/v1/organization/prompts``: the operator's prompt templates kept in the store.

Owns ``POST /v1/organization/prompts/{prompt_id}/versions`` (add a version, by default the
next number, made the default unless ``"default": false``: ``{"version"?,
"instructions"?, "input"?, "default"?}``; versions are never changed once written) and
``GET /v1/organization/prompts/{prompt_id}`` (a prompt and its versions, from the configuration
or the store). Only operator keys may call them (as the usage API: 403 otherwise). A prompt id
the configuration defines cannot be given store versions: the configuration wins, so they would
never be used. Requests name these prompts in ``prompt`` exactly as configured ones
(:meth:`Gateway.prompt_templates` reads the configuration, then the store).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.requests import Request

from responses_gateway.api.deps import gateway_of
from responses_gateway.api.routes import Door, RouteTable
from responses_gateway.api.usage import require_operator
from responses_gateway.errors import InvalidRequestError, NotFoundError
from responses_gateway.prompts import (
    PromptConfigError,
    next_version,
    parse_version,
    stored_template,
)
from responses_gateway.store.base import PromptVersionExists

__all__ = ["router", "routes"]

routes = RouteTable("/v1/organization/prompts")
__getattr__ = routes.module_getattr(__name__)

if TYPE_CHECKING:
    from fastapi import APIRouter

    from responses_gateway.protocol.bodies import PromptVersionRequest

    router: APIRouter
    """These routes as one FastAPI router (built on first access)."""

_VERSION = "responses_gateway.protocol.bodies:PromptVersionRequest"


def _prompt_object(
    prompt_id: str, source: str, default: str, versions: dict[str, Any]
) -> dict[str, Any]:
    return {
        "id": prompt_id,
        "object": "prompt",
        "source": source,
        "default_version": default,
        "versions": versions,
    }


@routes.post("/{prompt_id}/versions", body=Door(_VERSION, guard=require_operator))
async def create_prompt_version(
    request: Request, body: PromptVersionRequest, prompt_id: str
) -> dict[str, Any]:
    gateway = gateway_of(request)
    if prompt_id in gateway.config.prompts:
        raise InvalidRequestError(
            f"Prompt '{prompt_id}' is defined in the gateway configuration, which wins over "
            "the store: change it there.",
            param="prompt_id",
            code="invalid_value",
        )
    stored = await gateway.store.get_prompt(prompt_id)
    version = body.version or next_version(stored.versions if stored else ())
    template: dict[str, Any] = {}
    if body.instructions is not None:
        template["instructions"] = body.instructions
    if body.input:  # the messages as the operator wrote them
        template["input"] = [
            item.model_dump(mode="json", by_alias=True, exclude_unset=True) for item in body.input
        ]
    try:
        parse_version(prompt_id, version, template)
    except PromptConfigError as exc:
        raise InvalidRequestError(f"Invalid prompt version: {exc}.", code="invalid_value") from exc
    make_default = body.default is not False  # the newest version, unless told not
    try:
        await gateway.store.put_prompt_version(
            prompt_id, version, template, make_default=make_default
        )
    except PromptVersionExists:
        raise InvalidRequestError(
            f"Prompt '{prompt_id}' already has a version '{version}' (versions never change: "
            "add a new one).",
            param="version",
            code="invalid_value",
        ) from None
    return {"id": prompt_id, "object": "prompt.version", "version": version, **template,
            "default": make_default}  # fmt: skip


@routes.get("/{prompt_id}")
async def retrieve_prompt(request: Request, prompt_id: str) -> dict[str, Any]:
    require_operator(request)
    gateway = gateway_of(request)
    configured = gateway.config.prompts.get(prompt_id)
    if configured is not None:
        versions = {
            name: {"instructions": v.instructions, "input": list(v.input)}
            for name, v in configured.versions.items()
        }
        return _prompt_object(prompt_id, "configuration", configured.default_version, versions)
    stored = await gateway.store.get_prompt(prompt_id)
    if stored is None:
        raise NotFoundError(f"Prompt with id '{prompt_id}' not found.", param="prompt_id")
    template = stored_template(prompt_id, stored.versions, stored.default_version)
    return _prompt_object(prompt_id, "store", template.default_version, stored.versions)
