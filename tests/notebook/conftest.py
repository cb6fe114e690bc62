"""The notebook tier: the widget in Python, the walkthrough run headless, and JupyterLab in Chromium."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _minilm_installed() -> bool:
    try:
        from mha_explorer.models import available_models
    except ImportError:
        return False
    return any(m.name == "minilm" and m.installed for m in available_models())


@pytest.fixture(scope="session")
def walkthrough() -> Path:
    return ROOT / "examples" / "walkthrough.ipynb"


@pytest.fixture(scope="session")
def minilm_available() -> bool:
    """Whether the models package and MiniLM's weights are installed here."""
    return _minilm_installed()


@pytest.fixture
def minilm(minilm_available) -> str:
    if not minilm_available:
        pytest.skip("the models package or MiniLM's weights are not installed")
    return "minilm"
