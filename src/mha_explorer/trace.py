"""The one place that computes attention: every stage, every head, every query.

Shapes use these letters:
    n       tokens (query and key positions)
    d       d_model, the width of each token vector
    h       n_heads (query heads)      g  n_kv_heads (key/value heads)
    e       d_head (width of q and k)  f  d_v (width of v)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .config import AttentionConfig, ConfigError
from .weights import AttentionWeights


@dataclass(frozen=True)
class Stage:
    name: str
    shape: str  # in the letters above
    formula: str  # LaTeX, for the page and the docs
    meaning: str


# The recorded stages, in order. `mask` is present only when the config is causal.
STAGES: tuple[Stage, ...] = (
    Stage("x", "(n, d_model)", r"X", "the input: one row per token"),
    Stage("q", "(n_heads, n, d_head)", r"Q_i = X W_i^Q", "queries, one set per head"),
    Stage("k", "(n_kv_heads, n, d_head)", r"K_g = X W_g^K", "keys, one set per key/value head"),
    Stage("v", "(n_kv_heads, n, d_v)", r"V_g = X W_g^V", "values, one set per key/value head"),
    Stage("scores", "(n_heads, n, n)", r"S_i = Q_i K_{g(i)}^\top", "every query dotted with every key"),
    Stage("scaled", "(n_heads, n, n)", r"S_i / \sqrt{d_{head}}", "scores divided by the square root of d_head"),
    Stage("mask", "(n_heads, n, n)", r"S_i / \sqrt{d_{head}} + M", "scaled scores with later keys set to -inf"),
    Stage("weights", "(n_heads, n, n)", r"A_i = \mathrm{softmax}(\cdot)", "softmax over keys: each row sums to 1"),
    Stage("z", "(n_heads, n, d_v)", r"Z_i = A_i V_{g(i)}", "each head's weighted sum of value rows"),
    Stage("concat", "(n, n_heads*d_v)", r"[Z_0 \mid \dots \mid Z_{h-1}]", "head outputs side by side, in head order"),
    Stage("output", "(n, d_model)", r"Y = \mathrm{concat}\, W^O", "the output projection"),
    Stage(
        "contributions",
        "(n_heads, n, d_model)",
        r"C_i = Z_i W^O_{[i]}",
        "head i's share of the output: z_i times its rows of W^O",
    ),
)
STAGE_NAMES: tuple[str, ...] = tuple(s.name for s in STAGES)


@dataclass(frozen=True, eq=False)
class Trace:
    config: AttentionConfig
    stages: dict[str, np.ndarray]  # stage name -> array, in STAGES order

    def __getitem__(self, name: str) -> np.ndarray:
        return self.stages[name]

    @property
    def kv_group(self) -> np.ndarray:
        return np.asarray(self.config.kv_group)  # (n_heads,): head i reads K/V head kv_group[i]

    @property
    def n(self) -> int:
        return self.stages["x"].shape[0]


def trace(x: np.ndarray, weights: AttentionWeights, config: AttentionConfig) -> Trace:
    """Run one attention layer on x and record every stage (see STAGES)."""
    x = np.asarray(x)
    if x.ndim != 2 or x.shape[1] != config.d_model:
        raise ConfigError(f"x has shape {x.shape}; this config needs (n, {config.d_model}) with n >= 1")
    if x.shape[0] < 1:
        raise ConfigError("x has no tokens: give at least one row")
    weights.check(config)
    w = weights
    n = x.shape[0]
    group = np.asarray(config.kv_group)

    q = x @ w.W_Q  # (h, n, e): every head projects the full input
    k = x @ w.W_K  # (g, n, e)
    v = x @ w.W_V  # (g, n, f)
    if config.bias:
        q = q + w.b_Q[:, None, :]
        k = k + w.b_K[:, None, :]
        v = v + w.b_V[:, None, :]

    k_h, v_h = (k, v) if config.n_kv_heads == config.n_heads else (k[group], v[group])  # (h, n, e), (h, n, f)
    scores = q @ k_h.transpose(0, 2, 1)  # (h, n, n): row = query, column = key
    scaled = scores * (1.0 / np.sqrt(config.d_head))  # (h, n, n)
    stages = {"x": x, "q": q, "k": k, "v": v, "scores": scores, "scaled": scaled}

    logits = scaled
    if config.causal:
        later = np.triu(np.ones((n, n), dtype=bool), k=1)  # (n, n): key after query
        logits = np.where(later, -np.inf, scaled)  # (h, n, n)
        stages["mask"] = logits

    # softmax over keys; subtracting the row max changes nothing but avoids overflow
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))  # (h, n, n)
    weights_ = e / e.sum(axis=-1, keepdims=True)
    z = weights_ @ v_h  # (h, n, f)
    concat = z.transpose(1, 0, 2).reshape(n, config.n_heads * config.d_v)  # (n, h*f)
    output = concat @ w.W_O  # (n, d)
    contributions = z @ w.W_O.reshape(config.n_heads, config.d_v, config.d_model)  # (h, n, d)
    if config.bias:
        output = output + w.b_O

    stages |= {"weights": weights_, "z": z, "concat": concat, "output": output, "contributions": contributions}
    return Trace(config=config, stages=stages)
