"""Shared by every tier: one Playwright driver for the whole session (the sync API cannot nest),
and the same Hypothesis examples on every run."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

# Property tests and the API fuzzing draw the same examples on every run, so that a suite that
# passed passes again. MHA_HYPOTHESIS_RANDOM=1 draws fresh ones, to hunt for new failures.
settings.register_profile("repeatable", derandomize=True)
settings.register_profile("hunt", derandomize=False)
settings.load_profile("hunt" if os.environ.get("MHA_HYPOTHESIS_RANDOM") else "repeatable")


@pytest.fixture(scope="session")
def playwright_driver():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        yield driver
