"""The streaming function's process: initialize the app, then serve invocations one at a time.

Owns the runtime's life: the app named on the command line (``module:attribute``, imported from
the function's code directory) is built during Lambda's init phase; an error there is reported
to ``/runtime/init/error`` (Lambda then answers 502 and retries the init on the next request)
and the process exits. Then, for ever: ``/next``, serve (:func:`~.invocation.serve_invocation`),
repeat. Work the app left running after an answer (a log line, a cancelled loop's cleanup) goes
on while the process waits for the next invocation, as it did under a web server.

Must not know what the app does or how an invocation is answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import sys
from typing import Any, cast

from responses_gateway.lambda_runtime.api import RuntimeApi
from responses_gateway.lambda_runtime.invocation import ASGIApp, serve_invocation

__all__ = ["RUNTIME_API_ENV", "load_app", "main", "serve_forever"]

RUNTIME_API_ENV = "AWS_LAMBDA_RUNTIME_API"

logger = logging.getLogger(__name__)


def load_app(target: str) -> ASGIApp:
    """The ASGI app ``module:attribute`` (or, as a Lambda handler is named,
    ``module.attribute``) names.

    Raises:
        ValueError: ``target`` names no attribute, or nothing callable.
    """
    module_name, _, attribute = target.partition(":") if ":" in target else target.rpartition(".")
    if not module_name or not attribute:
        raise ValueError(f"expected module:attribute, got {target!r}")
    app: Any = getattr(importlib.import_module(module_name), attribute)
    if not callable(app):
        raise ValueError(f"{target} is not an ASGI app")
    return cast("ASGIApp", app)


async def serve_forever(app: ASGIApp, api: RuntimeApi, *, limit: int | None = None) -> None:
    """Serve invocations until the Runtime API goes away (or ``limit`` of them, in tests)."""
    served = 0
    while limit is None or served < limit:
        invocation = await api.next()
        try:
            await serve_invocation(app, api, invocation)
        except ConnectionError:
            logger.exception("lost the Runtime API while answering %s", invocation.request_id)
        except Exception:  # a bug here must not end the environment: report this invocation
            logger.exception("the runtime failed on %s", invocation.request_id)
            with contextlib.suppress(Exception):
                await api.invocation_error(
                    invocation.request_id, "Runtime.Unknown", "the runtime failed"
                )
        served += 1


def main(argv: list[str] | None = None) -> int:
    """Run the runtime: ``python -m responses_gateway.lambda_runtime module.app``."""
    args = sys.argv[1:] if argv is None else argv
    address = os.environ.get(RUNTIME_API_ENV)
    if not address or len(args) != 1:
        print(
            f"usage: {RUNTIME_API_ENV}=host:port python -m responses_gateway.lambda_runtime "
            "module:app",
            file=sys.stderr,
        )
        return 2
    api = RuntimeApi(address)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    task_root = os.environ.get("LAMBDA_TASK_ROOT")
    if task_root and task_root not in sys.path:
        sys.path.insert(0, task_root)
    try:
        app = load_app(args[0])
    except Exception as exc:  # any init failure is reported, as the managed runtime does
        logger.exception("init failed")
        loop.run_until_complete(api.init_error(f"Runtime.{type(exc).__name__}", str(exc)))
        return 1
    try:
        loop.run_until_complete(serve_forever(app, api))
    except ConnectionError as exc:
        print(f"the Runtime API went away: {exc}", file=sys.stderr)
        return 1
    finally:
        loop.close()
    return 0
