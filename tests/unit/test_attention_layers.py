"""attention_layers(): a stack of layers with row-wise steps around attention, as a real model runs
the layers before the traced one. Its numbers are attention()'s, layer by layer; only the work is
grouped otherwise (by blocks of rows, on every core from PARALLEL_ROWS tokens on)."""

from __future__ import annotations

import numpy as np
import pytest

from mha_explorer.config import AttentionConfig
from mha_explorer.trace import PARALLEL_ROWS, Overflow, attention, attention_layers
from mha_explorer.weights import AttentionWeights

pytestmark = pytest.mark.unit

CONFIGS = {
    "MHA with biases": AttentionConfig(d_model=16, n_heads=4, d_head=4, bias=True),
    "causal GQA, RoPE": AttentionConfig(d_model=16, n_heads=4, n_kv_heads=2, d_head=8, causal=True, rope_theta=10000.0),
    "MQA, q/k norm, sliding window": AttentionConfig(
        d_model=16, n_heads=4, n_kv_heads=1, d_head=4, d_v=6, causal=True, qk_norm=True, rope_theta=10000.0, sliding_window=5
    ),
}


def before(i: int, h: np.ndarray) -> np.ndarray:  # row-wise, as a pre-norm is
    return h / np.sqrt(np.mean(h * h, axis=-1, keepdims=True) + 1e-6) * (1 + 0.1 * i)


def after(i: int, h: np.ndarray, out: np.ndarray) -> np.ndarray:  # row-wise, as a residual and an MLP are
    return h + np.tanh(out) - 0.05 * i * h


@pytest.mark.parametrize("dtype, tolerance", [(np.float64, 1e-12), (np.float32, 2e-5)])
@pytest.mark.parametrize("n", [5, PARALLEL_ROWS, 300], ids=["short", "rows in parallel", "rows and heads in parallel"])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_a_stack_gives_attentions_numbers_layer_by_layer(name, n, dtype, tolerance):
    config = CONFIGS[name]
    layers = [(AttentionWeights.random(config, seed=s, dtype=dtype), config) for s in range(3)]
    h0 = np.random.default_rng(n).standard_normal((n, config.d_model)).astype(dtype)
    expected, h = [], h0
    for i, (w, c) in enumerate(layers):
        h = after(i, h, attention(before(i, h), w, c))
        expected.append(h)
    got = attention_layers(h0, layers, before, after)
    assert len(got) == len(layers)
    for i, (a, b) in enumerate(zip(got, expected)):
        assert a.shape == (n, config.d_model) and a.dtype == dtype, i
        np.testing.assert_allclose(a, b, rtol=tolerance, atol=tolerance, err_msg=f"layer {i}")
    assert not np.array_equal(got[0], got[1])  # the layers differ: a stack that repeated one would fail above


def test_a_stack_whose_numbers_outgrow_the_dtype_says_which_stage():
    config = AttentionConfig(d_model=4, n_heads=2, bias=True)
    w = AttentionWeights.random(config, seed=1, dtype=np.float32)
    big = AttentionWeights(**w.arrays() | {"W_O": np.full((4, 4), 3e38, np.float32)})  # its output passes float32's range
    x = np.ones((100, 4), np.float32)
    with pytest.raises(Overflow, match="the output stage goes past the largest float32"):
        attention_layers(x, [(w, config), (big, config)], lambda i, h: h, lambda i, h, out: h + out)
    scores = AttentionWeights(**w.arrays() | {"W_Q": np.full((2, 4, 2), 1e30, np.float32)})  # q . k past the range
    with pytest.raises(Overflow, match="the scores stage may go past the largest float32"):
        attention_layers(x, [(w, config), (scores, config)], lambda i, h: h, lambda i, h, out: h + out)
