#!/bin/sh
# Entry point of the streaming function (Handler: run.sh).
#
# The Lambda Web Adapter layer (AWS_LAMBDA_EXEC_WRAPPER=/opt/bootstrap) execs this script, waits
# until GET $AWS_LWA_READINESS_CHECK_PATH answers, then turns each invocation into an HTTP request
# to the port below and streams the answer back (AWS_LWA_INVOKE_MODE=response_stream).
# The app itself is streaming_app:app; everything else lives in the responses_gateway layer.
set -eu
root="${LAMBDA_TASK_ROOT:-$(cd "$(dirname "$0")" && pwd)}"
cd "$root"
export PYTHONPATH="$root:/opt/python${PYTHONPATH:+:$PYTHONPATH}"
# Log lines and EMF metrics leave at once, before Lambda freezes the environment.
export PYTHONUNBUFFERED=1
# Loopback only: the adapter is the one client. The keep-alive outlives the adapter's 4 s pool
# idle timeout, so the adapter never reuses a connection uvicorn is closing.
exec python -m uvicorn streaming_app:app \
    --host 127.0.0.1 \
    --port "${AWS_LWA_PORT:-${PORT:-8080}}" \
    --log-level warning \
    --no-access-log \
    --no-server-header \
    --timeout-keep-alive 75
