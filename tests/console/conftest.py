"""Browser fixtures: the gateway served over HTTP with keys of three tenants (one an operator)
in a key file it re-reads (the Keys page adds and revokes keys there), budgets on, the scripted
upstream, a DynamoDB endpoint of its own, and a real Chromium driven by Playwright.

The browser is the Debian ``chromium`` package at ``/usr/bin/chromium``. When it is missing, the
session installs it (``apt-get install -y chromium chromium-driver``, as root, under a file lock
so parallel sessions install once) and fails loudly when it cannot: these tests never skip.
Playwright's own browser download is never used. Screenshots go to ``tests/artifacts/``.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import (
    Browser,
    ConsoleMessage,
    Page,
    Playwright,
    TimeoutError as PlaywrightTimeout,
    sync_playwright,
)

from responses_gateway.app import create_app
from responses_gateway.config import parse_config
from responses_gateway.mcp.security import McpPolicy
from responses_gateway.store.dynamo import DynamoStore
from responses_gateway.store.local import LocalDynamo, start_local_dynamodb
from responses_gateway.tenancy import KEYS_FILE_ENV
from responses_gateway.testing.fake_upstream import create_fake_upstream_app
from responses_gateway.testing.script import ScriptedUpstream
from responses_gateway.testing.server import RunningServer, run_in_thread

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
KEYS = {
    "alpha": "sk-console-alpha",
    "beta": "sk-console-beta",
    "ops": "sk-console-ops",
    "quiet": "sk-console-quiet",  # a tenant no test sends traffic for: the pages' empty states
}
MODEL = "scripted-chat"
OTHER_MODEL = "scripted-responses"
_LOCK = Path(__file__).with_name(".chromium-install.lock")
_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def ensure_chromium() -> str:
    """The path of the OS Chromium, installing ``chromium chromium-driver`` when missing."""
    with _LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(CHROMIUM):
            return CHROMIUM
        if os.geteuid() != 0 or shutil.which("apt-get") is None:
            raise RuntimeError(
                f"{CHROMIUM} is missing: run `apt-get update && apt-get install -y chromium "
                "chromium-driver` as root (these tests need a real browser)"
            )
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update"], check=True, env=env)
        subprocess.run(
            ["apt-get", "install", "-y", "chromium", "chromium-driver"], check=True, env=env
        )
    if not os.path.exists(CHROMIUM):
        raise RuntimeError(f"apt-get installed chromium but {CHROMIUM} is still missing")
    return CHROMIUM


@dataclass
class ConsoleStack:
    upstream: ScriptedUpstream
    gateway: RunningServer
    dynamo: LocalDynamo
    store: DynamoStore
    keys_file: Path
    upstream_url: str = ""
    """The scripted upstream's URL (gateways of a test's own reach it there)."""

    def http(self, who: str) -> httpx.Client:
        return httpx.Client(
            base_url=self.gateway.url,
            timeout=30,
            headers={"authorization": f"Bearer {KEYS[who]}"},
        )


@pytest.fixture(scope="session")
def console_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleStack]:
    upstream = ScriptedUpstream(demo=False)
    upstream_server = run_in_thread(create_fake_upstream_app(upstream))
    base = f"{upstream_server.url}/v1"
    config = parse_config(
        {
            "providers": [
                {"name": "chat", "base_url": base, "api": "chat", "models": [MODEL]},
                {"name": "resp", "base_url": base, "api": "responses", "models": [OTHER_MODEL]},
            ],
            "operators": ["ops"],
            "budgets": {"daily_tokens": 1_000_000_000},
            "request_log": {"content_tenants": ["beta"]},  # alpha's content is never logged
        },
        env={},
    )
    dynamo = start_local_dynamodb(table_name="console-e2e")
    store = DynamoStore(dynamo.client, dynamo.table_name)
    app = create_app(config, store, mcp_policy=McpPolicy(allow_http=True, allow_loopback=True))
    keys_file = tmp_path_factory.mktemp("console-keys") / "keys"
    keys_file.write_text("".join(f"{key}:{who}\n" for who, key in KEYS.items()))
    app.state.tenancy_env = {KEYS_FILE_ENV: str(keys_file)}  # re-read when it changes
    gateway = run_in_thread(app)
    try:
        yield ConsoleStack(upstream, gateway, dynamo, store, keys_file, upstream_server.url)
    finally:
        gateway.stop()
        upstream_server.stop()
        store.close()
        dynamo.stop()


@pytest.fixture
def stack(console_stack: ConsoleStack) -> ConsoleStack:
    console_stack.upstream.reset()
    return console_stack


@pytest.fixture(scope="module")
def playwright_driver() -> Iterator[Playwright]:
    """Module scoped: Playwright's sync driver runs an event loop in this thread while open,
    which async tests of later modules must not find running."""
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="module")
def browser(playwright_driver: Playwright) -> Iterator[Browser]:
    path = ensure_chromium()
    launched = playwright_driver.chromium.launch(executable_path=path, args=_FLAGS)
    print(f"chromium {launched.version} at {path}")  # noqa: T201 - shown in the test log
    try:
        yield launched
    finally:
        launched.close()


@dataclass
class ConsolePage:
    """One signed-in console tab, and the console errors it logged."""

    page: Page
    base: str
    errors: list[str] = field(default_factory=list)
    expected: list[str] = field(default_factory=list)
    """Parts of console errors a test causes on purpose (Chromium logs every HTTP error answer
    of a fetch, e.g. "status of 404"); any other console error fails the test."""

    def unexpected(self) -> list[str]:
        return [e for e in self.errors if not any(part in e for part in self.expected)]

    def open(self, hash_: str) -> None:
        """Go to ``hash_`` (a page that is open already is reloaded), then wait for nothing:
        :meth:`wait_ready` waits for the page to have rendered."""
        self.page.evaluate(
            "h => { delete document.getElementById('page').dataset.ready;"
            " if (location.hash === h) { dispatchEvent(new HashChangeEvent('hashchange')); }"
            " else { location.hash = h; } }",
            hash_,
        )

    def pick_tenant(self, tenant: str) -> None:
        """An operator's tenant picker set to ``tenant`` (the current page reloads)."""
        self.page.evaluate("() => { delete document.getElementById('page').dataset.ready; }")
        self.page.select_option("#tenant-pick", tenant)

    def fits(self, width: int) -> None:
        """No horizontal overflow: the page is no wider than the viewport."""
        scroll = self.page.evaluate("document.documentElement.scrollWidth")
        assert scroll <= width, f"the page is {scroll} px wide at {width} px"

    def wait_ready(self, name: str) -> None:
        try:
            self.page.wait_for_selector(f'#page[data-ready="{name}"]', timeout=15_000)
        except PlaywrightTimeout:
            text = self.page.inner_text("body")
            raise AssertionError(f"page {name} never ready: {self.errors} {text[:500]}") from None

    def shot(self, name: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path


@pytest.fixture
def console(browser: Browser, console_stack: ConsoleStack) -> Iterator[Any]:
    """``console(who, width=1280)``: a new tab signed in with ``who``'s key."""
    contexts: list[Any] = []
    pages: list[ConsolePage] = []

    def open_console(
        who: str,
        *,
        width: int = 1280,
        height: int = 800,
        base: str | None = None,
        key: str | None = None,
    ) -> ConsolePage:
        """A tab signed in as ``who`` (or with ``key``) on the stack's gateway (or ``base``)."""
        url = base or console_stack.gateway.url
        context = browser.new_context(viewport={"width": width, "height": height})
        contexts.append(context)
        page = context.new_page()
        tab = ConsolePage(page, url)
        page.on("console", lambda m: _console_error(tab, m))
        page.on("pageerror", lambda exc: tab.errors.append(str(exc)))
        page.goto(f"{url}/console/")
        page.fill("#api-key", key or KEYS[who])
        page.click("#signin-form button[type=submit]")
        page.wait_for_selector('#page[data-ready="overview"]')  # the landing page
        pages.append(tab)
        return tab

    yield open_console
    for context in contexts:
        context.close()
    for tab in pages:
        assert tab.unexpected() == [], tab.errors


def _console_error(tab: ConsolePage, message: ConsoleMessage) -> None:
    if message.type == "error":
        tab.errors.append(message.text)
