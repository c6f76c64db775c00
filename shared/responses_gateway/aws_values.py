"""A Secrets Manager secret or an SSM parameter read at cold start, without boto3 when it can.

The functions read their upstream key, their providers' keys and the sealing keys once, at
init. Through Powertools Parameters that imports boto3 and builds its client: about 0.2 s of a
cold start for one small JSON call. :func:`read_value` makes that call itself (``POST /`` with
``X-Amz-Target``, SigV4-signed by the store's signer, over httpx, which the functions import
anyway) whenever the credentials are in the environment, as Lambda puts them; otherwise (a
profile, a container's credential endpoint) it goes through Powertools Parameters as before.
Endpoints follow botocore's variables: ``AWS_ENDPOINT_URL_SECRETS_MANAGER`` /
``AWS_ENDPOINT_URL_SSM``, then ``AWS_ENDPOINT_URL``, then the regional endpoint.

Must not log, or put into an error, a value, a key or a signature: errors name the service's
error code only.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from typing import Any, Literal

from responses_gateway.store._sigv4 import Credentials, Signer, amz_date, payload_hash

__all__ = ["AwsValueError", "read_value"]

ValueKind = Literal["secret", "parameter"]

_SERVICES: dict[str, tuple[str, str, str]] = {
    "secret": ("secretsmanager", "secretsmanager.GetSecretValue", "SECRETS_MANAGER"),
    "parameter": ("ssm", "AmazonSSM.GetParameter", "SSM"),
}
"""kind -> (signing name and host prefix, X-Amz-Target, endpoint variable suffix)."""
_ATTEMPTS = 3
_MAX_AGE = 300


class AwsValueError(Exception):
    """The service refused the read or could not be reached (the message holds no value)."""


def _env_credentials(env: Mapping[str, str]) -> Credentials | None:
    key, secret = env.get("AWS_ACCESS_KEY_ID"), env.get("AWS_SECRET_ACCESS_KEY")
    if not key or not secret or env.get("AWS_CREDENTIAL_EXPIRATION"):
        return None
    token = env.get("AWS_SESSION_TOKEN") or env.get("AWS_SECURITY_TOKEN") or None
    return Credentials(key, secret, token)


def _endpoint(kind: ValueKind, env: Mapping[str, str], region: str) -> str:
    host, _, suffix = _SERVICES[kind]
    found = env.get(f"AWS_ENDPOINT_URL_{suffix}") or env.get("AWS_ENDPOINT_URL")
    return (found or f"https://{host}.{region}.amazonaws.com").rstrip("/")


def _direct(kind: ValueKind, name: str, env: Mapping[str, str], credentials: Credentials) -> Any:
    import httpx

    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1"
    service, target, _ = _SERVICES[kind]
    url = _endpoint(kind, env, region)
    body = json.dumps(
        {"SecretId": name} if kind == "secret" else {"Name": name, "WithDecryption": True}
    ).encode()
    split = httpx.URL(url)
    path = split.raw_path.decode("ascii") or "/"
    host = split.netloc.decode("ascii")
    signer = Signer(region, service)
    failure = "no answer"
    with httpx.Client(timeout=10.0) as client:
        for attempt in range(_ATTEMPTS):
            headers = signer.sign(
                method="POST",
                path=path,
                headers={
                    "host": host,
                    "content-type": "application/x-amz-json-1.1",
                    "x-amz-target": target,
                },
                body_hash=payload_hash(body),
                credentials=credentials,
                timestamp=amz_date(time.time()),
            )
            try:
                answer = client.post(url, content=body, headers=headers)
            except httpx.TransportError as exc:
                failure = type(exc).__name__
            else:
                if answer.status_code == 200:
                    return _value(kind, answer.json())
                code = str(answer.json().get("__type", answer.status_code)).rpartition("#")[2]
                failure = code
                if answer.status_code < 500 and "Throttl" not in code:
                    break
            time.sleep(0.05 * 2**attempt)
    raise AwsValueError(failure)


def _value(kind: ValueKind, document: Mapping[str, Any]) -> Any:
    if kind == "parameter":
        return document["Parameter"]["Value"]
    if "SecretString" in document:
        return document["SecretString"]
    import base64

    return base64.b64decode(document["SecretBinary"])


def read_value(kind: ValueKind, name: str, env: Mapping[str, str] | None = None) -> Any:
    """The secret (``str``, or ``bytes`` for a binary secret) or the decrypted parameter
    ``name`` names.

    Raises:
        AwsValueError: the service refused it or did not answer (its error code as message).
        Exception: whatever Powertools Parameters raises, on the boto3 path.
    """
    env = os.environ if env is None else env
    credentials = _env_credentials(env)
    if credentials is not None:
        return _direct(kind, name, env, credentials)
    from aws_lambda_powertools.utilities import parameters

    if kind == "parameter":
        return parameters.get_parameter(name, decrypt=True, max_age=_MAX_AGE)
    return parameters.get_secret(name, max_age=_MAX_AGE)
