"""What a configuration costs at sequence length n: arithmetic, attention entries, KV cache."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .config import AttentionConfig, ConfigError, expect_config

BYTES = {"float16": 2, "float32": 4}


@dataclass(frozen=True)
class KVCache:
    kind: str  # MHA, GQA or MQA
    n_kv_heads: int
    numbers_per_token: int  # per layer: one key (d_head) and one value (d_v) per K/V head
    tokens: int  # whose keys and values are kept: n, or at most the sliding window
    numbers: int  # for those tokens
    bytes_per_token: dict[str, int]
    bytes: dict[str, int]


@dataclass(frozen=True)
class Costs:
    n: int
    multiply_adds: dict[str, int]  # per stage, dense (a causal mask skips nothing here)
    attention_entries: int  # h * n^2 numbers in a materialized attention matrix
    kv_cache: KVCache  # this config
    kv_cache_mha: KVCache  # the same widths with one K/V head per query head
    kv_cache_mqa: KVCache  # the same widths with a single shared K/V head


def kv_cache(config: AttentionConfig, n: int) -> KVCache:
    """The layer's KV cache after n tokens, as a causal decoder generating text keeps it: a layer
    without the causal mask sees every token at once and keeps none, and the page gives these
    numbers as what it would keep as one. A sliding-window layer keeps only the last `window`
    tokens' keys and values, the keys the newest query reads (its own among them): no later query
    reads the older ones. (A cache that keeps between steps only what the next query needs besides
    its own key, as transformers' dynamic one, holds window - 1.)"""
    per_token = config.n_kv_heads * (config.d_head + config.d_v)
    kept = n if config.sliding_window is None else min(n, config.sliding_window)
    return KVCache(
        kind=config.kind,
        n_kv_heads=config.n_kv_heads,
        numbers_per_token=per_token,
        tokens=kept,
        numbers=per_token * kept,
        bytes_per_token={t: per_token * b for t, b in BYTES.items()},
        bytes={t: per_token * kept * b for t, b in BYTES.items()},
    )


def costs(config: AttentionConfig, n: int) -> Costs:
    """What the layer costs on n tokens: multiply-adds per stage, the entries of its attention
    matrices, and its KV cache beside MHA's and MQA's of the same widths."""
    config = expect_config(config, "costs(config, n)")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise ConfigError(f"n={n!r} must be a whole number of tokens, such as 128")
    if n < 1:
        raise ConfigError(f"n={n} must be at least 1")
    n = int(n)  # a NumPy integer too: the counts are plain ints, as JSON takes them
    c = config
    h, g, d, e, f = c.n_heads, c.n_kv_heads, c.d_model, c.d_head, c.d_v
    multiply_adds = {
        "q": n * d * h * e,
        "k": n * d * g * e,
        "v": n * d * g * f,
        # the stages some layers add, on every q and k row: the squares summed for each root mean
        # square; each component turned by its angle (two multiplies and an add)
        **({"qk_norm": (h + g) * n * e} if c.qk_norm else {}),
        **({"rope": (h + g) * n * e} if c.rope_theta is not None else {}),
        "scores": h * n * n * e,
        "scaled": h * n * n,  # one multiply per score
        "weights": h * n * n,  # one exp and one divide per entry
        "z": h * n * n * f,
        "output": n * h * f * d,
    }
    return Costs(
        n=n,
        multiply_adds=multiply_adds,
        attention_entries=h * n * n,
        kv_cache=kv_cache(c, n),
        kv_cache_mha=kv_cache(replace(c, n_kv_heads=h), n),
        kv_cache_mqa=kv_cache(replace(c, n_kv_heads=1), n),
    )
