"""SmolLM2-135M-Instruct (Llama decoder, GQA, RoPE; GGUF Q4_1) against transformers' own GGUF loading.

transformers dequantizes the same file with the gguf package and undoes llama.cpp's q/k row
order itself, then runs LlamaForCausalLM with eager attention in float32.
"""

from __future__ import annotations

import numpy as np
import pytest

from ._reference import assert_matches, assert_same_tokens, compare_isolated, decoder_runs, gguf_reference, require

pytestmark = pytest.mark.models

TOL = 1e-3
# The residual stream reaches |h| ~ 22,500 in layers 12-28, where float32 numbers are 0.002 apart:
# there the layer input is compared to 1e-3 + RESIDUAL_RTOL * |h| (the attention input x, after the
# RMSNorm, is compared to 1e-3 absolute everywhere).
RESIDUAL_RTOL = 4e-6
SENTENCES = {
    "fox": "The quick brown fox jumps over the lazy dog.",
    "chat": "<|im_start|>user\nWhy do transformers need several attention heads?<|im_end|>\n<|im_start|>assistant\n",
    "story": "Once upon a time, a small robot found a seed, planted it, and waited patiently for spring.",
}


@pytest.fixture(scope="module")
def model():
    return require("smollm2")


@pytest.fixture(scope="module")
def reference(model):
    return gguf_reference(model)


@pytest.fixture(scope="module")
def runs(model, reference):
    return decoder_runs(model, reference[0], SENTENCES)


@pytest.mark.parametrize("key", SENTENCES)
def test_tokens_are_the_reference_tokenizers(model, reference, key):
    assert_same_tokens(model, reference[1], SENTENCES[key])


def test_digits_are_split_one_by_one_as_the_model_was_trained():
    """The file's pre-tokenizer type, "smollm", cuts every digit off (as SmolLM2's own tokenizer.json
    does). transformers' GGUF tokenizer ignores that type and keeps "2024" whole, so the tests' sentences
    avoid numbers of two or more digits."""
    assert require("smollm2").tokenize("in 2024") == ["in", "Ġ", "2", "0", "2", "4"]


@pytest.mark.parametrize("key", SENTENCES)
def test_every_layer_matches_the_reference(model, runs, maxima, key):
    """All 30 layers: weights = output_attentions, output = o_proj (hook), input = hidden state."""
    assert model.n_layers == 30
    assert_matches(model, SENTENCES[key], runs[key], maxima, TOL, RESIDUAL_RTOL)
    assert max(compare_isolated(model, runs[key], maxima).values()) <= TOL


def test_layer_config_is_gqa_with_rope_and_a_causal_mask(model):
    c = model.layer_config(29)
    assert (c.d_model, c.n_heads, c.n_kv_heads, c.d_head, c.kind) == (576, 9, 3, 64, "GQA")
    assert c.causal and c.rope_theta == 100000.0 and not c.qk_norm and c.sliding_window is None
    t, tokens = model.trace(SENTENCES["fox"], 0)
    assert list(t.stages)[4:8] == ["q_rotated", "k_rotated", "scores", "scaled"]
    assert "mask" in t.stages and np.all(np.triu(t["weights"], k=1) == 0)
    # position 0 is not turned at all: RoPE's angle there is 0
    np.testing.assert_array_equal(t["q_rotated"][:, 0], t["q"][:, 0])


def test_the_layer_count_said_before_loading_is_the_models(model):
    from mha_explorer.models.registry import SPECS

    assert next(s for s in SPECS if s.name == "smollm2").n_layers == model.n_layers
    spec = next(s for s in SPECS if s.name == "smollm2")
    assert all(model.layer_config(layer).n_heads == spec.n_heads for layer in range(model.n_layers))  # said before it loads
