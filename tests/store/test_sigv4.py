"""SigV4 signing: AWS's published test vectors, and botocore's own signer on the same inputs."""

from __future__ import annotations

import datetime
from unittest import mock

import botocore.auth
import pytest
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials as BotocoreCredentials

from responses_gateway.store import _sigv4
from responses_gateway.store._sigv4 import Credentials, Signer, amz_date, payload_hash

EXAMPLE_SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"


def test_signing_key_matches_aws_documented_derivation() -> None:
    # AWS's "deriving the signing key" example: 20120215, us-east-1, iam.
    signer = Signer("us-east-1", "iam")

    key = signer._signing_key(EXAMPLE_SECRET, "20120215")

    assert key.hex() == "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d"


def test_sign_post_vanilla_matches_aws_test_suite_vector() -> None:
    # aws-sig-v4-test-suite "post-vanilla": POST / to example.amazonaws.com, no body.
    signer = Signer("us-east-1", "service")

    headers = signer.sign(
        method="POST",
        path="/",
        headers={"Host": "example.amazonaws.com"},
        body_hash=payload_hash(b""),
        credentials=Credentials("AKIDEXAMPLE", EXAMPLE_SECRET),
        timestamp="20150830T123600Z",
    )

    assert headers == {
        "Host": "example.amazonaws.com",
        "X-Amz-Date": "20150830T123600Z",
        "Authorization": "AWS4-HMAC-SHA256 "
        "Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
        "SignedHeaders=host;x-amz-date, "
        "Signature=5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b",
    }


def _botocore_signed(
    url: str, headers: dict[str, str], body: bytes, credentials: Credentials, region: str
) -> dict[str, str]:
    request = AWSRequest(method="POST", url=url, data=body, headers=dict(headers))
    now = datetime.datetime(2026, 3, 1, 23, 59, 58)
    with mock.patch.object(botocore.auth, "get_current_datetime", return_value=now):
        signer = botocore.auth.SigV4Auth(
            BotocoreCredentials(credentials.access_key, credentials.secret_key, credentials.token),
            "dynamodb",
            region,
        )
        signer.add_auth(request)
    return dict(request.headers.items())


@pytest.mark.parametrize(
    ("url", "host", "token", "region", "body"),
    [
        (
            "https://dynamodb.us-east-1.amazonaws.com/",
            "dynamodb.us-east-1.amazonaws.com",
            None,
            "us-east-1",
            b'{"TableName":"t","Key":{"PK":{"S":"a"},"SK":{"S":"R"}}}',
        ),
        (
            "https://dynamodb.eu-west-3.amazonaws.com/",
            "dynamodb.eu-west-3.amazonaws.com",
            "IQoJb3JpZ2luX2VjEXAMPLE//token+with/slashes==",
            "eu-west-3",
            '{"Item":{"d":{"S":"caf\\u00e9 \u00e9t\u00e9"}}}'.encode(),
        ),
        ("http://127.0.0.1:8000/", "127.0.0.1:8000", None, "us-west-2", b""),
    ],
)
def test_sign_matches_botocore_signer_byte_for_byte(
    url: str, host: str, token: str | None, region: str, body: bytes
) -> None:
    credentials = Credentials("AKIAIOSFODNN7EXAMPLE", EXAMPLE_SECRET, token)
    headers = {
        "Host": host,
        "Content-Type": "application/x-amz-json-1.0",
        "X-Amz-Target": "DynamoDB_20120810.GetItem",
    }
    expected = _botocore_signed(url, headers, body, credentials, region)

    ours = Signer(region).sign(
        method="POST",
        path="/",
        headers=headers,
        body_hash=payload_hash(body),
        credentials=credentials,
        timestamp="20260301T235958Z",
    )

    assert ours == expected


def test_signing_key_is_derived_once_per_day_and_secret() -> None:
    signer = Signer("us-east-1")

    with mock.patch.object(_sigv4, "_hmac", side_effect=_sigv4._hmac) as hmac_calls:
        first = signer._signing_key("secret", "20260301")
        again = [signer._signing_key("secret", "20260301") for _ in range(2)]
        signer._signing_key("secret", "20260302")
        signer._signing_key("other", "20260302")

    assert again == [first, first]
    assert hmac_calls.call_count == 3 * 4  # three derivations of four HMACs each


def test_amz_date_is_utc_basic_format() -> None:
    assert amz_date(1_772_409_598.9) == "20260301T235958Z"


def test_credentials_repr_hides_secret_and_token() -> None:
    shown = repr(Credentials("AKIDEXAMPLE", EXAMPLE_SECRET, "session-token"))

    assert "AKIDEXAMPLE" in shown
    assert EXAMPLE_SECRET not in shown and "session-token" not in shown
