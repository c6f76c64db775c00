"""Prompt templates kept in the store, on both stores: versions written once, a default."""

from __future__ import annotations

import pytest

from responses_gateway.store.base import PromptVersionExists, Store, StoredPrompt

V1 = {"instructions": "You help with {{product}}."}
V2 = {"instructions": "Hi {{name}}", "input": [{"role": "user", "content": "I am {{name}}."}]}


async def test_a_prompt_is_its_versions_and_its_default(store: Store) -> None:
    assert await store.get_prompt("pmpt_a") is None

    await store.put_prompt_version("pmpt_a", "1", V1, make_default=False)
    assert await store.get_prompt("pmpt_a") == StoredPrompt("pmpt_a", {"1": V1}, None)

    await store.put_prompt_version("pmpt_a", "2", V2, make_default=True)
    await store.put_prompt_version("pmpt_a", "3", V1, make_default=False)
    assert await store.get_prompt("pmpt_a") == StoredPrompt(
        "pmpt_a", {"1": V1, "2": V2, "3": V1}, "2"
    )
    await store.put_prompt_version("pmpt_a", "4", V1, make_default=True)
    found = await store.get_prompt("pmpt_a")
    assert found is not None and found.default_version == "4"


async def test_a_version_is_written_once(store: Store) -> None:
    await store.put_prompt_version("pmpt_b#x", "1", V1, make_default=True)

    with pytest.raises(PromptVersionExists):
        await store.put_prompt_version("pmpt_b#x", "1", V2, make_default=True)

    assert await store.get_prompt("pmpt_b#x") == StoredPrompt("pmpt_b#x", {"1": V1}, "1")
    assert await store.get_prompt("pmpt_b") is None
