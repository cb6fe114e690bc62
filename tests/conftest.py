"""Shared by every tier: one Playwright driver for the whole session (the sync API cannot nest),
Debian's Chromium launched the same way by every browser test, and the same Hypothesis examples
on every run."""

from __future__ import annotations

import os
from urllib.parse import urlparse

import pytest
from hypothesis import settings

# The reference runs (torch, whose matrix products are Intel MKL's) give the same numbers on every
# run: MKL may otherwise pick its number of threads, and so its rounding, by how busy the machine
# is, and float32 rounding differences grow large in Gemma's residual stream. Set before torch loads.
os.environ.setdefault("MKL_DYNAMIC", "FALSE")
os.environ.setdefault("MKL_CBWR", "AUTO")

# Property tests and the API fuzzing draw the same examples on every run, so that a suite that
# passed passes again. MHA_HYPOTHESIS_RANDOM=1 draws fresh ones, to hunt for new failures.
settings.register_profile("repeatable", derandomize=True)
settings.register_profile("hunt", derandomize=False)
settings.load_profile("hunt" if os.environ.get("MHA_HYPOTHESIS_RANDOM") else "repeatable")


# `make test` installs the three models before it runs the suite, and says so with
# MHA_EXPLORER_MODELS_REQUIRED=1: there, a test skipped because a model is missing fails instead,
# so that a suite whose models did not install cannot pass without its reference tests. Run
# directly, pytest skips them and says why.
MODELS_REQUIRED = os.environ.get("MHA_EXPLORER_MODELS_REQUIRED") == "1"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if MODELS_REQUIRED and report.skipped and "is not installed" in str(report.longrepr):
        report.outcome = "failed"
        report.longrepr = f"skipped, but `make test` installs every model: {report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr}"


@pytest.fixture(scope="session")
def playwright_driver():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        yield driver


CHROMIUM = "/usr/bin/chromium"  # Debian's: nothing is downloaded by Playwright
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
LOCAL_HOSTS = {"127.0.0.1", "localhost", "[::1]", "::1"}


@pytest.fixture(scope="session")
def launch_chromium(playwright_driver):
    """launch(*extra_args) -> a headless Debian Chromium that fetches nothing in the background."""

    def launch(*extra_args: str):
        return playwright_driver.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS + list(extra_args))

    return launch


def offline(context, blocked: list[str] | None = None) -> None:
    """Let a browser context reach loopback and inline data only; every other request is refused
    (and listed in blocked): the page must work with no network."""

    def route(r) -> None:
        url = r.request.url
        if url.startswith(("data:", "blob:", "file:")) or (urlparse(url).hostname or "") in LOCAL_HOSTS:
            r.continue_()
        else:
            if blocked is not None:
                blocked.append(url)
            r.abort()

    context.route("**/*", route)


@pytest.fixture(scope="session")
def offline_context():
    return offline
