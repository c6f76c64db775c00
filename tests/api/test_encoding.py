"""Compressed request bodies: gzip, deflate, zstd, stacked codings, caps and bad input."""

from __future__ import annotations

import gzip
import zlib

import pytest
from backports import zstd

from responses_gateway.api.encoding import (
    BodyTooLargeError,
    UnsupportedEncodingError,
    decode_body,
)
from responses_gateway.errors import InvalidRequestError

BODY = b'{"model": "m", "input": "' + b"x" * 5000 + b'"}'


@pytest.mark.parametrize(
    ("encoding", "encoded"),
    [
        ("gzip", gzip.compress(BODY, mtime=0)),
        ("x-gzip", gzip.compress(BODY, mtime=0)),
        ("deflate", zlib.compress(BODY)),
        ("zstd", zstd.compress(BODY)),
        ("identity", BODY),
        ("GZip", gzip.compress(BODY, mtime=0)),
    ],
    ids=["gzip", "x-gzip", "deflate", "zstd", "identity", "GZip"],  # the same in every process
)
def test_each_coding_decodes(encoding: str, encoded: bytes) -> None:
    assert decode_body(encoded, encoding) == BODY


def test_no_encoding_is_the_body_itself() -> None:
    assert decode_body(BODY, None) == BODY


def test_stacked_codings_are_undone_last_first() -> None:
    encoded = zstd.compress(gzip.compress(BODY))
    assert decode_body(encoded, "gzip, zstd") == BODY


def test_gzip_with_several_members_is_read_whole() -> None:
    assert decode_body(gzip.compress(b"ab") + gzip.compress(b"cd"), "gzip") == b"abcd"


@pytest.mark.parametrize(
    ("encoding", "compress"),
    [
        ("gzip", gzip.compress),
        ("deflate", zlib.compress),
        ("zstd", zstd.compress),
    ],
)
def test_bomb_stops_at_the_cap(encoding: str, compress: object) -> None:
    bomb = compress(b"\0" * (64 * 1024 * 1024))  # type: ignore[operator]
    assert len(bomb) < 1024 * 1024
    with pytest.raises(BodyTooLargeError) as caught:
        decode_body(bomb, encoding, limit=4 * 1024 * 1024)
    assert caught.value.status_code == 413
    assert caught.value.to_error() == {
        "message": "The decompressed request body exceeds the limit of 4194304 bytes.",
        "type": "invalid_request_error",
        "param": None,
        "code": "request_too_large",
    }


def test_unknown_coding_is_415_before_any_decoding() -> None:
    with pytest.raises(UnsupportedEncodingError) as caught:
        decode_body(gzip.compress(BODY), "gzip, br")
    assert caught.value.status_code == 415
    assert caught.value.code == "unsupported_content_encoding"


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "zstd"])
def test_garbage_is_a_400(encoding: str) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        decode_body(b"definitely not compressed", encoding)
    assert caught.value.status_code == 400
    assert caught.value.code == "invalid_content_encoding"


def test_truncated_gzip_is_a_400() -> None:
    with pytest.raises(InvalidRequestError) as caught:
        decode_body(gzip.compress(BODY)[:-12], "gzip")
    assert caught.value.status_code == 400


def test_truncated_zstd_is_a_400() -> None:
    with pytest.raises(InvalidRequestError) as caught:
        decode_body(zstd.compress(BODY)[:-6], "zstd")
    assert caught.value.status_code == 400
    assert caught.value.code == "invalid_content_encoding"


def test_several_zstd_frames_are_read_whole() -> None:
    assert decode_body(zstd.compress(b"ab") + zstd.compress(b"cd"), "zstd") == b"abcd"


def test_zstd_without_a_decoder_installed_is_a_415(monkeypatch: pytest.MonkeyPatch) -> None:
    from responses_gateway.api import encoding

    def missing(name: str) -> None:
        raise ImportError(name)

    monkeypatch.setattr(encoding.importlib, "import_module", missing)
    with pytest.raises(UnsupportedEncodingError) as caught:
        decode_body(zstd.compress(BODY), "zstd")
    assert caught.value.status_code == 415
    assert "no zstd decoder" in caught.value.message
