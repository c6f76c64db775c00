"""Sealed blobs: round trip, tamper, tenant and purpose binding, rotation, key sources."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from responses_gateway import sealing
from responses_gateway.errors import InvalidRequestError
from responses_gateway.sealing import (
    Keyring,
    SealedBlobError,
    SealingConfigError,
    configure,
    keyring_from_env,
    parse_keys,
    seal,
    unseal,
)


def _key(byte: int) -> str:
    return base64.b64encode(bytes([byte]) * 32).decode()


@pytest.fixture(autouse=True)
def _keys() -> Iterator[None]:
    configure(parse_keys(f"k1:{_key(1)}"))
    yield
    sealing._keyring = None


def test_round_trip_keeps_the_payload() -> None:
    payload = {"text": "thinking… ✓", "n": [1, 2, {"a": None}]}
    blob = seal("reasoning", payload, tenant="t1")
    assert blob.startswith("rgw1.k1.")
    assert unseal("reasoning", blob, tenant="t1") == payload
    assert "thinking" not in blob


def test_two_seals_of_one_payload_differ() -> None:
    assert seal("reasoning", {"a": 1}, tenant="t") != seal("reasoning", {"a": 1}, tenant="t")


@pytest.mark.parametrize("offset", [0, 11, 12, 20, -16, -1])
def test_tampered_blob_is_rejected(offset: int) -> None:
    blob = seal("reasoning", {"a": 1}, tenant="t1")
    head, body = blob.rsplit(".", 1)
    raw = bytearray(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    raw[offset] ^= 0x01
    forged = head + "." + base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()
    with pytest.raises(SealedBlobError):
        unseal("reasoning", forged, tenant="t1")


def test_blob_with_another_kid_label_is_rejected() -> None:
    configure(parse_keys(f"k1:{_key(1)},k2:{_key(1)}"))
    blob = seal("reasoning", {"a": 1}, tenant="t1")
    with pytest.raises(SealedBlobError):
        unseal("reasoning", blob.replace("rgw1.k1.", "rgw1.k2."), tenant="t1")


def test_wrong_tenant_is_rejected() -> None:
    blob = seal("reasoning", {"a": 1}, tenant="t1")
    with pytest.raises(SealedBlobError):
        unseal("reasoning", blob, tenant="t2")


def test_wrong_purpose_is_rejected() -> None:
    blob = seal("reasoning", {"a": 1}, tenant="t1")
    with pytest.raises(SealedBlobError):
        unseal("compaction", blob, tenant="t1")


def test_rotation_old_keys_open_new_key_seals() -> None:
    old_blob = seal("reasoning", {"v": "old"}, tenant="t")
    configure(parse_keys(f"k2:{_key(2)},k1:{_key(1)}"))
    new_blob = seal("reasoning", {"v": "new"}, tenant="t")
    assert new_blob.startswith("rgw1.k2.")
    assert unseal("reasoning", old_blob, tenant="t") == {"v": "old"}
    assert unseal("reasoning", new_blob, tenant="t") == {"v": "new"}
    configure(parse_keys(f"k2:{_key(2)}"))  # k1 retired: its blobs no longer open
    with pytest.raises(SealedBlobError):
        unseal("reasoning", old_blob, tenant="t")


def test_same_kid_other_key_is_rejected() -> None:
    blob = seal("reasoning", {"a": 1}, tenant="t")
    configure(parse_keys(f"k1:{_key(9)}"))
    with pytest.raises(SealedBlobError):
        unseal("reasoning", blob, tenant="t")


@pytest.mark.parametrize(
    "garbage",
    [
        "",
        "gAAAAABl-openai-fernet-looking",
        "rgw1.k1.",
        "rgw1.k1.!!!!",
        "rgw1.k1.AAAA",
        "rgw1.nokey.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "rgw1.bad kid.AAAA",
        "rgw2.k1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "rgw1.k1." + "A" * 500,
    ],
)
def test_garbage_is_a_sealed_blob_error(garbage: str) -> None:
    with pytest.raises(SealedBlobError) as caught:
        unseal("reasoning", garbage, tenant="t")
    error = caught.value
    assert isinstance(error, InvalidRequestError)
    assert error.status_code == 400
    assert error.to_error() == {
        "message": "The encrypted content could not be verified or decrypted.",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_encrypted_content",
    }


def test_non_string_blob_is_rejected() -> None:
    with pytest.raises(SealedBlobError):
        unseal("reasoning", None, tenant="t")  # type: ignore[arg-type]


def test_error_carries_the_callers_param() -> None:
    error = SealedBlobError(param="input[2].encrypted_content")
    assert error.to_error()["param"] == "input[2].encrypted_content"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "nokid",
        f"k1:{_key(1)},k1:{_key(2)}",
        "k1:not-base64!",
        "k1:" + _key(1)[:-8],
        "bad kid:x",
    ],
)
def test_parse_keys_rejects_malformed_config(text: str) -> None:
    with pytest.raises(SealingConfigError) as caught:
        parse_keys(text)
    assert _key(1) not in str(caught.value)


def test_parse_keys_accepts_urlsafe_and_newlines() -> None:
    urlsafe = base64.urlsafe_b64encode(b"\xfb" * 32).decode().rstrip("=")
    ring = parse_keys(f"a:{urlsafe}\n b:{_key(3)}\n")
    assert ring.kids == ("a", "b")
    assert ring.keys[0][1] == b"\xfb" * 32
    assert _key(3) not in repr(ring)


def test_keys_file(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text(f"f1:{_key(5)}\n", encoding="utf-8")
    ring = keyring_from_env({"GATEWAY_SEALING_KEYS_FILE": str(path)})
    assert ring.kids == ("f1",) and not ring.ephemeral


def test_env_wins_over_file(tmp_path: Path) -> None:
    ring = keyring_from_env(
        {"GATEWAY_SEALING_KEYS": f"e1:{_key(5)}", "GATEWAY_SEALING_KEYS_FILE": "/nonexistent"}
    )
    assert ring.kids == ("e1",)


def test_missing_file_is_a_config_error() -> None:
    with pytest.raises(SealingConfigError):
        keyring_from_env({"GATEWAY_SEALING_KEYS_FILE": "/nonexistent/keys"})


def test_nothing_configured_is_ephemeral_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="responses_gateway.sealing"):
        ring = keyring_from_env({})
    assert ring.ephemeral and ring.kids == ("ephemeral",)
    assert "ephemeral" in caplog.text
    assert base64.b64encode(ring.keys[0][1]).decode() not in caplog.text


def test_first_use_reads_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    sealing._keyring = None
    monkeypatch.setenv("GATEWAY_SEALING_KEYS", f"env1:{_key(7)}")
    assert seal("p", {}, tenant="t").startswith("rgw1.env1.")


@pytest.mark.parametrize(
    ("stored", "kids"),
    [
        (f"s1:{_key(4)}", ("s1",)),
        (json.dumps({"keys": f"s1:{_key(4)},s0:{_key(3)}"}), ("s1", "s0")),
        (json.dumps({"kid": "gen1", "secret": "x" * 40}), ("gen1",)),
    ],
)
def test_stored_secret_formats(
    monkeypatch: pytest.MonkeyPatch, stored: str, kids: tuple[str, ...]
) -> None:
    from aws_lambda_powertools.utilities import parameters

    asked: list[str] = []

    def fake_get_secret(name: str, **_: object) -> str:
        asked.append(name)
        return stored

    monkeypatch.setattr(parameters, "get_secret", fake_get_secret)
    ring = keyring_from_env({"GATEWAY_SEALING_KEYS_SECRET": "gw/sealing"})
    assert asked == ["gw/sealing"]
    assert ring.kids == kids
    configure(ring)
    assert unseal("p", seal("p", {"x": 1}, tenant="t"), tenant="t") == {"x": 1}


def test_derived_secret_key_is_stable(monkeypatch: pytest.MonkeyPatch) -> None:
    from aws_lambda_powertools.utilities import parameters

    stored = json.dumps({"kid": "gen1", "secret": "y" * 64})
    monkeypatch.setattr(parameters, "get_parameter", lambda *a, **k: stored)
    env = {"GATEWAY_SEALING_KEYS_PARAMETER": "/gw/sealing"}
    configure(keyring_from_env(env))
    blob = seal("p", {"x": 1}, tenant="t")
    configure(keyring_from_env(env))  # another cold start derives the same key
    assert unseal("p", blob, tenant="t") == {"x": 1}


def test_parameter_and_secret_together_is_a_config_error() -> None:
    with pytest.raises(SealingConfigError):
        keyring_from_env(
            {"GATEWAY_SEALING_KEYS_PARAMETER": "/a", "GATEWAY_SEALING_KEYS_SECRET": "b"}
        )


def test_unreadable_secret_names_no_value(monkeypatch: pytest.MonkeyPatch) -> None:
    from aws_lambda_powertools.utilities import parameters

    def boom(*_: object, **__: object) -> str:
        raise RuntimeError("AccessDenied")

    monkeypatch.setattr(parameters, "get_secret", boom)
    with pytest.raises(SealingConfigError, match="cannot read the sealing keys from secret s"):
        keyring_from_env({"GATEWAY_SEALING_KEYS_SECRET": "s"})


def test_empty_keyring_is_refused() -> None:
    with pytest.raises(SealingConfigError):
        Keyring(())
