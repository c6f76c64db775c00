"""The shipped tokenizer vocabulary: its published hash, and an encoding that loads offline."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from responses_gateway._vocab import ENCODINGS_BASE_VAR, VOCAB_FILE, VOCAB_SHA256, harmony_encoding

TIKTOKEN_O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
"""``expected_hash`` of ``o200k_base`` in tiktoken's ``tiktoken_ext/openai_public.py``."""

DEAD_PROXY = "http://127.0.0.1:9"
"""Nothing listens on the discard port: any download through this proxy is refused at once."""


def test_shipped_vocab_has_tiktokens_published_sha256() -> None:
    assert VOCAB_SHA256 == TIKTOKEN_O200K_SHA256
    assert hashlib.sha256(VOCAB_FILE.read_bytes()).hexdigest() == TIKTOKEN_O200K_SHA256


def test_shipped_vocab_is_package_data() -> None:
    import tomllib

    root = Path(__file__).resolve().parents[2]
    setuptools = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    relative = VOCAB_FILE.relative_to(root / "shared" / "responses_gateway")
    assert f"{relative.parent}/*.tiktoken" in setuptools["package-data"]["responses_gateway"]


def _offline_env(cache: Path) -> dict[str, str]:
    """The environment of a process that cannot download: an empty tokenizer cache, every proxy
    variable pointing at a dead port, and no vocabulary directory set."""
    env = {k: v for k, v in os.environ.items() if k != ENCODINGS_BASE_VAR}
    env["TIKTOKEN_RS_CACHE_DIR"] = str(cache)
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy"):
        env[name] = DEAD_PROXY
    env.pop("NO_PROXY", None)
    env.pop("no_proxy", None)
    return env


def _run(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_library_alone_would_download_the_vocab(tmp_path: Path) -> None:
    # The control: without the shipped file, openai-harmony tries to download and (here) fails.
    result = _run(
        """
        import openai_harmony
        try:
            openai_harmony.load_harmony_encoding("HarmonyGptOss")
        except openai_harmony.HarmonyError as exc:
            print("refused:", exc)
        """,
        _offline_env(tmp_path),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("refused: error downloading or loading vocab file")


def test_encoding_loads_with_no_network_access(tmp_path: Path) -> None:
    result = _run(
        """
        import os, sys

        def no_sockets(event, args):
            if event in ("socket.connect", "socket.getaddrinfo", "urllib.Request"):
                raise RuntimeError(f"network access attempted: {event} {args!r}")

        sys.addaudithook(no_sockets)
        from responses_gateway._vocab import ENCODINGS_BASE_VAR, harmony_encoding

        encoding = harmony_encoding()
        print(encoding.encode("<|start|>user", allowed_special="all"))
        print(ENCODINGS_BASE_VAR in os.environ)
        """,
        _offline_env(tmp_path),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["[200006, 1428]", "False"]
    assert list(tmp_path.iterdir()) == []  # nothing was downloaded into the cache


def test_encoding_is_loaded_once_and_restores_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ENCODINGS_BASE_VAR, "/nonexistent")
    encoding = harmony_encoding()
    assert harmony_encoding() is encoding
    assert os.environ[ENCODINGS_BASE_VAR] == "/nonexistent"
