"""The stages real architectures add: q/k norm, RoPE, sliding windows, a custom score scale.

The expected numbers come from naive_extras below, written from the definitions one number at a
time (not from trace.py); the invariants are what each stage means.
"""

from __future__ import annotations

import dataclasses
import io
import math
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from mha_explorer.config import AttentionConfig, ConfigError
from mha_explorer.narrative import notes, page_stages
from mha_explorer.trace import STAGES, hidden_keys, trace
from mha_explorer.walkthrough import render
from mha_explorer.weights import AttentionWeights

from ._support import PROPERTY, divisors, shape_of

pytestmark = pytest.mark.unit


@st.composite
def arch_cases(draw):
    """A config with any mix of the architecture fields, seeded weights, and x of 1..9 tokens."""
    n_heads = draw(st.integers(1, 4))
    config = AttentionConfig(
        d_model=draw(st.integers(1, 10)),
        n_heads=n_heads,
        n_kv_heads=draw(st.sampled_from(divisors(n_heads))),
        d_head=2 * draw(st.integers(1, 4)),
        d_v=draw(st.integers(1, 5)),
        causal=draw(st.booleans()),
        bias=draw(st.booleans()),
        qk_norm=draw(st.booleans()),
        rope_theta=draw(st.sampled_from([None, 10.0, 10000.0, 1e6])),
        sliding_window=draw(st.sampled_from([None, 1, 2, 3, 7])),
        scale=draw(st.sampled_from([None, 0.0625, 1.0])),
    )
    seed = draw(st.integers(0, 2**32 - 1))
    x = np.random.default_rng(seed).standard_normal((draw(st.integers(1, 9)), config.d_model))
    start = draw(st.integers(0, 50))
    return config, x, AttentionWeights.random(config, seed=seed + 1), np.arange(start, start + len(x))


