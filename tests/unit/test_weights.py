"""AttentionWeights: shape checks, seeded init, packed layout, head split and merge."""

from __future__ import annotations

import dataclasses

import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mha_explorer.config import AttentionConfig, ConfigError
from mha_explorer.weights import AttentionWeights, pack_heads, unpack_heads, weight_shapes

from ._support import PROPERTY, configs

pytestmark = pytest.mark.unit

GQA_BIAS = AttentionConfig(d_model=6, n_heads=4, n_kv_heads=2, d_head=3, d_v=2, bias=True)


def test_weight_shapes_follow_the_config():
    assert weight_shapes(GQA_BIAS) == {
        "W_Q": (4, 6, 3),
        "W_K": (2, 6, 3),
        "W_V": (2, 6, 2),
        "W_O": (8, 6),
        "b_Q": (4, 3),
        "b_K": (2, 3),
        "b_V": (2, 2),
        "b_O": (6,),
    }
    assert set(weight_shapes(AttentionConfig(d_model=6, n_heads=2))) == {"W_Q", "W_K", "W_V", "W_O"}


def test_check_names_a_missing_bias():
    w = AttentionWeights.random(AttentionConfig(d_model=6, n_heads=4, n_kv_heads=2, d_head=3, d_v=2))
    with pytest.raises(ConfigError) as err:
        w.check(GQA_BIAS)
    assert str(err.value) == "b_Q is missing: bias=True needs an array of shape (4, 3)"


def test_check_names_a_missing_projection_without_blaming_the_bias():
    config = AttentionConfig(d_model=6, n_heads=2)
    w = dataclasses.replace(AttentionWeights.random(config), W_K=None)
    with pytest.raises(ConfigError) as err:
        w.check(config)
    assert str(err.value) == "W_K is missing: every layer has an array of shape (2, 6, 3)"


def test_check_names_the_array_with_the_wrong_shape():
    good = AttentionWeights.random(GQA_BIAS).arrays()
    bad = AttentionWeights(**(good | {"W_V": np.zeros((2, 6, 3))}))
    with pytest.raises(ConfigError) as err:
        bad.check(GQA_BIAS)
    assert str(err.value) == "W_V has shape (2, 6, 3); this config needs (2, 6, 2)"


def test_check_refuses_a_bias_the_config_does_not_have():
    config = AttentionConfig(d_model=4, n_heads=2)
    w = AttentionWeights(**AttentionWeights.random(config).arrays(), b_O=np.zeros(4))
    with pytest.raises(ConfigError) as err:
        w.check(config)
    assert str(err.value) == "b_O is given but bias=False: set bias=True or drop b_O"


def test_random_weights_fit_their_config():
    w = AttentionWeights.random(GQA_BIAS, seed=1)
    w.check(GQA_BIAS)
    for name, a in w.arrays().items():
        assert a.dtype == np.float64, name
        fan_in = 4 * 2 if name == "W_O" else 6  # W_O reads h*d_v numbers, the rest read d_model
        assert np.abs(a).max() <= 1 / np.sqrt(fan_in), name


def test_random_is_deterministic_per_seed_and_differs_across_seeds():
    a, b, c = (AttentionWeights.random(GQA_BIAS, seed=s) for s in (7, 7, 8))
    for name in a.arrays():
        np.testing.assert_array_equal(a.arrays()[name], b.arrays()[name])
        assert not np.array_equal(a.arrays()[name], c.arrays()[name]), name


def test_random_default_seed_is_reproducible():
    a, b = AttentionWeights.random(GQA_BIAS), AttentionWeights.random(GQA_BIAS)
    for name in a.arrays():
        np.testing.assert_array_equal(a.arrays()[name], b.arrays()[name])


def test_random_and_astype_honour_the_dtype():
    w = AttentionWeights.random(GQA_BIAS, seed=0, dtype=np.float32)
    assert {a.dtype for a in w.arrays().values()} == {np.dtype(np.float32)}
    back = w.astype(np.float64)
    assert {a.dtype for a in back.arrays().values()} == {np.dtype(np.float64)}
    for name, a in w.arrays().items():
        np.testing.assert_array_equal(back.arrays()[name], a)


def test_arrays_lists_only_what_is_present():
    config = AttentionConfig(d_model=4, n_heads=2)
    assert list(AttentionWeights.random(config).arrays()) == ["W_Q", "W_K", "W_V", "W_O"]
    assert list(AttentionWeights.random(GQA_BIAS).arrays()) == ["W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O"]


# --- packed layout ---------------------------------------------------------


