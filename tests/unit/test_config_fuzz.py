"""Property-based: any values given to AttentionConfig either make a consistent config or a ConfigError
that names the field to change, never another exception."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mha_explorer.config import AttentionConfig, ConfigError

pytestmark = pytest.mark.unit

FIELDS = ("d_model", "n_heads", "n_kv_heads", "d_head", "d_v")
anything = st.one_of(st.integers(-3, 40), st.none(), st.booleans(), st.floats(allow_nan=True), st.text(max_size=3))


@settings(max_examples=400, deadline=None)
@given(values=st.fixed_dictionaries({name: anything for name in FIELDS}), causal=st.one_of(st.booleans(), st.integers(0, 2)))
def test_a_config_is_consistent_or_says_what_to_change(values, causal):
    given_fields = {k: v for k, v in values.items() if not (k in ("d_model", "n_heads") and v is None)}
    try:
        config = AttentionConfig(**given_fields, causal=causal)
    except ConfigError as error:
        message = str(error)
        assert any(name in message for name in (*FIELDS, "causal")), message
        return
    except TypeError as error:  # d_model or n_heads left out: Python's own message names it
        assert "d_model" in str(error) or "n_heads" in str(error)
        return
    assert config.n_heads % config.n_kv_heads == 0 and config.n_kv_heads <= config.n_heads
    assert min(config.d_model, config.n_heads, config.n_kv_heads, config.d_head, config.d_v) >= 1
    assert len(config.kv_group) == config.n_heads and max(config.kv_group) == config.n_kv_heads - 1
    assert config.causal in (True, False)
