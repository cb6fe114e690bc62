"""Shared pieces of the unit tier: hypothesis strategies, a loop-by-loop reference, shape strings.

Nothing here imports torch: the unit tier checks the NumPy core against itself
(invariants) and against `naive_attention`, written from DESIGN.md's formulas
with plain Python loops, not from trace.py.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np
from hypothesis import settings
from hypothesis import strategies as st

from mha_explorer.config import AttentionConfig
from mha_explorer.weights import AttentionWeights

# 60 examples per property by default, the same ones on every run (see tests/conftest.py). For a
# hunt: MHA_HYPOTHESIS_EXAMPLES=2000 MHA_HYPOTHESIS_RANDOM=1 draws many fresh ones.
PROPERTY = settings(max_examples=int(os.environ.get("MHA_HYPOTHESIS_EXAMPLES", "60")), deadline=None)


def divisors(k: int) -> list[int]:
    return [d for d in range(1, k + 1) if k % d == 0]


@st.composite
def configs(draw, causal: bool | None = None, grouped: bool = False) -> AttentionConfig:
    """Any valid config: d_model 1..16, n_heads 1..6, n_kv_heads dividing it, d_head and d_v 1..8.

    grouped=True: only GQA and MQA (fewer key/value heads than query heads).
    """
    n_heads = draw(st.integers(2 if grouped else 1, 6))
    kv_choices = divisors(n_heads)[:-1] if grouped else divisors(n_heads)
    return AttentionConfig(
        d_model=draw(st.integers(1, 16)),
        n_heads=n_heads,
        n_kv_heads=draw(st.sampled_from(kv_choices)),
        d_head=draw(st.integers(1, 8)),
        d_v=draw(st.integers(1, 8)),
        causal=draw(st.booleans()) if causal is None else causal,
        bias=draw(st.booleans()),
    )


@st.composite
def packable_configs(draw) -> AttentionConfig:
    """MHA with n_heads * d_head = d_model <= 16 and d_v = d_head: what torch's packed layout can hold."""
    n_heads = draw(st.integers(1, 6))
    d_head = draw(st.integers(1, 16 // n_heads))
    return AttentionConfig(
        d_model=n_heads * d_head,
        n_heads=n_heads,
        causal=draw(st.booleans()),
        bias=draw(st.booleans()),
    )


@dataclass(frozen=True)
class Case:
    config: AttentionConfig
    x: np.ndarray  # (n, d_model)
    weights: AttentionWeights

    def __repr__(self) -> str:  # what hypothesis prints for a failing example
        return f"Case({self.config!r}, n={self.x.shape[0]}, x_scale={np.abs(self.x).max():.3g})"


@st.composite
def cases(draw, config_strategy=None) -> Case:
    """A config, seeded random weights and an input of 1..10 tokens, float64."""
    config = draw(configs() if config_strategy is None else config_strategy)
    n = draw(st.integers(1, 10))
    seed = draw(st.integers(0, 2**32 - 1))
    scale = draw(st.sampled_from([0.01, 1.0, 30.0]))  # 30 saturates the softmax
    rng = np.random.default_rng(seed)
    x = scale * rng.standard_normal((n, config.d_model))
    return Case(config, x, AttentionWeights.random(config, seed=seed + 1))


def group_of(head: int, config: AttentionConfig) -> int:
    """DESIGN.md: g = i // (n_heads / n_kv_heads)."""
    return head // (config.n_heads // config.n_kv_heads)


def naive_attention(x, weights: AttentionWeights, config: AttentionConfig) -> dict[str, np.ndarray]:
    """Attention written out one number at a time, straight from DESIGN.md."""
    c, w = config, weights
    n = len(x)

    def project(W, b, heads, width):
        out = np.zeros((heads, n, width))
        for i in range(heads):
            for t in range(n):
                for j in range(width):
                    out[i, t, j] = sum(x[t][m] * W[i][m][j] for m in range(c.d_model)) + (b[i][j] if c.bias else 0.0)
        return out

    q = project(w.W_Q, w.b_Q, c.n_heads, c.d_head)
    k = project(w.W_K, w.b_K, c.n_kv_heads, c.d_head)
    v = project(w.W_V, w.b_V, c.n_kv_heads, c.d_v)
    scores = np.zeros((c.n_heads, n, n))
    weights_ = np.zeros((c.n_heads, n, n))
    z = np.zeros((c.n_heads, n, c.d_v))
    for i in range(c.n_heads):
        g = group_of(i, c)
        for t in range(n):
            for s in range(n):
                scores[i, t, s] = sum(q[i, t, j] * k[g, s, j] for j in range(c.d_head))
            visible = range(t + 1) if c.causal else range(n)
            top = max(scores[i, t, s] / math.sqrt(c.d_head) for s in visible)
            e = {s: math.exp(scores[i, t, s] / math.sqrt(c.d_head) - top) for s in visible}
            total = sum(e.values())
            for s in visible:
                weights_[i, t, s] = e[s] / total
            for j in range(c.d_v):
                z[i, t, j] = sum(weights_[i, t, s] * v[g, s, j] for s in range(n))
    output = np.zeros((n, c.d_model))
    for t in range(n):
        for m in range(c.d_model):
            output[t, m] = sum(
                z[i, t, j] * w.W_O[i * c.d_v + j][m] for i in range(c.n_heads) for j in range(c.d_v)
            ) + (w.b_O[m] if c.bias else 0.0)
    return {"q": q, "k": k, "v": v, "scores": scores, "weights": weights_, "z": z, "output": output}


def shape_of(shape: str, config: AttentionConfig, n: int) -> tuple[int, ...]:
    """Evaluate a STAGES shape string such as "(n, n_heads*d_v)" with this config's numbers."""
    sizes = {
        "n": n,
        "d_model": config.d_model,
        "n_heads": config.n_heads,
        "n_kv_heads": config.n_kv_heads,
        "d_head": config.d_head,
        "d_v": config.d_v,
    }
    assert shape.startswith("(") and shape.endswith(")"), shape
    dims = []
    for part in shape[1:-1].split(","):
        factors = [f.strip() for f in part.split("*")]
        unknown = [f for f in factors if f not in sizes]
        assert not unknown, f"shape string {shape!r} uses {unknown}; known sizes: {sorted(sizes)}"
        dims.append(math.prod(sizes[f] for f in factors))
    return tuple(dims)
