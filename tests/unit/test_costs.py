"""costs(): arithmetic, attention entries and KV cache, by formula and against real array sizes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given

from mha_explorer.config import AttentionConfig
from mha_explorer.costs import costs, kv_cache
from mha_explorer.trace import trace
from mha_explorer.weights import AttentionWeights

from ._support import PROPERTY, Case, cases

pytestmark = pytest.mark.unit


def test_small_gqa_config_by_hand():
    # d_model 6, 4 query heads sharing 2 K/V heads, d_head 3, d_v 2, 5 tokens
    c = AttentionConfig(d_model=6, n_heads=4, n_kv_heads=2, d_head=3, d_v=2)
    got = costs(c, 5)
    assert got.n == 5
    assert got.multiply_adds == {
        "q": 5 * 4 * 3 * 6,  # n*h*d_head outputs, each a dot product over d_model = 360
        "k": 5 * 2 * 3 * 6,  # only the 2 K/V heads are projected = 180
        "v": 5 * 2 * 2 * 6,  # = 120
        "scores": 4 * 5 * 5 * 3,  # h*n*n scores, each over d_head = 300
        "scaled": 4 * 5 * 5,  # one multiply per score = 100
        "weights": 4 * 5 * 5,  # = 100
        "z": 4 * 5 * 2 * 5,  # h*n*d_v outputs, each a sum over n keys = 200
        "output": 5 * 6 * 8,  # n*d_model outputs, each over h*d_v = 8 numbers = 240
    }
    assert got.attention_entries == 4 * 5 * 5
    assert got.kv_cache.numbers_per_token == 2 * (3 + 2)
    assert got.kv_cache.numbers == 2 * (3 + 2) * 5
    assert got.kv_cache.kind == "GQA" and got.kv_cache.n_kv_heads == 2


def test_teaching_sized_mha():
    c = AttentionConfig(d_model=4, n_heads=2)
    got = costs(c, 4)
    assert got.attention_entries == 32  # 2 heads x 4 x 4
    assert got.kv_cache.numbers == 2 * 2 * 2 * 4  # DESIGN.md: 2 * n_kv_heads * d_head * n
    # q, k, v: 4 tokens x 2 heads x 2 wide x 4 inputs each; scores and z: 2 x 4 x 4 x 2;
    # scaled and weights: 2 x 4 x 4; output: 4 x 4 outputs, each over 4 concatenated numbers
    assert sum(got.multiply_adds.values()) == 3 * (4 * 2 * 2 * 4) + 2 * (2 * 4 * 4 * 2) + 2 * (2 * 4 * 4) + 4 * 4 * 4


@pytest.mark.parametrize("n", [1, 7, 4096])
def test_kv_cache_shrinks_with_shared_heads(n):
    mha = AttentionConfig(d_model=64, n_heads=8)
    gqa = AttentionConfig(d_model=64, n_heads=8, n_kv_heads=2)
    mqa = AttentionConfig(d_model=64, n_heads=8, n_kv_heads=1)
    m, g, q = (costs(c, n).kv_cache for c in (mha, gqa, mqa))
    assert (m.kind, g.kind, q.kind) == ("MHA", "GQA", "MQA")
    assert m.numbers == 2 * 8 * 8 * n
    assert g.numbers * 8 == m.numbers * 2  # GQA = n_kv / h of MHA
    assert q.numbers * 8 == m.numbers  # MQA = 1 / h of MHA
    # every config also reports the MHA and MQA caches of the same widths, for comparison
    for c in (mha, gqa, mqa):
        assert costs(c, n).kv_cache_mha == m
        assert costs(c, n).kv_cache_mqa == q
    # the query side does not shrink
    assert costs(mha, n).multiply_adds["q"] == costs(mqa, n).multiply_adds["q"]
    assert costs(mha, n).attention_entries == costs(mqa, n).attention_entries


def test_bytes_per_dtype():
    c = AttentionConfig(d_model=12, n_heads=6, n_kv_heads=3, d_v=5)
    cache = kv_cache(c, 11)
    assert cache.bytes == {"float16": 2 * cache.numbers, "float32": 4 * cache.numbers}
    assert cache.bytes_per_token == {"float16": 2 * cache.numbers_per_token, "float32": 4 * cache.numbers_per_token}
    assert cache.numbers == 11 * cache.numbers_per_token


def test_causal_mask_does_not_change_the_dense_count():
    c = AttentionConfig(d_model=8, n_heads=2)
    causal = AttentionConfig(d_model=8, n_heads=2, causal=True)
    assert costs(c, 9) == costs(causal, 9)


@pytest.mark.parametrize("n", [0, -3])
def test_n_must_be_positive(n):
    with pytest.raises(ValueError, match=f"n={n} must be at least 1"):
        costs(AttentionConfig(d_model=4, n_heads=2), n)


@pytest.mark.parametrize("n", ["3", 1.5, True, None])
def test_n_must_be_a_whole_number(n):
    with pytest.raises(ValueError, match=rf"n={n!r} must be a whole number of tokens, such as 128"):
        costs(AttentionConfig(d_model=4, n_heads=2), n)
    assert costs(AttentionConfig(d_model=4, n_heads=2), np.int64(3)).n == 3


@PROPERTY
@given(case=cases())
def test_counts_match_the_arrays_trace_builds(case: Case):
    """Each count is (entries of the stage) x (length of the sum behind each entry)."""
    c, t = case.config, trace(case.x, case.weights, case.config)
    got = costs(c, t.n)
    assert got.multiply_adds["q"] == t["q"].size * c.d_model
    assert got.multiply_adds["k"] == t["k"].size * c.d_model
    assert got.multiply_adds["v"] == t["v"].size * c.d_model
    assert got.multiply_adds["scores"] == t["scores"].size * c.d_head
    assert got.multiply_adds["scaled"] == t["scaled"].size
    assert got.multiply_adds["weights"] == t["weights"].size
    assert got.multiply_adds["z"] == t["z"].size * t.n
    assert got.multiply_adds["output"] == t["output"].size * c.n_heads * c.d_v
    assert got.attention_entries == t["weights"].size
    # the KV cache is exactly the k and v arrays of the trace
    assert got.kv_cache.numbers == t["k"].size + t["v"].size
    assert got.kv_cache.bytes["float32"] == t["k"].astype(np.float32).nbytes + t["v"].astype(np.float32).nbytes


@pytest.mark.parametrize("n, kept", [(3, 3), (4, 4), (10, 4)])
def test_a_sliding_window_layer_keeps_only_the_window(n, kept):
    # a window of 4: query t reads keys t-3..t, so keys older than the last 4 are never read again
    c = AttentionConfig(d_model=8, n_heads=4, n_kv_heads=1, d_head=2, causal=True, sliding_window=4)
    got = costs(c, n).kv_cache
    assert got.tokens == kept and got.numbers == 1 * (2 + 2) * kept and got.bytes["float16"] == 2 * got.numbers
    assert costs(AttentionConfig(d_model=8, n_heads=4, n_kv_heads=1, d_head=2, causal=True), n).kv_cache.tokens == n
    # without the causal mask the layer keeps no cache at all: the numbers are a causal decoder's with its window
    c = AttentionConfig(d_model=8, n_heads=4, n_kv_heads=1, d_head=2, sliding_window=4)
    assert costs(c, n).kv_cache.tokens == kept


def test_a_layer_with_a_qk_norm_and_rotary_positions_counts_them():
    """One count per component of every q and k row, where the trace records those stages."""
    c = AttentionConfig(d_model=8, n_heads=4, n_kv_heads=2, d_head=4, qk_norm=True, rope_theta=1e4, causal=True)
    t = trace(np.ones((5, 8)), AttentionWeights.random(c, seed=0), c)
    got = costs(c, t.n).multiply_adds
    assert got["qk_norm"] == t["q_normed"].size + t["k_normed"].size
    assert got["rope"] == t["q_rotated"].size + t["k_rotated"].size
    assert list(got)[:5] == ["q", "k", "v", "qk_norm", "rope"]
    assert "qk_norm" not in costs(AttentionConfig(d_model=8, n_heads=4), 5).multiply_adds


def test_a_models_caches_keep_each_layers_window_and_k_v_heads():
    """kv_caches: a layer with a sliding window keeps its window's last tokens only, one without
    every token (Gemma 3's 5 local layers to 1 global), each with its own K/V heads."""
    from mha_explorer.modelview import kv_caches

    class Layers:  # a model's layers as modelview reads them
        n_layers = 6

        def layer_config(self, layer):
            return AttentionConfig(d_model=8, n_heads=4, n_kv_heads=1, d_head=2, causal=True, sliding_window=None if layer == 5 else 3)

    caches = kv_caches(Layers(), 5)
    assert [(c.tokens, c.numbers_per_token) for c in caches] == [(3, 4)] * 5 + [(5, 4)]  # 1 K/V head of 2 + 2 numbers a token
    assert sum(c.bytes["float16"] for c in caches) == (5 * 3 + 5) * 4 * 2
    assert [c.tokens for c in kv_caches(Layers(), 2)] == [2] * 6  # a text shorter than the window: every token
