"""The models tier: real pretrained models against transformers, run offline.

Each module loads its transformers reference once. The largest differences measured go to
test-artifacts/models/tolerances.json (the README quotes them).
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

import pytest

# Nothing may come from a model hub: the reference reads the same local files as we do.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "models"


class Maxima:
    """The largest |ours - reference| per model and quantity, over every layer and sentence."""

    def __init__(self) -> None:
        self.values: dict[str, dict[str, float]] = defaultdict(dict)

    def record(self, model: str, quantity: str, value: float) -> None:
        self.values[model][quantity] = max(float(value), self.values[model].get(quantity, 0.0))


@pytest.fixture(scope="session")
def maxima():
    m = Maxima()
    yield m
    if m.values:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / "tolerances.json"
        old = json.loads(path.read_text()) if path.exists() else {}
        path.write_text(json.dumps(old | m.values, indent=1, sort_keys=True) + "\n")
