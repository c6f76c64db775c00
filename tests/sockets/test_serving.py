"""LazyWebSocketProtocol: uvicorn's WebSocket implementation is imported on the first upgrade,
and an installation without it refuses upgrades clearly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from responses_gateway.sockets.serving import UNAVAILABLE_MESSAGE, UNAVAILABLE_STATUS


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


_REFUSED_PROBE = """
import json, socket, sys
import httpx
from responses_gateway.app import create_app
from responses_gateway.config import parse_config
from responses_gateway.store.sqlite import SqliteStore
from responses_gateway.testing.server import run_in_thread

config = parse_config({"providers": [{"base_url": "http://127.0.0.1:9/v1", "api": "chat"}]})
with run_in_thread(create_app(config, SqliteStore())) as gateway:
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as conn:
        conn.sendall(
            b"GET /v1/responses HTTP/1.1\\r\\nHost: x\\r\\nUpgrade: websocket\\r\\n"
            b"Connection: Upgrade\\r\\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\\r\\n"
            b"Sec-WebSocket-Version: 13\\r\\n\\r\\n"
        )
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\\r\\n\\r\\n")
    after = httpx.get(gateway.url + "/health").status_code
print(json.dumps({"status": head.split(b"\\r\\n")[0].decode(), "body": json.loads(body),
                  "health_after": after}))
"""


def test_an_upgrade_without_websockets_installed_is_refused_clearly(tmp_path: Path) -> None:
    # GIVEN an installation where `import websockets` fails
    hidden = tmp_path / "websockets"
    hidden.mkdir()
    (hidden / "__init__.py").write_text("raise ImportError('no websockets here')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}

    # WHEN a client asks for WebSocket mode
    done = subprocess.run(
        [sys.executable, "-c", _REFUSED_PROBE],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        timeout=60,
    )

    # THEN it gets a 501 with an envelope naming the extra, and the server keeps serving
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["status"] == f"HTTP/1.1 {UNAVAILABLE_STATUS} Not Implemented"
    assert seen["body"] == {
        "error": {
            "message": UNAVAILABLE_MESSAGE,
            "type": "server_error",
            "param": None,
            "code": "websocket_unavailable",
        }
    }
    assert "pip install 'responses-gateway[websocket]'" in UNAVAILABLE_MESSAGE
    assert seen["health_after"] == 200
    assert "Traceback" not in done.stderr
