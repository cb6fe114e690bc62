"""Shared by every tier: one Playwright driver for the whole session (the sync API cannot nest)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def playwright_driver():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        yield driver
