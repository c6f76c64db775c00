"""The console's routes (api.console): its first requests stay off FastAPI's ``pydantic.v1``
path (a typed path parameter would build a pydantic field and import it: about 17 ms of CPU on
the first console request of an execution environment)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

_PROBE = textwrap.dedent(
    """
    import json, sys
    import httpx
    from responses_gateway.app import create_app
    from responses_gateway.config import parse_config
    from responses_gateway.store.sqlite import SqliteStore
    from responses_gateway.testing.server import run_in_thread

    config = parse_config({"providers": [{"base_url": "http://127.0.0.1:9/v1"}]}, env={})
    answers = {}
    with run_in_thread(create_app(config, SqliteStore())) as gateway:
        with httpx.Client(base_url=gateway.url) as client:
            for path in ("/console/", "/console/console.js", "/console/nope.txt",
                         "/v1/console/me", "/v1/console/requests"):
                answers[path] = client.get(path).status_code
    print(json.dumps({"answers": answers, "v1": "pydantic.v1" in sys.modules}))
    """
)


def test_the_first_console_requests_import_no_pydantic_v1() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True, timeout=120
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["answers"] == {
        "/console/": 200,
        "/console/console.js": 200,
        "/console/nope.txt": 404,
        "/v1/console/me": 200,
        "/v1/console/requests": 200,
    }
    assert report["v1"] is False
