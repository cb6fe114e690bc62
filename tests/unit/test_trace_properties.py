"""Invariants of trace() over configurations hypothesis picks (float64 throughout)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import find, given
from hypothesis import strategies as st

from mha_explorer.config import AttentionConfig
from mha_explorer.trace import trace
from mha_explorer.weights import AttentionWeights

from ._support import PROPERTY, Case, cases, configs, naive_attention, packable_configs

pytestmark = pytest.mark.unit


@PROPERTY
@given(case=cases())
def test_weight_rows_sum_to_one(case: Case):
    w = trace(case.x, case.weights, case.config)["weights"]
    assert (w >= 0).all()
    np.testing.assert_allclose(w.sum(axis=-1), 1.0, rtol=0, atol=1e-12)


@PROPERTY
@given(case=cases(configs(causal=True)))
def test_mask_is_minus_infinity_exactly_above_the_diagonal_and_masked_weights_are_exactly_zero(case: Case):
    t = trace(case.x, case.weights, case.config)
    n = t.n
    above = np.triu(np.ones((n, n), dtype=bool), k=1)  # key position > query position
    mask, scaled, w = t["mask"], t["scaled"], t["weights"]
    assert (mask[:, above] == -np.inf).all()
    np.testing.assert_array_equal(mask[:, ~above], scaled[:, ~above])  # untouched elsewhere
    assert np.isfinite(scaled).all()
    assert (w[:, above] == 0.0).all()
    # each query still spreads weight 1 over itself and earlier keys
    np.testing.assert_allclose(w.sum(axis=-1), 1.0, rtol=0, atol=1e-12)


@PROPERTY
@given(case=cases(configs(causal=False)))
def test_without_a_mask_no_stage_is_named_mask_and_nothing_is_infinite(case: Case):
    t = trace(case.x, case.weights, case.config)
    assert "mask" not in t.stages
    for name, a in t.stages.items():
        assert np.isfinite(a).all(), name


@PROPERTY
@given(case=cases())
def test_contributions_summed_over_heads_are_the_output(case: Case):
    t = trace(case.x, case.weights, case.config)
    total = t["contributions"].sum(axis=0)
    if case.config.bias:
        total = total + case.weights.b_O
    np.testing.assert_allclose(total, t["output"], rtol=0, atol=1e-10 * max(1.0, np.abs(t["output"]).max()))


@PROPERTY
@given(case=cases())
def test_each_contribution_is_its_head_through_its_own_rows_of_W_O(case: Case):
    c, t = case.config, trace(case.x, case.weights, case.config)
    for i in range(c.n_heads):
        rows = case.weights.W_O[i * c.d_v : (i + 1) * c.d_v]  # (d_v, d_model)
        np.testing.assert_allclose(t["contributions"][i], t["z"][i] @ rows, rtol=1e-12, atol=1e-12)


@PROPERTY
@given(case=cases())
def test_concat_is_z_side_by_side_in_head_order(case: Case):
    c, t = case.config, trace(case.x, case.weights, case.config)
    for i in range(c.n_heads):
        np.testing.assert_array_equal(t["concat"][:, i * c.d_v : (i + 1) * c.d_v], t["z"][i])
    np.testing.assert_array_equal(t["concat"], np.concatenate(list(t["z"]), axis=1))


@PROPERTY
@given(case=cases())
def test_scaled_is_scores_over_root_d_head(case: Case):
    t = trace(case.x, case.weights, case.config)
    np.testing.assert_allclose(t["scaled"], t["scores"] / np.sqrt(case.config.d_head), rtol=1e-15, atol=0)


@PROPERTY
@given(config=packable_configs(), n=st.integers(1, 10), seed=st.integers(0, 2**32 - 1))
def test_packed_round_trip_gives_identical_arrays_and_an_identical_trace(config, n, seed):
    w = AttentionWeights.random(config, seed=seed)
    back = AttentionWeights.from_packed(w.to_packed(config), config)
    assert list(back.arrays()) == list(w.arrays())
    for name, a in w.arrays().items():
        assert back.arrays()[name].shape == a.shape, name
        np.testing.assert_array_equal(back.arrays()[name], a, err_msg=name)
    x = np.random.default_rng(seed).standard_normal((n, config.d_model))
    t, t_back = trace(x, w, config), trace(x, back, config)
    assert list(t.stages) == list(t_back.stages)
    for name in t.stages:
        np.testing.assert_array_equal(t_back[name], t[name], err_msg=name)


@PROPERTY
@given(case=cases(configs(causal=False)), data=st.data())
def test_permuting_tokens_permutes_every_per_token_output(case: Case, data):
    n = case.x.shape[0]
    perm = np.array(data.draw(st.permutations(range(n))))
    t = trace(case.x, case.weights, case.config)
    tp = trace(case.x[perm], case.weights, case.config)
    tol = dict(rtol=1e-12, atol=1e-12)
    for name in ("q", "k", "v", "z", "contributions"):  # (heads, n, ...): token axis 1
        np.testing.assert_allclose(tp[name], t[name][:, perm], **tol, err_msg=name)
    for name in ("x", "concat", "output"):  # (n, ...)
        np.testing.assert_allclose(tp[name], t[name][perm], **tol, err_msg=name)
    for name in ("scores", "scaled", "weights"):  # (h, n, n): queries and keys move together
        np.testing.assert_allclose(tp[name], t[name][:, perm][:, :, perm], **tol, err_msg=name)


@PROPERTY
@given(case=cases(configs(grouped=True)))
def test_gqa_equals_mha_with_each_kv_head_repeated_for_its_group(case: Case):
    c, w = case.config, case.weights
    group = list(c.kv_group)
    full = replace(c, n_kv_heads=c.n_heads)
    repeated = AttentionWeights(
        W_Q=w.W_Q,
        W_K=w.W_K[group],
        W_V=w.W_V[group],
        W_O=w.W_O,
        **({"b_Q": w.b_Q, "b_K": w.b_K[group], "b_V": w.b_V[group], "b_O": w.b_O} if c.bias else {}),
    )
    t, t_full = trace(case.x, w, c), trace(case.x, repeated, full)
    tol = dict(rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(t_full["k"], t["k"][group], **tol)
    np.testing.assert_allclose(t_full["v"], t["v"][group], **tol)
    for name in t.stages.keys() - {"k", "v"}:
        np.testing.assert_allclose(t_full[name], t[name], **tol, err_msg=name)


@PROPERTY
@given(case=cases(configs(grouped=True)))
def test_heads_of_one_group_share_keys_and_values(case: Case):
    """Two query heads in the same group attend over the very same keys: swapping their W_Q swaps their rows."""
    c, w = case.config, case.weights
    assert c.kv_group[0] == c.kv_group[1] == 0
    swapped = {name: w.arrays()[name][[1, 0, *range(2, c.n_heads)]] for name in ("W_Q", "b_Q") if name in w.arrays()}
    t = trace(case.x, w, c)
    ts = trace(case.x, AttentionWeights(**(w.arrays() | swapped)), c)  # heads 0 and 1 are both in group 0
    for name in ("scores", "weights", "z"):
        np.testing.assert_allclose(ts[name][[1, 0]], t[name][[0, 1]], rtol=1e-13, atol=1e-13, err_msg=name)


@PROPERTY
@given(case=cases(configs().filter(lambda c: c.d_model * c.n_heads <= 48)))
def test_trace_agrees_with_the_loop_by_loop_reference(case: Case):
    t = trace(case.x, case.weights, case.config)
    ref = naive_attention(case.x, case.weights, case.config)
    for name, expected in ref.items():
        scale = max(1.0, np.abs(expected).max())
        np.testing.assert_allclose(t[name], expected, rtol=0, atol=1e-11 * scale, err_msg=name)


@PROPERTY
@given(case=cases(configs(causal=True)))
def test_causal_rows_ignore_later_tokens(case: Case):
    """Changing the last token changes nothing a causal layer computes for the earlier ones."""
    n = case.x.shape[0]
    if n < 2:
        return
    changed = case.x.copy()
    changed[-1] = changed[-1] * -3.0 + 1.0
    t, tc = trace(case.x, case.weights, case.config), trace(changed, case.weights, case.config)
    for name in ("z", "contributions"):
        np.testing.assert_array_equal(tc[name][:, :-1], t[name][:, :-1], err_msg=name)
    np.testing.assert_array_equal(tc["output"][:-1], t["output"][:-1])


@pytest.mark.parametrize("kind", ["MHA", "GQA", "MQA"])
@pytest.mark.parametrize("causal", [False, True])
def test_the_config_strategy_reaches_every_kind(kind, causal):
    """Guard for the strategies above: they reach MHA, GQA and MQA, causal or not, with bias."""
    found = find(configs(), lambda c: c.kind == kind and c.causal == causal and c.bias)
    assert found.kind == kind
    if kind != "MHA":
        assert find(configs(grouped=True), lambda c: c.kind == kind).kind == kind


def test_a_long_last_key_leaves_the_earlier_causal_rows_bit_for_bit():
    """A last token long enough that its own row needs the softmax's row-max shift does not
    change how the earlier rows round: they never see it, and their bound stays under the limit."""
    config = AttentionConfig(d_model=1, n_heads=1, causal=True)
    one = np.ones((1, 1, 1))
    weights = AttentionWeights(W_Q=one, W_K=one, W_V=one, W_O=np.ones((1, 1)))
    x = np.array([[0.3], [-1.7], [2.9], [-3.1], [1.3], [0.7]])
    changed = x.copy()
    changed[-1] = 40.0  # its own score is 1600
    t, tc = trace(x, weights, config), trace(changed, weights, config)
    np.testing.assert_array_equal(tc["weights"][:, :-1], t["weights"][:, :-1])
    for name in ("z", "contributions", "output"):
        np.testing.assert_array_equal(tc[name][..., :-1, :], t[name][..., :-1, :], err_msg=name)
    np.testing.assert_allclose(tc["weights"].sum(axis=-1), 1.0, rtol=0, atol=1e-12)
