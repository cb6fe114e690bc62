"""AttentionConfig: defaults, kinds, key/value groups, and errors that say what to change."""

from __future__ import annotations

import dataclasses
import json

import numpy as np

import pytest

from mha_explorer.config import PRESETS, AttentionConfig, ConfigError

pytestmark = pytest.mark.unit


def test_defaults_follow_d_model_and_n_heads():
    c = AttentionConfig(d_model=12, n_heads=3)
    assert (c.n_kv_heads, c.d_head, c.d_v, c.causal, c.bias) == (3, 4, 4, False, False)


def test_d_v_defaults_to_an_explicit_d_head():
    c = AttentionConfig(d_model=6, n_heads=4, d_head=5)
    assert (c.d_head, c.d_v) == (5, 5)


def test_explicit_widths_need_no_divisibility():
    c = AttentionConfig(d_model=7, n_heads=3, d_head=2, d_v=9)
    assert (c.d_model, c.n_heads, c.d_head, c.d_v) == (7, 3, 2, 9)


@pytest.mark.parametrize(
    ("n_heads", "n_kv_heads", "kind", "kv_group"),
    [
        (4, None, "MHA", (0, 1, 2, 3)),
        (4, 4, "MHA", (0, 1, 2, 3)),
        (6, 3, "GQA", (0, 0, 1, 1, 2, 2)),
        (6, 2, "GQA", (0, 0, 0, 1, 1, 1)),
        (4, 1, "MQA", (0, 0, 0, 0)),
        (1, 1, "MHA", (0,)),
    ],
    ids=["mha-default", "mha", "gqa-pairs", "gqa-triples", "mqa", "single-head"],
)
def test_kind_and_kv_group(n_heads, n_kv_heads, kind, kv_group):
    c = AttentionConfig(d_model=12, n_heads=n_heads, n_kv_heads=n_kv_heads)
    assert c.kind == kind
    assert c.kv_group == kv_group


ERRORS = [
    (dict(d_model=8, n_heads=6, n_kv_heads=4), "n_heads=6 is not a multiple of n_kv_heads=4: choose n_kv_heads from [1, 2, 3, 6]"),
    (dict(d_model=8, n_heads=4, n_kv_heads=8), "n_kv_heads=8 is more than n_heads=4: use at most 4 key/value heads, one of [1, 2, 4]"),
    (dict(d_model=6, n_heads=4), "d_model=6 is not divisible by n_heads=4: set d_head explicitly or choose n_heads dividing 6"),
    (dict(d_model=0, n_heads=1), "d_model=0 must be at least 1"),
    (dict(d_model=4, n_heads=-2), "n_heads=-2 must be at least 1"),
    (dict(d_model=4, n_heads=2, n_kv_heads=0), "n_kv_heads=0 must be at least 1"),
    (dict(d_model=4, n_heads=2, d_head=0), "d_head=0 must be at least 1"),
    (dict(d_model=4, n_heads=2, d_v=0), "d_v=0 must be at least 1"),
    (dict(d_model=True, n_heads=1), "d_model=True must be a whole number such as 4"),
    (dict(d_model=4, n_heads=False), "n_heads=False must be a whole number such as 4"),
    (dict(d_model=4.0, n_heads=2), "d_model=4.0 must be an int: write 4, not 4.0"),
    (dict(d_model="4", n_heads=2), "d_model='4' must be a whole number such as 4"),
    (dict(d_model=4, n_heads=None), "n_heads=None must be a whole number such as 4"),
    (dict(d_model=4, n_heads=2, d_head=2.5), "d_head=2.5 must be a whole number such as 4"),
    (dict(d_model=4, n_heads=2, n_kv_heads=True), "n_kv_heads=True must be a whole number such as 4"),
    (dict(d_model=4, n_heads=2, causal=1), "causal=1 must be true or false"),
    (dict(d_model=4, n_heads=2, bias="yes"), "bias='yes' must be true or false"),
    (dict(d_model=4, n_heads=2, causal=None), "causal=None must be true or false"),
]


@pytest.mark.parametrize(
    ("kwargs", "message"), ERRORS, ids=[",".join(f"{k}={v!r}" for k, v in kw.items()) for kw, _ in ERRORS]
)
def test_errors_say_what_to_change(kwargs, message):
    with pytest.raises(ConfigError) as err:
        AttentionConfig(**kwargs)
    assert str(err.value) == message


def test_config_error_is_a_value_error():
    assert issubclass(ConfigError, ValueError)


def test_frozen():
    c = AttentionConfig(d_model=4, n_heads=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.n_heads = 4  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.kv_group = (0, 0)  # type: ignore[misc]


def test_equal_configs_compare_and_hash_equal():
    a = AttentionConfig(d_model=8, n_heads=4)
    b = AttentionConfig(d_model=8, n_heads=4, n_kv_heads=4, d_head=2, d_v=2)
    assert a == b and hash(a) == hash(b)
    assert a != AttentionConfig(d_model=8, n_heads=4, causal=True)


def test_kv_group_cannot_be_passed_in():
    with pytest.raises(TypeError):
        AttentionConfig(d_model=4, n_heads=2, kv_group=(0, 0))  # type: ignore[call-arg]


def test_replace_revalidates_and_regroups():
    c = AttentionConfig(d_model=8, n_heads=4)
    assert dataclasses.replace(c, n_kv_heads=2).kv_group == (0, 0, 1, 1)
    assert dataclasses.replace(c, causal=True).causal is True
    with pytest.raises(ConfigError, match="n_heads=4 is not a multiple of n_kv_heads=3"):
        dataclasses.replace(c, n_kv_heads=3)


def test_to_dict_round_trips_and_has_no_derived_fields():
    c = AttentionConfig(d_model=8, n_heads=4, n_kv_heads=2, d_head=3, d_v=5, causal=True, bias=True)
    d = c.to_dict()
    assert d == {"d_model": 8, "n_heads": 4, "n_kv_heads": 2, "d_head": 3, "d_v": 5, "causal": True, "bias": True}
    assert AttentionConfig(**d) == c


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_are_valid_and_named_for_what_they_are(name):
    c = PRESETS[name]
    assert AttentionConfig(**c.to_dict()) == c
    if name in ("mha", "gqa", "mqa"):
        assert c.kind == name.upper()
    if name == "causal":
        assert c.causal


def test_numpy_numbers_stand_for_python_ones():
    config = AttentionConfig(
        d_model=np.int64(8), n_heads=np.int32(2), n_kv_heads=np.int64(1), causal=np.bool_(True), scale=np.float32(0.5)
    )
    assert config == AttentionConfig(d_model=8, n_heads=2, n_kv_heads=1, causal=True, scale=0.5)
    assert type(config.d_model) is int and type(config.causal) is bool and type(config.scale) is float
    json.dumps(config.to_dict())  # plain values only
    with pytest.raises(ConfigError, match="must be true or false"):
        AttentionConfig(d_model=8, n_heads=2, causal=np.int64(1))
    with pytest.raises(ConfigError, match="must be an int: write 8, not"):
        AttentionConfig(d_model=np.float64(8.0), n_heads=2)
