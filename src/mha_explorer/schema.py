"""The JSON contract, defined once: the API, the CLI's --json, the static site and the widget use it."""

from __future__ import annotations

from dataclasses import asdict
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

from .costs import costs
from .narrative import NOTES, mathml, page_stages
from .trace import STAGES, Trace
from .weights import AttentionWeights

SCHEMA_VERSION = 1


class Array(BaseModel):
    """A row-major array: `data` holds prod(shape) numbers; null stands for -inf (a masked score)."""

    shape: list[int]
    data: list[float | None]


class ConfigModel(BaseModel):
    d_model: int
    n_heads: int
    n_kv_heads: int
    d_head: int
    d_v: int
    causal: bool
    bias: bool
    kind: Literal["MHA", "GQA", "MQA"]


class StageModel(BaseModel):
    name: str
    shape: str
    formula: str
    meaning: str


class PageStageModel(BaseModel):
    id: str
    title: str
    trace_stages: list[str]
    latex: str
    mathml: str
    explanation: str


class Note(BaseModel):
    id: str
    text: str


class KVCacheModel(BaseModel):
    kind: str
    n_kv_heads: int
    numbers_per_token: int
    numbers: int
    bytes_per_token: dict[str, int]
    bytes: dict[str, int]


class CostsModel(BaseModel):
    n: int
    multiply_adds: dict[str, int]
    attention_entries: int
    kv_cache: KVCacheModel
    kv_cache_mha: KVCacheModel
    kv_cache_mqa: KVCacheModel


class TracePayload(BaseModel):
    schema_version: Literal[1] = SCHEMA_VERSION
    config: ConfigModel
    tokens: list[str]
    query: int = Field(description="index of the query token the view starts from")
    kv_group: list[int] = Field(description="head i reads key/value head kv_group[i]")
    stage_table: list[StageModel] = Field(description="name, shape and formula of every recorded stage, in order")
    stages: dict[str, Array]
    weights: dict[str, Array] = Field(description="W_Q, W_K, W_V, W_O and biases, per head")
    page_stages: list[PageStageModel]
    notes: list[Note]
    costs: CostsModel


def array(a: np.ndarray) -> Array:
    flat = np.asarray(a, dtype=np.float64).ravel()
    data = flat.tolist()
    if not np.isfinite(flat).all():
        data = [None if v == -np.inf else v for v in data]
    return Array.model_construct(shape=list(a.shape), data=data)


def trace_payload(t: Trace, tokens: list[str], weights: AttentionWeights, query: int = 0) -> TracePayload:
    config = t.config
    return TracePayload(
        config=ConfigModel(**config.to_dict(), kind=config.kind),
        tokens=list(tokens),
        query=query,
        kv_group=list(config.kv_group),
        stage_table=[StageModel(**asdict(s)) for s in STAGES if s.name in t.stages],
        stages={name: array(a) for name, a in t.stages.items()},
        weights={name: array(a) for name, a in weights.arrays().items()},
        page_stages=[
            PageStageModel(**asdict(s) | {"trace_stages": list(s.trace_stages)}, mathml=mathml(s.latex))
            for s in page_stages(config)
        ],
        notes=[Note(id=i, text=text) for i, text in NOTES],
        costs=CostsModel(**asdict(costs(config, t.n))),
    )


def payload_arrays(payload: TracePayload) -> dict[str, np.ndarray]:
    """Back from JSON to NumPy, for tests and the widget's `trace` property."""
    out = {}
    for name, a in payload.stages.items():
        flat = np.array([-np.inf if v is None else v for v in a.data], dtype=np.float64)
        out[name] = flat.reshape(a.shape)
    return out
