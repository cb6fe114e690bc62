"""A real server on loopback and Debian's Chromium driven by Playwright, with the network outside blocked."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest
import uvicorn

from mha_explorer.server import create_app

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="package")
def server_url():
    """The server, for this tier alone. It stops once the tier is done and the traces the page
    asked for ahead (its prefetches) have finished: the tiers after this one share its loaded
    models and time their own work."""
    port = free_port()
    app = create_app()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 60
    while app.state.gate.pending and time.monotonic() < deadline:
        time.sleep(0.05)
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture(scope="session")
def browser(launch_chromium):
    b = launch_chromium()
    yield b
    b.close()


@pytest.fixture
def page(browser, offline_context):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    offline_context(context)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("console", lambda m: errors.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None)
    pg.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    pg.console_errors = errors
    yield pg
    context.close()
    assert errors == [], f"the page logged errors: {errors}"


@pytest.fixture(scope="session")
def artifacts() -> Path:
    path = ARTIFACTS / "screenshots"
    path.mkdir(parents=True, exist_ok=True)
    return path