def test_packed_layout_by_hand():
    """in_proj_weight row r, column m multiplies x[m] into packed output r (torch computes x @ W.T)."""
    config = AttentionConfig(d_model=4, n_heads=2, bias=True)
    w = AttentionWeights.random(config, seed=2)
    p = w.to_packed(config)
    assert p["in_proj_weight"].shape == (12, 4)
    assert p["out_proj.weight"].shape == (4, 4)
    for i in range(2):  # head i's q, k, v columns sit at rows i*2..i*2+1 of each third
        for j in range(2):
            np.testing.assert_array_equal(p["in_proj_weight"][0 + 2 * i + j], w.W_Q[i][:, j])
            np.testing.assert_array_equal(p["in_proj_weight"][4 + 2 * i + j], w.W_K[i][:, j])
            np.testing.assert_array_equal(p["in_proj_weight"][8 + 2 * i + j], w.W_V[i][:, j])
            assert p["in_proj_bias"][2 * i + j] == w.b_Q[i, j]
            assert p["in_proj_bias"][4 + 2 * i + j] == w.b_K[i, j]
            assert p["in_proj_bias"][8 + 2 * i + j] == w.b_V[i, j]
    np.testing.assert_array_equal(p["out_proj.weight"], w.W_O.T)
    np.testing.assert_array_equal(p["out_proj.bias"], w.b_O)


def test_packed_projection_equals_per_head_projection():
    config = AttentionConfig(d_model=6, n_heads=3, bias=True)
    w = AttentionWeights.random(config, seed=4)
    x = np.random.default_rng(4).standard_normal((5, 6))
    p = w.to_packed(config)
    qkv = x @ p["in_proj_weight"].T + p["in_proj_bias"]  # (n, 3*d_model), as torch computes it
    q_packed = qkv[:, :6]
    for i in range(3):
        np.testing.assert_allclose(q_packed[:, 2 * i : 2 * i + 2], x @ w.W_Q[i] + w.b_Q[i], rtol=1e-13, atol=1e-13)


