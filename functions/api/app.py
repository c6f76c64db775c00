"""Lambda entry point of the API function: the app, built from the environment.

Thin by design: all logic lives in the ``responses_gateway`` library (``shared/``). The deployment
issue wires this module behind the Lambda Web Adapter (streaming) and Mangum (buffered routes).
"""

from responses_gateway.app import create_app
from responses_gateway.config import load_config

_config = load_config()
if _config is None:
    raise RuntimeError("set UPSTREAM_BASE_URL or GATEWAY_CONFIG for the deployed gateway")

app = create_app(_config)