def naive_extras(x, w: AttentionWeights, c: AttentionConfig, positions) -> dict[str, np.ndarray]:
    """q/k norm, RoPE, scores, masked softmax: loops over heads, tokens and components."""
    n, e = len(x), c.d_head
    q = np.einsum("nd,hde->hne", x, w.W_Q) + (w.b_Q[:, None] if c.bias else 0)
    k = np.einsum("nd,gde->gne", x, w.W_K) + (w.b_K[:, None] if c.bias else 0)
    out = {}
    if c.qk_norm:
        eps = 1e-6 if c.norm_eps is None else c.norm_eps
        for a, mult in ((q, w.q_norm), (k, w.k_norm)):
            for head in range(a.shape[0]):
                for t in range(n):
                    rms = math.sqrt(sum(v * v for v in a[head, t]) / e + eps)
                    a[head, t] = [a[head, t, m] / rms * mult[m] for m in range(e)]
        out |= {"q_normed": q.copy(), "k_normed": k.copy()}
    if c.rope_theta is not None:
        for a in (q, k):
            for head in range(a.shape[0]):
                for t in range(n):
                    row = a[head, t].copy()
                    for m in range(e // 2):
                        angle = positions[t] * c.rope_theta ** (-2 * m / e)
                        lo, hi = row[m], row[m + e // 2]
                        a[head, t, m] = lo * math.cos(angle) - hi * math.sin(angle)
                        a[head, t, m + e // 2] = lo * math.sin(angle) + hi * math.cos(angle)
        out |= {"q_rotated": q.copy(), "k_rotated": k.copy()}
    scale = 1 / math.sqrt(e) if c.scale is None else c.scale
    group = c.n_heads // c.n_kv_heads
    weights = np.zeros((c.n_heads, n, n))
    for head in range(c.n_heads):
        for i in range(n):
            visible = [j for j in range(n) if (j <= i or not c.causal) and (c.sliding_window is None or j > i - c.sliding_window)]
            s = {j: sum(q[head, i, m] * k[head // group, j, m] for m in range(e)) * scale for j in visible}
            top = max(s.values())
            total = sum(math.exp(v - top) for v in s.values())
            for j in visible:
                weights[head, i, j] = math.exp(s[j] - top) / total
    return out | {"weights": weights}


@PROPERTY
@given(arch_cases())
def test_extra_stages_and_weights_match_the_definitions(case):
    config, x, w, positions = case
    t = trace(x, w, config, positions=positions)
    expected = naive_extras(x, w, config, positions)
    for name, value in expected.items():
        np.testing.assert_allclose(t[name], value, atol=1e-9, rtol=1e-9, err_msg=name)


@PROPERTY
@given(arch_cases())
def test_each_stage_is_present_exactly_when_the_layer_has_it(case):
    config, x, w, positions = case
    t = trace(x, w, config, positions=positions)
    order = [s.name for s in STAGES]
    assert list(t.stages) == [s for s in order if s in t.stages]  # table order
    assert ("q_normed" in t.stages) == ("k_normed" in t.stages) == config.qk_norm
    assert ("q_rotated" in t.stages) == ("k_rotated" in t.stages) == (config.rope_theta is not None)
    assert ("mask" in t.stages) == (config.causal or config.sliding_window is not None)
    table = {s.name: s.shape for s in STAGES}
    for name, a in t.stages.items():
        assert a.shape == shape_of(table[name], config, len(x)), name


@PROPERTY
@given(arch_cases())
def test_hidden_keys_get_exactly_zero_weight_and_rows_still_sum_to_one(case):
    config, x, w, positions = case
    t = trace(x, w, config, positions=positions)
    np.testing.assert_allclose(t["weights"].sum(axis=-1), 1.0, atol=1e-12)
    if "mask" in t.stages:
        assert np.all(t["weights"][np.isneginf(t["mask"])] == 0)
        n = len(x)
        i, j = np.arange(n)[:, None], np.arange(n)[None, :]
        hidden = np.zeros((n, n), bool)
        if config.causal:
            hidden |= j > i
        if config.sliding_window is not None:
            hidden |= j <= i - config.sliding_window
        assert np.array_equal(np.isneginf(t["mask"]), np.broadcast_to(hidden, t["mask"].shape))


@PROPERTY
@given(arch_cases())
def test_rope_turns_vectors_without_stretching_them_and_only_distance_matters(case):
    config, x, w, positions = case
    config = dataclasses.replace(config, rope_theta=config.rope_theta or 10000.0)
    t = trace(x, w, config, positions=positions)
    before = t.stages.get("q_normed", t["q"])
    np.testing.assert_allclose(np.linalg.norm(t["q_rotated"], axis=-1), np.linalg.norm(before, axis=-1), rtol=1e-9, atol=1e-12)
    shifted = trace(x, w, config, positions=positions + 17)  # every position moved by the same amount
    np.testing.assert_allclose(shifted["scores"], t["scores"], rtol=1e-7, atol=1e-7)


def test_position_zero_is_not_turned_and_default_positions_count_from_zero():
    c = AttentionConfig(d_model=4, n_heads=2, d_head=4, rope_theta=10000.0)
    w, x = AttentionWeights.random(c, seed=3), np.random.default_rng(3).standard_normal((5, 4))
    t = trace(x, w, c)
    np.testing.assert_array_equal(t["q_rotated"][:, 0], t["q"][:, 0])
    same = trace(x, w, c, positions=np.arange(5))
    np.testing.assert_array_equal(same["scores"], t["scores"])


def test_a_window_of_one_leaves_each_query_only_itself():
    c = AttentionConfig(d_model=4, n_heads=2, causal=True, sliding_window=1)
    t = trace(np.random.default_rng(0).standard_normal((6, 4)), AttentionWeights.random(c), c)
    np.testing.assert_array_equal(t["weights"], np.broadcast_to(np.eye(6), (2, 6, 6)))


def test_a_window_wider_than_the_text_is_just_causal():
    c = AttentionConfig(d_model=4, n_heads=2, causal=True)
    x, w = np.random.default_rng(1).standard_normal((5, 4)), AttentionWeights.random(c, seed=1)
    windowed = trace(x, w, dataclasses.replace(c, sliding_window=5))
    np.testing.assert_array_equal(windowed["weights"], trace(x, w, c)["weights"])


def test_float32_in_float32_out_with_every_extra_stage():
    c = AttentionConfig(d_model=8, n_heads=4, n_kv_heads=1, d_head=4, causal=True, qk_norm=True, rope_theta=1e4, sliding_window=3, scale=0.2)
    w = AttentionWeights.random(c, seed=2, dtype=np.float32)
    t = trace(np.random.default_rng(2).standard_normal((7, 8)).astype(np.float32), w, c)
    assert {a.dtype for a in t.stages.values()} == {np.dtype(np.float32)}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"rope_theta": 1e4, "d_head": 3}, "even d_head"),
        ({"rope_theta": 0.0}, "rope_theta=0.0 must be a finite number above 0"),
        ({"norm_eps": 1e-6}, "only used with qk_norm=True"),
        ({"qk_norm": True, "norm_eps": -1.0}, "norm_eps=-1.0"),
        ({"qk_norm": 1}, "qk_norm=1 must be true or false"),
        ({"sliding_window": 0}, "sliding_window=0 must be at least 1"),
        ({"sliding_window": 2.5}, "sliding_window=2.5 must be a whole number"),
        ({"scale": float("inf")}, "scale=inf must be a finite number above 0"),
        ({"scale": "big"}, "scale='big' must be a number"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_architecture_fields_explain_their_errors(fields, message):
    with pytest.raises(ConfigError, match=message):
        AttentionConfig(**({"d_model": 8, "n_heads": 2} | fields))


def test_to_dict_names_only_the_fields_a_layer_has():
    plain = AttentionConfig(d_model=8, n_heads=2)
    assert set(plain.to_dict()) == {"d_model", "n_heads", "n_kv_heads", "d_head", "d_v", "causal", "bias"}
    rich = AttentionConfig(d_model=8, n_heads=2, causal=True, qk_norm=True, rope_theta=1e4, sliding_window=4, scale=0.5)
    assert rich.to_dict() == plain.to_dict() | {
        "causal": True,
        "qk_norm": True,
        "rope_theta": 1e4,
        "sliding_window": 4,
        "scale": 0.5,
    }
    assert AttentionConfig(**rich.to_dict()) == rich


def test_weights_check_names_the_norm_arrays():
    c = AttentionConfig(d_model=8, n_heads=2, qk_norm=True)
    w = AttentionWeights.random(c)
    assert w.q_norm.shape == w.k_norm.shape == (4,)
    with pytest.raises(ConfigError, match="q_norm is missing: qk_norm=True"):
        dataclasses.replace(w, q_norm=None).check(c)
    with pytest.raises(ConfigError, match="k_norm is given but qk_norm=False"):
        dataclasses.replace(w, q_norm=None).check(dataclasses.replace(c, qk_norm=False))
    with pytest.raises(ConfigError, match="packed layout has no place for q_norm"):
        w.to_packed(c)


def test_random_weights_of_existing_configs_are_unchanged_by_the_new_fields():
    c = AttentionConfig(d_model=8, n_heads=2, bias=True)
    normed = dataclasses.replace(c, qk_norm=True)
    a, b = AttentionWeights.random(c, seed=5), AttentionWeights.random(normed, seed=5)
    for name, array in a.arrays().items():
        np.testing.assert_array_equal(array, getattr(b, name))


def test_positions_must_be_one_integer_per_token():
    c = AttentionConfig(d_model=4, n_heads=2, rope_theta=1e4)
    w, x = AttentionWeights.random(c), np.ones((3, 4))
    with pytest.raises(ConfigError, match=r"give \(3,\) integers"):
        trace(x, w, c, positions=np.arange(4))
    with pytest.raises(ConfigError, match="dtype float64"):
        trace(x, w, c, positions=np.arange(3.0))


def test_page_stages_show_the_extra_views_only_when_present():
    ids = lambda c: [s.id for s in page_stages(c)]  # noqa: E731
    base = AttentionConfig(d_model=8, n_heads=2)
    assert ids(base) == ["projections", "scores", "weights", "mixing", "concat", "output"]
    full = dataclasses.replace(base, causal=True, qk_norm=True, rope_theta=1e4, sliding_window=4)
    assert ids(full) == ["projections", "qk_norm", "rope", "scores", "mask", "weights", "mixing", "concat", "output"]
    assert "mask" in ids(dataclasses.replace(base, sliding_window=4))
    mask = next(s for s in page_stages(full) if s.id == "mask")
    assert "sliding window" in mask.explanation and "t - 4" in mask.latex


def test_the_terminal_walkthrough_shows_every_extra_stage():
    c = AttentionConfig(d_model=12, n_heads=2, n_kv_heads=1, d_head=10, causal=True, qk_norm=True, rope_theta=1e4, sliding_window=2)
    x = np.random.default_rng(4).standard_normal((30, 12))
    out = io.StringIO()
    render(trace(x, AttentionWeights.random(c, seed=4), c), [f"t{i}" for i in range(30)], 29, [0, 1], None, Console(file=out, width=200))
    text = out.getvalue()
    for title in ("Query/key norm", "Rotary positions", "Mask", "sliding window 2", "(12 numbers)", "the first 8 of 12"):
        assert title in text, title
    # the sliding window of 2 leaves the last query two keys: the mixing names both, by position, and
    # says the rest are masked (no "+ …" term: its sum is whole)
    assert "no (masked)" in text and "(the other 28 keys are masked: their weights are 0)" in " ".join(text.split()) and "visible keys of 30" not in text
    assert "×v(t28 @28)[" in text and "×v(t29 @29)[" in text and "×v(t0 @0)" not in text


def test_the_terminal_names_a_long_texts_keys_by_position_too():
    """Past 24 tokens the tables list a few keys, largest first: a piece of a word ("ota") is no
    name of its own there, so every key carries its position, as the page's lists do."""
    c = AttentionConfig(d_model=8, n_heads=1)
    x = np.random.default_rng(5).standard_normal((30, 8))
    tokens = [f"w{i}" for i in range(30)]  # each once
    out = io.StringIO()
    render(trace(x, AttentionWeights.random(c, seed=5), c), tokens, 3, [0], "weights", Console(file=out, width=200))
    text = out.getvalue()
    listed = re.findall(r"│ (w\d+(?: @\d+)?) +│", text)
    assert len(listed) == 8 and all(re.fullmatch(r"w(\d+) @\1", key) for key in listed), listed
    short = io.StringIO()
    render(trace(x[:4], AttentionWeights.random(c, seed=5), c), tokens[:4], 3, [0], "weights", Console(file=short, width=200))
    assert "w0 @0" not in short.getvalue() and "│ w0 " in short.getvalue()  # a short text lists every key in order, by name


@pytest.mark.parametrize(
    "config, words",
    [
        (AttentionConfig(d_model=8, n_heads=2), "every token is visible to every query"),
        (AttentionConfig(d_model=8, n_heads=2, causal=True), "each query sees only itself and the tokens before it"),
        (AttentionConfig(d_model=8, n_heads=2, causal=True, sliding_window=3), "each query sees itself and at most the 2 tokens before it"),
        (AttentionConfig(d_model=8, n_heads=2, sliding_window=3), "sees the keys fewer than 3 positions before it, and every key after it"),
    ],
    ids=["full", "causal", "causal-window", "window"],
)
def test_the_visibility_note_says_which_keys_each_query_sees(config, words):
    text = dict(notes(config))["visibility"]
    assert words in text
    hidden = hidden_keys(6, config)
    assert ("every token is visible" in text) == (not hidden.any())


@pytest.mark.parametrize(
    "config, formula, words",
    [
        (AttentionConfig(d_model=8, n_heads=4), r"k_{i,j} = x_j\,W_i^K", "by its own three matrices"),
        (AttentionConfig(d_model=8, n_heads=4, n_kv_heads=2, bias=True), r"k_{g,j} = x_j\,W_g^K + b_g^K", "one pair (a K/V head) to every 2 query heads"),
        (AttentionConfig(d_model=8, n_heads=4, n_kv_heads=1), r"v_{g,j} = x_j\,W_g^V", "all 4 query heads share one key matrix and one value matrix"),
    ],
    ids=["MHA", "GQA", "MQA"],
)
def test_the_projections_say_whose_keys_and_values_a_head_reads(config, formula, words):
    projections = page_stages(config)[0]
    assert formula in projections.latex and words in projections.explanation
    assert ("own three matrices" in projections.explanation) == (config.kind == "MHA")


def test_a_scale_the_config_sets_is_said_even_when_it_is_the_usual_one():
    """Gemma 3 scales by query_pre_attn_scalar^-1/2, which for the 270M model is 1/√d_head."""
    said = {s.id: s.explanation for s in page_stages(AttentionConfig(d_model=8, n_heads=2, d_head=4, scale=0.5))}
    assert "This layer's config sets the scale itself, 0.5, which here equals 1/√d_head." in said["scores"]
    plain = {s.id: s.explanation for s in page_stages(AttentionConfig(d_model=8, n_heads=2, d_head=4))}
    assert "sets the scale" not in plain["scores"]


def test_value_mixing_reads_the_values_of_the_k_v_head_and_one_head_has_nothing_to_concatenate():
    shared = {s.id: s for s in page_stages(AttentionConfig(d_model=8, n_heads=4, n_kv_heads=1))}
    assert r"v_{g,j}" in shared["mixing"].latex and "K/V head g" in shared["mixing"].explanation
    alone = {s.id: s for s in page_stages(AttentionConfig(d_model=8, n_heads=1, bias=True))}
    assert alone["concat"].latex == r"\mathrm{concat} = z_0" and "head 1" not in alone["concat"].explanation
    assert alone["output"].latex == r"y = z_0\,W^O + b^O" and "mixes the heads" not in alone["output"].explanation
    many = {s.id: s for s in page_stages(AttentionConfig(d_model=8, n_heads=2))}
    assert r"v_{i,j}" in many["mixing"].latex and "z_{h-1}" in many["concat"].latex


@pytest.mark.parametrize(
    "config, kv",
    [
        (AttentionConfig(d_model=8, n_heads=2, causal=True, qk_norm=True, rope_theta=1e4), "i"),
        (AttentionConfig(d_model=8, n_heads=4, n_kv_heads=2, causal=True, rope_theta=1e4), "g"),
        (AttentionConfig(d_model=8, n_heads=4, n_kv_heads=1, causal=True, qk_norm=True, rope_theta=1e4), "g"),
    ],
    ids=["MHA-norm", "GQA", "MQA-norm"],
)
def test_every_formula_names_the_query_head_and_the_keys_it_reads_the_same_way(config, kv):
    """From the projections to the scores, q is head i's and the keys are k_{i,j}, or k_{g,j} of
    the K/V head g that head i reads; the rotary stage turns what the stage before gave it."""
    latex = {s.id: s.latex for s in page_stages(config)}
    other = "g" if kv == "i" else "i"
    for stage in ("projections", "qk_norm", "rope", "scores"):
        if stage not in latex:
            continue
        assert f"k_{{{kv},j}}" in latex[stage] or f"k}}_{{{kv},j}}" in latex[stage], stage
        assert f"k_{{{other},j}}" not in latex[stage] and f"k}}_{{{other},j}}" not in latex[stage], stage
        assert "q_t" not in latex[stage] and "q}_t" not in latex[stage], stage
        assert "q_i" in latex[stage] or "q}_i" in latex[stage], stage
    turned = r"R_{t}\,\hat{q}_i" if config.qk_norm else r"R_{t}\,q_i"
    assert turned in latex["rope"]
    assert ("normed q̂ and k̂" in next(s for s in page_stages(config) if s.id == "rope").explanation) == config.qk_norm


def test_the_rotary_stage_says_positions_count_through_their_distance_not_that_scores_depend_on_it_alone():
    """A turned dot product still depends on q and k: what rotary positions make relative is the
    positions' part only. "Depends only on how far apart the tokens are" read as the whole score."""
    config = AttentionConfig(d_model=8, n_heads=2, rope_theta=10_000.0, causal=True)
    explanation = next(s for s in page_stages(config) if s.id == "rope").explanation
    assert "the positions count only through how far apart the tokens are, j − t" in explanation
    assert "depends only on how far apart" not in explanation


def test_a_trace_given_positions_keeps_them_for_the_terminal_and_the_page():
    """trace(..., positions=) turned q and k by the positions given, but the trace forgot them: the
    terminal's rotary stage wrote the token indices 0 to 3 beside them and turned its pairs by
    hand by the index, so its "by hand" numbers disagreed with the layer's."""
    from mha_explorer.schema import trace_payload

    c = AttentionConfig(d_model=8, n_heads=2, causal=True, rope_theta=10000.0)
    w = AttentionWeights.random(c, seed=2)
    x = np.round(np.random.default_rng(0).uniform(-1, 1, (4, 8)), 1)
    t = trace(x, w, c, positions=np.array([10, 11, 12, 13]))
    assert t.positions == (10, 11, 12, 13) and t.position(2) == 12
    assert trace(x, w, c).positions is None and trace(x, w, c).position(2) == 2
    assert trace_payload(t, list("abcd"), w).positions == [10, 11, 12, 13]
    assert trace_payload(trace(x, w, c), list("abcd"), w).positions is None
    console = Console(width=120, record=True, highlight=False)
    render(t, list("abcd"), 2, [0], "rope", console, w)
    out = console.export_text()
    assert "query c (token 2 of the text, at position 12)" in out  # the header tells its place in the text from RoPE's position
    cells = [[c.strip() for c in line.split("│") if c.strip()] for line in out.splitlines()]  # (in a panel: rules of its own)
    rows = [row for row in cells if row and row[0] in "abcd"]
    assert {row[0]: row[1] for row in rows} == {"a": "10", "b": "11", "c": "12", "d": "13"}, rows  # each token's position
    # d_head 4: two pairs, turned by 12 × θ^(−2m/4), by hand as in the layer
    assert "head 0: two pairs of q turned by hand, at position 12" in out and "angle = 12 × θ^(−2m/4)" in out
    pairs = [row for row in cells if row and re.fullmatch(r"\(\d, \d\)", row[0])]
    assert len(pairs) == 2 and all(row[4] == row[5] for row in pairs), pairs  # a′, b′ by hand = in the layer


def test_a_layer_with_its_own_scale_is_not_told_it_divides_by_the_root_of_d_head():
    """The Scores stage opened with "Dividing by the square root of the key width keeps…" for a
    layer that multiplies by its own scale, and said only at its end that it does not."""
    own = next(s for s in page_stages(AttentionConfig(d_model=8, n_heads=2, scale=0.37)) if s.id == "scores").explanation
    usual = next(s for s in page_stages(AttentionConfig(d_model=8, n_heads=2)) if s.id == "scores").explanation
    assert "Dividing by" not in own and "Most layers divide by the square root of the key width" in own
    assert own.endswith("This layer multiplies by 0.37 instead, a scale its config sets.")
    assert usual.startswith("The query is compared") and "Dividing by the square root of the key width keeps" in usual
