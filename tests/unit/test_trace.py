"""trace(): agreement with a loop-by-loop reference, input checks, dtypes, purity."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from mha_explorer.config import AttentionConfig, ConfigError
from mha_explorer.trace import attention, trace
from mha_explorer.weights import AttentionWeights

from ._support import naive_attention

pytestmark = pytest.mark.unit

CONFIGS = {
    "mha": AttentionConfig(d_model=4, n_heads=2),
    "mha-bias-causal": AttentionConfig(d_model=6, n_heads=3, bias=True, causal=True),
    "gqa": AttentionConfig(d_model=6, n_heads=6, n_kv_heads=3, d_head=2, d_v=3),
    "mqa-causal": AttentionConfig(d_model=5, n_heads=4, n_kv_heads=1, d_head=3, d_v=2, causal=True),
    "gqa-bias": AttentionConfig(d_model=3, n_heads=4, n_kv_heads=2, d_head=5, d_v=1, bias=True),
}


@pytest.mark.parametrize("n", [1, 6], ids=lambda n: f"n={n}")
@pytest.mark.parametrize("config", CONFIGS.values(), ids=CONFIGS.keys())
def test_trace_matches_a_loop_by_loop_reference(config, n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal((n, config.d_model))
    w = AttentionWeights.random(config, seed=n)
    t = trace(x, w, config)
    ref = naive_attention(x, w, config)
    for name, expected in ref.items():
        np.testing.assert_allclose(t[name], expected, rtol=1e-12, atol=1e-12, err_msg=name)
    np.testing.assert_allclose(t["scaled"], ref["scores"] / np.sqrt(config.d_head), rtol=1e-12, atol=1e-12)


def test_float32_in_float32_out():
    """Every stage of a float32 layer stays float32 (and close to the float64 trace)."""
    config = AttentionConfig(d_model=8, n_heads=4, n_kv_heads=2, causal=True, bias=True)
    w64 = AttentionWeights.random(config, seed=3)
    x64 = np.random.default_rng(3).standard_normal((5, 8))
    t32 = trace(x64.astype(np.float32), w64.astype(np.float32), config)
    t64 = trace(x64, w64, config)
    for name, a in t32.stages.items():
        assert a.dtype == np.float32, f"{name} is {a.dtype}"
        np.testing.assert_allclose(a, t64[name], rtol=1e-4, atol=1e-5, err_msg=name)


def test_trace_does_not_change_its_inputs():
    config = AttentionConfig(d_model=4, n_heads=2, bias=True, causal=True)
    w = AttentionWeights.random(config, seed=1)
    x = np.random.default_rng(1).standard_normal((3, 4))
    before = (x.copy(), {k: a.copy() for k, a in w.arrays().items()})
    trace(x, w, config)
    np.testing.assert_array_equal(x, before[0])
    for k, a in w.arrays().items():
        np.testing.assert_array_equal(a, before[1][k])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_trace_keeps_its_own_x_whatever_the_caller_does_to_theirs_after(dtype):
    """x reused in a notebook (x *= 2) after its trace leaves the trace as it was: its X still
    the one its q, k, v and output came from."""
    config = AttentionConfig(d_model=8, n_heads=2)
    w = AttentionWeights.random(config, seed=2).astype(dtype)
    x = np.random.default_rng(2).standard_normal((3, 8)).astype(dtype)
    t = trace(x, w, config)
    kept = t["x"].copy()
    x *= 2
    np.testing.assert_array_equal(t["x"], kept)
    np.testing.assert_allclose(t["q"], np.einsum("nd,hde->hne", kept, w.W_Q), rtol=1e-5)


def test_same_input_same_trace():
    config = AttentionConfig(d_model=6, n_heads=3, causal=True)
    w = AttentionWeights.random(config, seed=5)
    x = np.random.default_rng(5).standard_normal((4, 6))
    a, b = trace(x, w, config), trace(x.copy(), w, config)
    for name in a.stages:
        np.testing.assert_array_equal(a[name], b[name])


def test_a_list_input_is_accepted():
    config = AttentionConfig(d_model=2, n_heads=1)
    w = AttentionWeights.random(config, seed=0)
    x = [[1.0, 0.0], [0.0, 1.0]]
    np.testing.assert_array_equal(trace(x, w, config)["output"], trace(np.array(x), w, config)["output"])


@pytest.mark.parametrize(
    "shape",
    [(4,), (3, 5), (2, 3, 4), (0, 4)],
    ids=["1-d", "wrong-width", "3-d", "no-tokens"],
)
def test_bad_input_shape_is_a_config_error_naming_the_needed_shape(shape):
    config = AttentionConfig(d_model=4, n_heads=2)
    with pytest.raises(ConfigError) as err:
        trace(np.zeros(shape), AttentionWeights.random(config), config)
    message = str(err.value)
    assert "(n, 4)" in message or "at least one row" in message, message


def test_weights_for_another_config_are_refused():
    small, big = AttentionConfig(d_model=4, n_heads=2), AttentionConfig(d_model=4, n_heads=4)
    with pytest.raises(ConfigError, match=r"W_Q has shape \(2, 4, 2\); this config needs \(4, 4, 1\)"):
        trace(np.zeros((3, 4)), AttentionWeights.random(small), big)


def test_causal_single_token_attends_to_itself():
    config = AttentionConfig(d_model=4, n_heads=2, causal=True)
    t = trace(np.ones((1, 4)), AttentionWeights.random(config), config)
    assert t["weights"].tolist() == [[[1.0]], [[1.0]]]
    np.testing.assert_allclose(t["z"][:, 0, :], t["v"][:, 0, :], rtol=0, atol=1e-15)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf], ids=["nan", "inf", "-inf"])
def test_a_value_of_x_that_is_not_finite_is_a_config_error_naming_it(bad):
    config = AttentionConfig(d_model=4, n_heads=2)
    x = np.ones((3, 4))
    x[1, 2] = x[2, 0] = bad
    with pytest.raises(ConfigError, match=rf"x\[1, 2\] is {bad}; every value of x must be a finite number"):
        trace(x, AttentionWeights.random(config), config)


@pytest.mark.parametrize("bad", [np.nan, np.inf], ids=["nan", "inf"])
def test_a_weight_that_is_not_finite_is_a_config_error_naming_it(bad):
    config = AttentionConfig(d_model=4, n_heads=2)
    w = AttentionWeights.random(config).arrays()
    w["W_K"][1, 0, 0] = bad
    with pytest.raises(ConfigError, match=r"W_K holds NaN or infinite values; every weight must be a finite number"):
        trace(np.ones((3, 4)), AttentionWeights(**w), config)


@pytest.mark.parametrize(
    "x, dtype, stage",
    [(1e200, np.float64, "scores"), (1e20, np.float32, "scores"), (1e155, np.float64, "q")],
    ids=["float64-scores", "float32-scores", "float64-q"],
)
def test_numbers_past_the_dtypes_range_are_said_naming_the_stage_not_carried_on_as_nan(x, dtype, stage):
    """Finite x whose products pass the largest number: a clear error, with no NumPy warning."""
    config = AttentionConfig(d_model=4, n_heads=2)
    w = AttentionWeights.random(config, seed=1).astype(dtype)
    if stage == "q":
        w = AttentionWeights(**w.arrays() | {"W_Q": np.full((2, 4, 2), 1e155)})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning on the way
        with pytest.raises(ConfigError, match=rf"the {stage} stage goes past the largest {np.dtype(dtype)} .*make the largest of them smaller"):
            trace(np.full((3, 4), x, dtype), w, config)


def test_a_score_past_the_range_is_said_even_where_the_output_stays_finite():
    """-inf from an overflow would pass for a masked key: its weight 0, the output finite, and wrong."""
    config = AttentionConfig(d_model=2, n_heads=1, d_head=2, causal=True)
    w = AttentionWeights(W_Q=np.eye(2)[None], W_K=np.array([[[0.0, -1.0], [0.0, 0.0]]]), W_V=np.eye(2)[None], W_O=np.eye(2))
    x = np.array([[1e160, 0.0], [0.0, 1e160]])  # query 1 · key 0 = -1e320
    with pytest.raises(ConfigError, match="the scores stage goes past the largest float64"):
        trace(x, w, config)
    with pytest.raises(ConfigError, match="the scores stage may go past the largest float64"):
        attention(x, w, config)  # the layers before a traced one keep no scores to look at
    np.testing.assert_allclose(attention(x / 1e150, w, config), trace(x / 1e150, w, config)["output"])  # far below: computed


def test_x_or_weights_that_are_not_numbers_are_said_and_lists_of_numbers_are_taken():
    config = AttentionConfig(d_model=4, n_heads=1)
    w = AttentionWeights.random(config, seed=0)
    with pytest.raises(ConfigError, match="x holds text, not numbers"):
        trace([["a", "b", "c", "d"]], w, config)
    with pytest.raises(ConfigError, match="W_O holds Python objects, not numbers"):
        AttentionWeights(**w.arrays() | {"W_O": [[None] * 4] * 4})
    with pytest.raises(ConfigError, match="x holds complex numbers: attention here is over real numbers"):
        trace(np.ones((2, 4)) * 1j, w, config)
    with pytest.raises(ConfigError, match="x is not a rectangular array: give every row the same length"):
        trace([[1, 2, 3, 4], [1, 2]], w, config)
    with pytest.raises(ConfigError, match="W_V holds NaN or infinite values"):  # frozen, they are checked once, there
        AttentionWeights(**w.arrays() | {"W_V": np.full((1, 4, 4), np.nan)}).frozen()
    as_lists = AttentionWeights(**{name: a.tolist() for name, a in w.arrays().items()})
    x = np.arange(8.0).reshape(2, 4) / 8
    np.testing.assert_array_equal(trace(x.tolist(), as_lists, config)["output"], trace(x, w, config)["output"])


def test_float16_is_refused_with_the_cast_to_make_rather_than_giving_nan():
    """e^12 is past float16's largest: the softmax of a float16 layer would be NaN."""
    config = AttentionConfig(d_model=4, n_heads=1)
    w = AttentionWeights.random(config).arrays()
    w = AttentionWeights(**w | {"W_Q": np.full((1, 4, 4), 3.0), "W_K": np.full((1, 4, 4), 3.0)})
    x = np.ones((3, 4), np.float16)
    with pytest.raises(ConfigError, match=r"make float16; trace computes in float32 or float64: cast them"):
        trace(x, AttentionWeights(**{name: a.astype(np.float16) for name, a in w.arrays().items()}), config)
    assert np.isfinite(trace(x.astype(np.float32), w, config)["weights"]).all()


