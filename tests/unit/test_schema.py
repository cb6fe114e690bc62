"""The JSON contract: a trace survives the trip to JSON and back, -inf included."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, replace

import numpy as np
import pytest

from mha_explorer.config import AttentionConfig
from mha_explorer.costs import costs
from mha_explorer.examples import load_teaching_example
from mha_explorer.schema import TracePayload, payload_arrays, trace_payload
from mha_explorer.trace import STAGES, trace
from mha_explorer.weights import AttentionWeights

pytestmark = pytest.mark.unit


def teaching(causal: bool = False):
    ex = load_teaching_example()
    config = replace(ex.config, causal=True) if causal else ex.config
    return trace(ex.x, ex.weights, config), list(ex.tokens), ex.weights


def gqa_causal():
    config = AttentionConfig(d_model=6, n_heads=4, n_kv_heads=2, d_head=2, d_v=3, causal=True, bias=True)
    w = AttentionWeights.random(config, seed=11)
    x = np.random.default_rng(11).standard_normal((5, 6))
    return trace(x, w, config), [f"t{i}" for i in range(5)], w


CASES = {"teaching": lambda: teaching(), "teaching-causal": lambda: teaching(causal=True), "gqa-causal-bias": gqa_causal}


@pytest.mark.parametrize("make", CASES.values(), ids=CASES.keys())
def test_payload_round_trips_through_json(make):
    t, tokens, w = make()
    payload = trace_payload(t, tokens, w, query=1)
    text = payload.model_dump_json()
    assert "Infinity" not in text and "NaN" not in text
    again = TracePayload.model_validate_json(text)
    assert again.model_dump() == payload.model_dump()
    # and it validates in full (trace_payload builds arrays without validation)
    TracePayload.model_validate(json.loads(text))


@pytest.mark.parametrize("make", CASES.values(), ids=CASES.keys())
def test_payload_arrays_are_the_trace(make):
    t, tokens, w = make()
    again = TracePayload.model_validate_json(trace_payload(t, tokens, w, query=1).model_dump_json())
    arrays = payload_arrays(again)
    assert list(arrays) == list(t.stages)
    for name, a in t.stages.items():
        assert arrays[name].shape == a.shape, name
        np.testing.assert_array_equal(arrays[name], a, err_msg=name)  # exact, -inf included
    for name, a in w.arrays().items():
        got = again.weights[name]
        assert got.shape == list(a.shape)
        np.testing.assert_array_equal(np.array(got.data).reshape(got.shape), a, err_msg=name)


def test_masked_entries_are_null_in_json():
    t, tokens, w = teaching(causal=True)
    doc = json.loads(trace_payload(t, tokens, w).model_dump_json())
    mask = doc["stages"]["mask"]
    n = len(tokens)
    assert mask["shape"] == [2, n, n]
    expected_nulls = 2 * n * (n - 1) // 2  # strictly above the diagonal, in both heads
    assert mask["data"].count(None) == expected_nulls
    for h in range(2):
        for i in range(n):
            for j in range(n):
                entry = mask["data"][(h * n + i) * n + j]
                assert (entry is None) == (j > i), (h, i, j)
    for name, a in doc["stages"].items():  # only the mask stage carries nulls
        if name != "mask":
            assert None not in a["data"], name
        assert len(a["data"]) == math.prod(a["shape"]), name


def test_payload_describes_the_trace():
    t, tokens, w = gqa_causal()
    p = trace_payload(t, tokens, w, query=3)
    assert p.schema_version == 1
    assert p.tokens == tokens and p.query == 3
    assert p.kv_group == [0, 0, 1, 1]
    dumped = p.config.model_dump()
    assert dumped["kind"] == "GQA"
    assert t.config.to_dict().items() <= dumped.items()
    for name, value in dumped.items():  # every field the payload states is the config's
        if name != "kind":
            assert getattr(t.config, name) == value, name
    assert [s.name for s in p.stage_table] == list(t.stages)
    assert [s.shape for s in p.stage_table] == [s.shape for s in STAGES if s.name in t.stages]
    assert p.costs.model_dump() == asdict(costs(t.config, t.n))
    ids = [s.id for s in p.page_stages]
    assert "mask" in ids
    assert {n.id for n in p.notes} >= {"visibility", "roles", "evidence", "cost", "mqa"}


def test_the_stage_table_of_a_layer_with_biases_adds_them():
    """A layer with biases (MiniLM's kind) says so in its formulas, as its page stages do; one
    without says none."""
    config = AttentionConfig(d_model=4, n_heads=2, bias=True)
    w = AttentionWeights.random(config, seed=0)
    t = trace(np.random.default_rng(0).standard_normal((3, 4)), w, config)
    table = {s.name: s.formula for s in trace_payload(t, ["a", "b", "c"], w).stage_table}
    assert table["q"] == r"Q_i = X W_i^Q + b_i^Q" and table["v"] == r"V_g = X W_g^V + b_g^V"
    assert table["output"] == r"Y = \mathrm{concat}\, W^O + b^O" and table["weights"] == next(s.formula for s in STAGES if s.name == "weights")
    t0, tokens, w0 = teaching()
    assert not any("b" in s.formula.replace(r"\mathrm", "") for s in trace_payload(t0, tokens, w0).stage_table if s.name in ("q", "k", "v", "output"))


def test_the_stage_table_of_a_layer_with_its_own_scale_multiplies_by_it():
    """A config's own scale (the lab's, a checkpoint's query_pre_attn_scalar) is what the scaled and
    masked scores are formed with, and what the table says; 1/sqrt(d_head) set as the scale, or
    none, keeps the division."""
    tokens = ["a", "b", "c"]
    x = np.random.default_rng(0).standard_normal((3, 4))
    config = AttentionConfig(d_model=4, n_heads=2, scale=0.25, causal=True)
    w = AttentionWeights.random(config, seed=0)
    table = {s.name: s for s in trace_payload(trace(x, w, config), tokens, w).stage_table}
    assert table["scaled"].formula == r"S_i \times 0.25" and table["mask"].formula == r"S_i \times 0.25 + M"
    assert "0.25" in table["scaled"].meaning and "square root" not in table["scaled"].meaning
    usual = {s.name: s for s in STAGES}
    for scale in (None, 1 / np.sqrt(2)):
        c = AttentionConfig(d_model=4, n_heads=2, scale=scale, causal=True)
        table = {s.name: s for s in trace_payload(trace(x, w, c), tokens, w).stage_table}
        assert [(table[k].formula, table[k].meaning) for k in ("scaled", "mask")] == [(usual[k].formula, usual[k].meaning) for k in ("scaled", "mask")]


def test_non_causal_payload_has_no_mask_stage():
    t, tokens, w = teaching()
    p = trace_payload(t, tokens, w)
    assert "mask" not in p.stages
    assert "mask" not in [s.id for s in p.page_stages]
    assert "mask" not in [s.name for s in p.stage_table]


def test_unpack_reads_a_binary_trace_without_being_told_its_kind():
    from mha_explorer.schema import Packer, unpack

    t, tokens, w = teaching(causal=True)
    packer = Packer()
    head = trace_payload(t, tokens, w, query=1, encode=lambda name, a: packer.array(a)).model_dump_json().encode()
    again = unpack(packer.body(head))
    assert isinstance(again, TracePayload) and again.tokens == tokens
    for name, a in payload_arrays(again).items():
        np.testing.assert_array_equal(a, t.stages[name], err_msg=name)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_an_answer_stored_by_place_reads_back_the_same_numbers(dtype):
    """Packer(planes=True) keeps every number's first byte together, then every second byte...:
    the bytes are not those of the arrays in order, yet unpack and to_numpy give the same numbers."""
    from mha_explorer.schema import Packer, to_numpy, unpack

    t, tokens, w = teaching(causal=True)
    in_order, by_place = Packer(), Packer(planes=True)
    heads = [trace_payload(t, tokens, w, query=1, encode=lambda name, a, p=p: p.array(a, dtype)).model_dump_json().encode() for p in (in_order, by_place)]
    assert by_place.arrays() != in_order.arrays() and sorted(by_place.arrays()) == sorted(in_order.arrays())
    x = unpack(by_place.body(heads[1])).stages["x"]
    assert x.planes is None and x.offset is None  # read back in order, as a base64 answer
    again, plain = unpack(by_place.body(heads[1])), unpack(in_order.body(heads[0]))
    assert again.model_dump() == plain.model_dump()
    stored = TracePayload.model_validate_json(heads[1]).stages["scores"]
    assert stored.planes is True
    np.testing.assert_array_equal(to_numpy(stored, by_place.arrays()), t.stages["scores"].astype(dtype))


@pytest.mark.parametrize("norm_eps, expected", [(None, 1e-6), (1e-2, 1e-2)])
def test_the_payload_carries_the_epsilon_of_the_qk_norm(norm_eps, expected):
    """The page works rms(q) out by hand from the q it shows: it needs the epsilon the trace used."""
    config = AttentionConfig(d_model=4, n_heads=2, qk_norm=True, norm_eps=norm_eps)
    w = AttentionWeights.random(config, seed=1)
    x = np.random.default_rng(1).standard_normal((3, 4)) * 0.01  # small rows, where epsilon counts
    t = trace(x, w, config)
    payload = TracePayload.model_validate_json(trace_payload(t, ["a", "b", "c"], w, 0).model_dump_json())
    assert payload.config.norm_eps == expected
    q = t["q"][1, 2]
    rms = math.sqrt(np.mean(q * q) + payload.config.norm_eps)
    np.testing.assert_allclose(q / rms * w.q_norm, t["q_normed"][1, 2], rtol=1e-12)
