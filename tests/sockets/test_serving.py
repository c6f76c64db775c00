"""LazyWebSocketProtocol: uvicorn's WebSocket implementation is imported on the first upgrade."""

from __future__ import annotations

import subprocess
import sys


def test_importing_the_served_app_does_not_import_websockets() -> None:
    code = (
        "import sys, uvicorn\n"
        "from responses_gateway.sockets.serving import LazyWebSocketProtocol\n"
        "from responses_gateway.app import create_app\n"
        "config = uvicorn.Config('responses_gateway.app:create_app', ws=LazyWebSocketProtocol)\n"
        "print(any(m == 'websockets' or m.startswith('websockets.') for m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
