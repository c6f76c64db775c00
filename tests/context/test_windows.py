"""windows_of_listing and WindowDirectory: configuration first, then the upstream's listing."""

from __future__ import annotations

import httpx

from responses_gateway.config import Provider
from responses_gateway.context.windows import WindowDirectory, root_url, windows_of_listing


def test_windows_of_listing_reads_vllm_openrouter_and_llamacpp_fields() -> None:
    listing = {
        "data": [
            {"id": "vllm-model", "max_model_len": 32768},
            {"id": "router-model", "context_length": 128000},
            {"id": "router-nested", "top_provider": {"context_length": 64000}},
            {"id": "llama", "meta": {"n_ctx_train": 8192}},
            {"id": "unknown"},
            {"id": "bogus", "max_model_len": True},
        ]
    }
    assert windows_of_listing(listing) == {
        "vllm-model": 32768,
        "router-model": 128000,
        "router-nested": 64000,
        "llama": 8192,
    }
    assert windows_of_listing("nope") == {}


def test_root_url_strips_v1() -> None:
    assert root_url("http://h:8000/v1/") == "http://h:8000"
    assert root_url("http://h:8000") == "http://h:8000"


async def test_window_directory_configuration_wins_and_listing_is_read_once() -> None:
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "llama", "meta": {"n_ctx_train": 8}}]})
        return httpx.Response(200, json={"default_generation_settings": {"n_ctx": 4096}})

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        windows = WindowDirectory(client)
        configured = Provider("p", "http://u/v1", context_windows={"a": 100}, context_window=50)
        assert await windows.window(configured, "a") == 100
        assert await windows.window(configured, "b") == 50
        assert calls == []
        discovered = Provider("q", "http://u/v1")
        assert await windows.window(discovered, "llama") == 4096  # /props n_ctx wins
        assert await windows.window(discovered, "other") is None
        assert calls == ["/v1/models", "/props"]