def test_packed_qkv_projects_every_head_and_is_kept_only_for_frozen_weights():
    w = AttentionWeights.random(GQA_BIAS, seed=6)
    x = np.random.default_rng(6).standard_normal((5, 6))
    W, b = w.packed_qkv()
    assert W.shape == (6, 4 * 3 + 2 * 3 + 2 * 2)
    qkv = x @ W + b
    np.testing.assert_allclose(qkv[:, 3:6], x @ w.W_Q[1] + w.b_Q[1], rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(qkv[:, 12 + 3 : 12 + 6], x @ w.W_K[1] + w.b_K[1], rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(qkv[:, 18 + 2 : 18 + 4], x @ w.W_V[1] + w.b_V[1], rtol=1e-13, atol=1e-13)

    # weights a caller may edit are packed afresh: an edit shows at once
    w.W_Q[0, 0, 0] += 1.0
    assert w.packed_qkv()[0][0, 0] == w.W_Q[0, 0, 0]
    assert w.packed_qkv()[0] is not w.packed_qkv()[0]

    frozen = AttentionWeights.random(GQA_BIAS, seed=6).frozen()
    assert frozen.packed_qkv()[0] is frozen.packed_qkv()[0]
    with pytest.raises(ValueError, match="read-only"):
        frozen.W_Q[0, 0, 0] = 1.0
    with pytest.raises(ValueError, match="read-only"):
        frozen.packed_qkv()[1][0] = 1.0


@pytest.mark.parametrize(
    "config",
    [
        AttentionConfig(d_model=8, n_heads=4, n_kv_heads=2),
        AttentionConfig(d_model=8, n_heads=4, d_v=3),
        AttentionConfig(d_model=8, n_heads=4, d_head=3),
    ],
    ids=["gqa", "d_v-differs", "h*d_head-not-d_model"],
)
def test_unpackable_configs_are_refused_with_the_reason(config):
    w = AttentionWeights.random(config)
    with pytest.raises(ConfigError, match="the packed layout needs MHA with n_heads \\* d_head = d_model and d_v = d_head"):
        w.to_packed(config)


def test_from_packed_refuses_a_wrong_in_proj_shape():
    config = AttentionConfig(d_model=4, n_heads=2)
    with pytest.raises(ConfigError, match=r"in_proj_weight has shape \(8, 4\); this config needs \(12, 4\)"):
        AttentionWeights.from_packed({"in_proj_weight": np.zeros((8, 4)), "out_proj.weight": np.zeros((4, 4))}, config)


def test_from_packed_names_the_arrays_it_lacks():
    config = AttentionConfig(d_model=4, n_heads=2, bias=True)
    packed = AttentionWeights.random(config).to_packed(config)
    del packed["out_proj.bias"]
    with pytest.raises(ConfigError, match=r"the packed weights lack out_proj.bias: give in_proj_weight, out_proj.weight, in_proj_bias, out_proj.bias"):
        AttentionWeights.from_packed(packed, config)


def test_from_packed_refuses_biases_a_config_without_bias_would_drop():
    """nn.MultiheadAttention has biases by default: read with bias=False they were dropped without a
    word, and every output changed. Zero biases change nothing and are taken."""
    with_bias = AttentionConfig(d_model=4, n_heads=2, bias=True)
    packed = AttentionWeights.random(with_bias, seed=1).to_packed(with_bias)
    packed["in_proj_bias"][:] = 0
    without = AttentionConfig(d_model=4, n_heads=2)
    with pytest.raises(ConfigError, match=r"^the packed weights have biases that are not zero \(out_proj.bias\) and the config has bias=False: give a config with bias=True"):
        AttentionWeights.from_packed(packed, without)
    packed["out_proj.bias"][:] = 0
    w = AttentionWeights.from_packed(packed, without)
    assert w.b_Q is None and w.b_O is None


# --- split and merge heads -------------------------------------------------


@PROPERTY
@given(h=st.integers(1, 6), d_model=st.integers(1, 9), d_head=st.integers(1, 5), seed=st.integers(0, 2**16))
def test_split_then_merge_heads_is_the_identity(h, d_model, d_head, seed):
    rng = np.random.default_rng(seed)
    per_head = rng.standard_normal((h, d_model, d_head))
    packed = pack_heads(per_head)
    assert packed.shape == (d_model, h * d_head)
    for i in range(h):  # head i's columns, side by side in head order
        np.testing.assert_array_equal(packed[:, i * d_head : (i + 1) * d_head], per_head[i])
    np.testing.assert_array_equal(unpack_heads(packed, h), per_head)
    side_by_side = rng.standard_normal((d_model, h * d_head))
    np.testing.assert_array_equal(pack_heads(unpack_heads(side_by_side, h)), side_by_side)


@PROPERTY
@given(config=configs(), seed=st.integers(0, 2**16))
def test_random_weights_fit_any_config(config, seed):
    w = AttentionWeights.random(config, seed=seed)
    w.check(config)
    assert {k: a.shape for k, a in w.arrays().items()} == weight_shapes(config)


@pytest.mark.parametrize("seed", [-1, 1.5, True, "0"])
def test_a_seed_numpy_cannot_use_is_refused_with_what_to_give(seed):
    with pytest.raises(ConfigError, match=rf"seed={seed!r} cannot seed the random values; give a whole number, 0 or more"):
        AttentionWeights.random(GQA_BIAS, seed=seed)
    np.testing.assert_array_equal(AttentionWeights.random(GQA_BIAS, seed=np.int64(3)).W_Q, AttentionWeights.random(GQA_BIAS, seed=3).W_Q)


@pytest.mark.parametrize("kind", ["kdim", "add_bias_kv"])
def test_from_packed_refuses_a_module_whose_attention_is_not_one_inputs(kind):
    """kdim or vdim other than embed_dim: q, k and v come from two inputs, in three weights that
    were said to be missing as if the dict were damaged. add_bias_kv: a learned key and value
    appended to every sequence, which were read past without a word (every output changed)."""
    import torch

    module = torch.nn.MultiheadAttention(8, 2, kdim=6, vdim=6) if kind == "kdim" else torch.nn.MultiheadAttention(8, 2, add_bias_kv=True)
    said = "in place of in_proj_weight: an nn.MultiheadAttention made with kdim or vdim other than embed_dim" if kind == "kdim" else "hold bias_k and bias_v (add_bias_kv=True)"
    with pytest.raises(ConfigError, match=re.escape(said)):
        AttentionWeights.from_packed(module.state_dict(), AttentionConfig(d_model=8, n_heads=2, bias=True))


def test_from_packed_takes_a_live_modules_parameters_and_bfloat16():
    """The parameters of a module being trained (they require grad) and a bfloat16 state_dict are
    taken as their numbers: NumPy cannot read either as it is."""
    import torch

    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(8, 2)
    config = AttentionConfig(d_model=8, n_heads=2, bias=True)
    reference = {name: t.detach().numpy() for name, t in mha.state_dict().items()}
    expected = AttentionWeights.from_packed(reference, config)
    live = AttentionWeights.from_packed(dict(mha.named_parameters()), config)
    assert all(np.array_equal(live.arrays()[name], a) for name, a in expected.arrays().items())
    half = AttentionWeights.from_packed({name: t.bfloat16() for name, t in mha.state_dict().items()}, config)
    assert half.W_Q.dtype == np.float32  # bfloat16 widened, exactly: every bfloat16 is a float32
    np.testing.assert_allclose(half.W_Q, expected.W_Q, rtol=2**-8)  # bfloat16 keeps 8 bits of mantissa


def test_trace_weights_and_the_widget_take_tensors_that_require_grad_or_are_bfloat16():
    """Hidden states taken from a model are often bfloat16, or still part of its autograd graph:
    trace(), AttentionWeights and Explorer.from_config take their numbers, as from_packed does,
    and a trace's x is its own copy, not the tensor's memory."""
    import torch

    from mha_explorer import Explorer
    from mha_explorer.trace import trace

    config = AttentionConfig(d_model=8, n_heads=2)
    weights = AttentionWeights.random(config, seed=0)
    x = torch.randn(4, 8, dtype=torch.float64, requires_grad=True)
    expected = trace(x.detach().numpy().copy(), weights, config)
    np.testing.assert_array_equal(trace(x, weights, config)["output"], expected["output"])
    half = x.detach().bfloat16()
    np.testing.assert_array_equal(trace(half, weights, config)["x"], half.float().numpy())  # widened exactly
    tensors = AttentionWeights(**{name: torch.tensor(a, requires_grad=True).bfloat16() for name, a in weights.arrays().items()})
    assert tensors.W_Q.dtype == np.float32 and np.allclose(tensors.W_Q, weights.W_Q, rtol=2**-8)
    assert Explorer.from_config({"d_model": 8, "n_heads": 2}, x=x[:3]).trace["x"].shape == (3, 8)
    plain = torch.zeros(2, 8, dtype=torch.float64)
    t = trace(plain, weights, config)
    plain += 1
    assert (t["x"] == 0).all()


def test_arguments_given_in_the_wrong_order_or_of_the_wrong_kind_say_so():
    from mha_explorer import costs
    from mha_explorer.trace import trace

    config = AttentionConfig(d_model=8, n_heads=2)
    weights = AttentionWeights.random(config, seed=0)
    x = np.ones((3, 8))
    for call, said in (
        (lambda: trace(x, config, weights), r"trace\(x, weights, config\) takes the weights before the config: swap them"),
        (lambda: trace(x, weights, "gqa"), r'config is str, not an AttentionConfig: give PRESETS\["gqa"\]'),
        (lambda: trace(x, {"W_Q": 1}, config), r"weights is dict, not AttentionWeights: give AttentionWeights\(W_Q=..."),
        (lambda: costs("mqa", 5), r'costs\(config, n\): config is str, not an AttentionConfig: give PRESETS\["mqa"\]'),
        (lambda: AttentionWeights.from_packed(config, {}), r"from_packed\(packed, config\) takes the packed weights before the config: swap them"),
        (lambda: AttentionWeights.from_packed([], config), r"packed is list; give a dict such as nn.MultiheadAttention's state_dict\(\)"),
        (lambda: AttentionWeights.random("gqa", 0), r'AttentionWeights.random\(config, seed\): config is str, not an AttentionConfig: give PRESETS\["gqa"\]'),
        (lambda: AttentionWeights.random({"d_model": 8}, 0), r"config is dict, not an AttentionConfig: give an AttentionConfig\(d_model=..., n_heads=...\)"),
        (lambda: weights.to_packed("mha"), r'to_packed\(config\): config is str, not an AttentionConfig: give PRESETS\["mha"\]'),
        (lambda: weights.check("mha"), r'check\(config\): config is str, not an AttentionConfig: give PRESETS\["mha"\]'),
    ):
        with pytest.raises(ConfigError, match=said):
            call()


def test_weights_print_as_their_shapes_not_their_numbers():
    """A MiniLM layer's weights printed 43 KB of numbers; each array is given by its dtype and shape."""
    config = AttentionConfig(d_model=384, n_heads=12, bias=True)
    shown = repr(AttentionWeights.random(config, seed=0, dtype=np.float32))
    assert shown.startswith("AttentionWeights(W_Q=float32(12, 384, 32), W_K=float32(12, 384, 32), W_V=float32(12, 384, 32), W_O=float32(384, 384), b_Q=float32(12, 32)")
    assert len(shown) < 300 and "array" not in shown
