"""The teaching example: invented values a person can check by hand."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib.resources import files

import numpy as np

from ..config import AttentionConfig
from ..weights import AttentionWeights


@dataclass(frozen=True, eq=False)
class Example:
    tokens: tuple[str, ...]
    query: str  # the token the walkthrough starts from
    config: AttentionConfig
    x: np.ndarray  # (n, d_model)
    weights: AttentionWeights
    description: str = ""


def load_teaching_example() -> Example:
    """Read the example shipped with the package; every call returns fresh, identical arrays."""
    raw = json.loads(files(__package__).joinpath("teaching.json").read_text(encoding="utf-8"))
    config = AttentionConfig(**raw["config"])
    weights = AttentionWeights(**{name: np.array(raw[name], dtype=np.float64) for name in ("W_Q", "W_K", "W_V", "W_O")})
    weights.check(config)
    return Example(
        tokens=tuple(raw["tokens"]),
        query=raw["query"],
        config=config,
        x=np.array(raw["x"], dtype=np.float64),
        weights=weights,
        description=raw["description"],
    )
