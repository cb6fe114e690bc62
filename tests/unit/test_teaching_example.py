"""The teaching example: small, hand-checkable, and it shows two heads doing different things."""

from __future__ import annotations

import json
from decimal import Decimal
from importlib.resources import files

import numpy as np
import pytest

from mha_explorer.examples import load_teaching_example
from mha_explorer.trace import trace

pytestmark = pytest.mark.unit

NUMERIC = ("x", "W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O")


def raw() -> dict:
    text = files("mha_explorer.examples").joinpath("teaching.json").read_text(encoding="utf-8")
    return json.loads(text, parse_float=Decimal, parse_int=Decimal)


def numbers(value):
    if isinstance(value, list):
        for v in value:
            yield from numbers(v)
    else:
        yield value


def test_shape_of_the_example():
    ex = load_teaching_example()
    assert len(ex.tokens) == 4 and "like" in ex.tokens
    assert ex.query == "like"
    c = ex.config
    assert (c.d_model, c.n_heads, c.d_head, c.d_v, c.kind, c.causal, c.bias) == (4, 2, 2, 2, "MHA", False, False)
    assert ex.x.shape == (4, 4)
    ex.weights.check(c)


def test_every_value_in_the_file_has_at_most_one_decimal_and_lies_in_minus_one_to_one():
    data = raw()
    present = [k for k in NUMERIC if k in data]
    assert {"x", "W_Q", "W_K", "W_V", "W_O"} <= set(present)
    count = 0
    for key in present:
        for v in numbers(data[key]):
            assert isinstance(v, Decimal), (key, v)
            assert v == v.quantize(Decimal("0.1")), f"{key}: {v} has more than one decimal"
            assert -1 <= v <= 1, f"{key}: {v} is outside [-1, 1]"
            count += 1
    assert count == 16 + 3 * 16 + 16  # x, three 2x4x2 projections, W_O


def test_the_loaded_arrays_are_the_files_numbers():
    data, ex = raw(), load_teaching_example()
    np.testing.assert_array_equal(ex.x, np.array(data["x"], dtype=float))
    assert ex.x.dtype == np.float64
    for name, a in ex.weights.arrays().items():
        np.testing.assert_array_equal(a, np.array(data[name], dtype=float), err_msg=name)
        assert a.dtype == np.float64, name
    assert list(ex.tokens) == data["tokens"]


def test_the_two_heads_look_at_different_keys_for_like():
    ex = load_teaching_example()
    t = trace(ex.x, ex.weights, ex.config)
    i = ex.tokens.index("like")
    favourite = [ex.tokens[int(np.argmax(t["weights"][h, i]))] for h in range(ex.config.n_heads)]
    assert favourite[0] != favourite[1], favourite
    for h in range(ex.config.n_heads):  # and each favourite clearly wins: no tie at two decimals
        top2 = np.sort(t["weights"][h, i])[-2:]
        assert top2[1] - top2[0] > 0.05, (h, top2)


def test_no_weight_row_is_uniform():
    ex = load_teaching_example()
    w = trace(ex.x, ex.weights, ex.config)["weights"]
    spread = w.max(axis=-1) - w.min(axis=-1)  # (heads, queries)
    assert (spread > 0.05).all(), spread  # visibly uneven at two decimals, for every query and head


def test_loading_twice_gives_equal_but_independent_arrays():
    a, b = load_teaching_example(), load_teaching_example()
    pairs = [("x", a.x, b.x)] + [(k, v, b.weights.arrays()[k]) for k, v in a.weights.arrays().items()]
    for name, u, v in pairs:
        np.testing.assert_array_equal(u, v, err_msg=name)
        assert u is not v and not np.shares_memory(u, v), name
    before = b.x.copy()
    a.x[0, 0] += 100.0
    a.weights.W_Q[0, 0, 0] += 100.0
    np.testing.assert_array_equal(b.x, before)
    assert load_teaching_example().weights.W_Q[0, 0, 0] != a.weights.W_Q[0, 0, 0]
    assert a.config == b.config and a.tokens == b.tokens


def test_the_description_matches_the_numbers():
    ex = load_teaching_example()
    words = {1: "one", 2: "two", 3: "three", 4: "four"}
    assert f"d_model {ex.config.d_model}" in ex.description
    assert f"{words[ex.config.n_heads]} heads of width {ex.config.d_head}" in ex.description.lower()
