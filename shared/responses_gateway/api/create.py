"""Serving ``POST /v1/responses``: a create's body validated, prepared and run, its answer sent.

Owns what :func:`responses_gateway.api.responses.create_response` does once it is called: the
request models, the loop, the adapters and the sinks are imported here, with this module, so a
function that serves no create (the buffered one) never imports them; the streaming function
imports it at init (:func:`responses_gateway.app.preload_create_path`). The route, its
response headers and the other ``/v1/responses`` routes stay in
:mod:`responses_gateway.api.responses`. Decides nothing the service and the loop decide.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from responses_gateway.api.deps import gateway_of, identity_of, timing_of
from responses_gateway.api.limits import limits_of
from responses_gateway.api.responses import DEPLOYMENT_HEADER, OMITTED_TOOLS_HEADER
from responses_gateway.api.streaming import run_buffered, run_streamed, stream_log
from responses_gateway.background.runs import start_background
from responses_gateway.loop.render import render_response
from responses_gateway.protocol.request import CreateResponseRequest
from responses_gateway.service import PreparedRun

__all__ = ["create", "signal_omitted"]


async def create(request: Request, parsed: CreateResponseRequest) -> Response:
    """Serve one create whose body its door validated (see
    :func:`~responses_gateway.api.responses.create_response`)."""
    gateway = gateway_of(request)
    identity = identity_of(request)
    run = await gateway.prepare(
        parsed, identity.tenant, api_key_id=identity.api_key_id, client_headers=request.headers
    )
    request.state.prepared = True  # from here on the loop's ending writes the record
    timing = timing_of(request)
    if run.background:
        queued = await start_background(gateway, run)
        if run.stream:
            return signal_omitted(
                stream_log(gateway, run.tenant, run.state.response_id, -1, timing), run
            )
        return signal_omitted(JSONResponse(queued), run)
    if run.stream:
        return signal_omitted(await run_streamed(run, gateway, timing, limits_of(request)), run)
    await gateway.record_started(run)  # visible to GET as in_progress while it runs
    outcome = await run_buffered(run, request, gateway, timing)
    if outcome is False:
        return Response(status_code=499)  # the client is gone; nobody reads this
    if isinstance(outcome, dict):  # handed over to the background worker
        return signal_omitted(JSONResponse(outcome), run)
    if run.ctx.failure is not None:
        if run.state.tool_calls_executed:  # side effects happened: a blind retry would repeat them
            run.ctx.failure.headers["x-should-retry"] = "false"
        raise run.ctx.failure
    return signal_omitted(JSONResponse(render_response(run.state)), run)


def signal_omitted(response: Response, run: PreparedRun) -> Response:
    """``response`` with the headers naming what the run's upstream did not see and which
    deployments answered it."""
    if run.ctx.deployments:
        response.headers[DEPLOYMENT_HEADER] = ",".join(run.ctx.deployments)
    if run.omitted_tools:
        response.headers[OMITTED_TOOLS_HEADER] = ",".join(run.omitted_tools)
    return response
