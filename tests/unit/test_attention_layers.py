"""attention_layers(): a stack of layers with row-wise steps around attention, as a real model runs
the layers before the traced one. Its numbers are attention()'s, layer by layer; only the work is
grouped otherwise (by blocks of rows, on every core from PARALLEL_ROWS tokens on)."""

from __future__ import annotations

import numpy as np
import pytest

from mha_explorer.config import AttentionConfig, ConfigError
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


def test_numbers_past_the_range_after_attention_are_said_as_that_step():
    config = AttentionConfig(d_model=4, n_heads=2)
    layers = [(AttentionWeights.random(config, seed=s, dtype=np.float32), config) for s in range(2)]
    x = np.ones((100, 4), np.float32)
    for last in (0, 1):  # in the stack's last layer too, where no layer follows to notice
        def after(i, h, out, last=last):
            grow = np.float32(1e30) if i == last else np.float32(1)
            return (h + out) * grow * grow  # an MLP whose numbers outgrow float32

        with pytest.raises(Overflow, match=r"what the layer does after attention \(norms, MLP, residual\) goes past the largest float32"):
            attention_layers(x, layers[: last + 1], lambda i, h: h, after)


def test_a_stack_refuses_what_attention_refuses_and_takes_no_layers():
    config = AttentionConfig(d_model=4, n_heads=2)
    w = AttentionWeights.random(config, seed=0, dtype=np.float32)
    keep = lambda i, h: h  # noqa: E731
    add = lambda i, h, out: h + out  # noqa: E731
    assert attention_layers(np.ones((3, 4)), [], keep, add) == []
    with pytest.raises(ConfigError, match=r"h has shape \(3, 5\); the first layer needs \(n, 4\)"):
        attention_layers(np.ones((3, 5)), [(w, config)], keep, add)
    with pytest.raises(ConfigError, match="make float16; attention computes in float32 or float64"):
        attention_layers(np.ones((3, 4), np.float16), [(w.astype(np.float16), config)], keep, add)
    with pytest.raises(ConfigError, match="W_Q"):  # a weight that is not finite is named
        attention_layers(np.ones((3, 4)), [(AttentionWeights(**w.arrays() | {"W_Q": np.full((2, 4, 2), np.nan)}), config)], keep, add)
