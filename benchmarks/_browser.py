"""Shared by the browser benchmarks: a server on loopback and Debian's Chromium."""

from __future__ import annotations

import socket
import threading
import time

import uvicorn

from mha_explorer.memory import settle_server_process
from mha_explorer.server import create_app

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]


def serve() -> tuple[str, uvicorn.Server]:
    """Start the explorer on a free loopback port, set up as `mha-explorer serve` sets up its
    process; set `server.should_exit = True` to stop it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = create_app()
    settle_server_process()  # as `mha-explorer serve` does
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the benchmark server did not start")
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}/", server
