"""The tokenizer vocabulary of gpt-oss, shipped with the package so that nothing is downloaded.

Owns ``o200k_base.tiktoken`` (this directory; where it comes from and how it is re-checked:
``infra/harmony_vocab.py``), its published SHA-256 and :func:`harmony_encoding`, the one place
that loads the ``openai-harmony`` encoding. That library's tokenizer loader downloads the
vocabulary at run time unless the environment variable ``TIKTOKEN_ENCODINGS_BASE`` names a
directory holding the file, in which case it reads it from there and checks its SHA-256 against
the same published hash. The variable is set only while the encoding loads, and restored after.

``openai_harmony`` is imported inside :func:`harmony_encoding` only: importing this module costs
nothing, and a gateway with no harmony provider never loads the library.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

__all__ = ["ENCODINGS_BASE_VAR", "VOCAB_DIR", "VOCAB_FILE", "VOCAB_SHA256", "harmony_encoding"]

VOCAB_DIR = Path(__file__).resolve().parent
"""The directory the tokenizer loader is pointed at."""
VOCAB_FILE = VOCAB_DIR / "o200k_base.tiktoken"
VOCAB_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
"""The SHA-256 tiktoken (``tiktoken_ext/openai_public.py``) and openai-harmony publish for it."""
ENCODINGS_BASE_VAR = "TIKTOKEN_ENCODINGS_BASE"
"""The variable openai-harmony's tokenizer loader reads (``tiktoken_ext/public_encodings.rs``)."""

_lock = threading.Lock()
_encoding: Any = None


def harmony_encoding() -> Any:
    """The ``HarmonyGptOss`` encoding (an ``openai_harmony.HarmonyEncoding``), loaded once.

    Loading reads and hashes the 3.6 MB vocabulary (about half a second): call it off the event
    loop the first time.

    Raises:
        openai_harmony.HarmonyError: the shipped vocabulary is missing or its hash is wrong.
    """
    global _encoding
    with _lock:
        if _encoding is None:
            import openai_harmony  # type: ignore[import-untyped]

            previous = os.environ.get(ENCODINGS_BASE_VAR)
            os.environ[ENCODINGS_BASE_VAR] = str(VOCAB_DIR)
            try:
                _encoding = openai_harmony.load_harmony_encoding(
                    openai_harmony.HarmonyEncodingName.HARMONY_GPT_OSS
                )
            finally:
                if previous is None:
                    os.environ.pop(ENCODINGS_BASE_VAR, None)
                else:
                    os.environ[ENCODINGS_BASE_VAR] = previous
        return _encoding
