"""Operator prompt templates in DynamoDB.

Owns the item layout of :class:`~responses_gateway.store.base.PromptStore` (see DESIGN.md,
"Prompt templates"): ``PK = P#<prompt id>``, ``SK = V#<version>`` holds one version's body
(JSON, written once: the put is conditional on the item being absent), and ``SK = D`` the
default version's name. One Query of the partition reads a whole prompt. Prompts are global
(not per tenant) and never expire. It must not know about the template syntax or HTTP.
"""

from __future__ import annotations

import json
from typing import Any

from responses_gateway.store._calls import ConditionFailed, TableClient
from responses_gateway.store._codec import SCHEMA_ATTR, escape, key
from responses_gateway.store.base import RECORD_VERSION, PromptVersionExists, StoredPrompt

__all__ = ["PromptTable"]

_DEFAULT_SK = "D"
_VERSION = "V#"


def _pk(prompt_id: str) -> str:
    return f"P#{escape(prompt_id)}"


class PromptTable:
    """Prompt versions and their default, one partition per prompt."""

    def __init__(self, db: TableClient) -> None:
        self._db = db

    async def put_version(
        self, prompt_id: str, version: str, body: dict[str, Any], *, make_default: bool
    ) -> None:
        item = {
            **key(_pk(prompt_id), _VERSION + escape(version)),
            SCHEMA_ATTR: {"N": str(RECORD_VERSION)},
            "v": {"S": version},
            "body": {"S": json.dumps(body, separators=(",", ":"), ensure_ascii=False)},
        }
        try:
            await self._db.put_item(
                "put_prompt_version", item, condition="attribute_not_exists(PK)"
            )
        except ConditionFailed:
            raise PromptVersionExists(f"{prompt_id} {version}") from None
        if make_default:
            pointer = {**key(_pk(prompt_id), _DEFAULT_SK), "v": {"S": version}}
            await self._db.put_item("put_prompt_version", pointer)

    async def get(self, prompt_id: str) -> StoredPrompt | None:
        items = await self._db.query_all("get_prompt", _pk(prompt_id), ("D", "V#\uffff"))
        versions = {
            item["v"]["S"]: json.loads(item["body"]["S"])
            for item in items
            if item["SK"]["S"].startswith(_VERSION)
        }
        if not versions:
            return None
        default = next((i["v"]["S"] for i in items if i["SK"]["S"] == _DEFAULT_SK), None)
        return StoredPrompt(prompt_id, versions, default)