def test_the_repr_of_a_trace_gives_shapes_not_numbers():
    config = AttentionConfig(d_model=64, n_heads=8, causal=True)
    t = trace(np.ones((50, 64)), AttentionWeights.random(config), config)
    text = repr(t)
    assert text.startswith(f"Trace({config!r}, n=50, stages: x=(50, 64), q=(8, 50, 8), k=(8, 50, 8)")
    assert "mask=(8, 50, 50)" in text and text.endswith("contributions=(8, 50, 64))")
    assert len(text) < 600 and "array" not in text


def test_a_stage_the_trace_lacks_is_named_with_those_it_has():
    config = AttentionConfig(d_model=4, n_heads=2)
    t = trace(np.eye(3, 4), AttentionWeights.random(config, seed=0), config)
    assert "mask" not in t and "weights" in t and list(t.keys())[:4] == ["x", "q", "k", "v"]
    assert set(dict(t)) == set(t.stages) and list(t) == list(t.stages) and len(t) == len(t.stages)
    with pytest.raises(KeyError, match="this trace has no 'mask' stage; it has: x, q, k, v, scores"):
        t["mask"]


def test_a_trace_reads_as_a_dict_of_its_stages():
    config = CONFIGS["mha"]
    t = trace(np.eye(3, 4), AttentionWeights.random(config, seed=0), config)
    assert list(t.keys()) == list(t.stages) and [name for name, _ in t.items()] == list(t.stages)
    assert all(a is t[name] for name, a in t.items()) and [id(a) for a in t.values()] == [id(t[name]) for name in t]
