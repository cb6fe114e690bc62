"""Gemma 3 270M (MQA, q/k norm, RoPE, sliding window; GGUF Q4_K_M joined from four packages)
against transformers' own GGUF loading, eager attention, float32."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from ._reference import assert_isolated, assert_matches, assert_same_tokens, decoder_runs, gguf_reference, max_abs, require

pytestmark = pytest.mark.models

TOL = 1e-3
RESIDUAL_RTOL = 4e-6  # |h| passes 100,000 here; see test_smollm2.py
WINDOW = 512
NOISE_FACTOR = 3.0  # on the long text, see test_a_long_text_matches_as_closely_as_float32_allows


def _long_text() -> str:
    """About 600 tokens of plain sentences: longer than the sliding window."""
    things = ["river", "lantern", "mountain", "teacher", "violin", "harbor", "garden", "engine"]
    places = ["the old bridge", "a quiet village", "the northern sea", "the busy market", "a dusty library"]
    moods = ["calm", "restless", "bright", "curious", "patient", "tired"]
    parts = [f"The {t} near {p} seemed {m}." for t, p, m in itertools.product(things, places, moods)]
    return " ".join(parts[:72])


SHORT = {
    "fox": "The quick brown fox jumps over the lazy dog.",
    "turn": "<start_of_turn>user\nExplain sliding-window attention in one sentence.<end_of_turn>\n<start_of_turn>model\n",
    "story": "Once upon a time, a small robot found a seed, planted it, and waited patiently for spring.",
}
SENTENCES = SHORT | {"long": _long_text()}


@pytest.fixture(scope="module")
def model():
    return require("gemma3")


@pytest.fixture(scope="module")
def reference(model):
    return gguf_reference(model)


@pytest.fixture(scope="module")
def runs(model, reference):
    return decoder_runs(model, reference[0], SENTENCES)


@pytest.mark.parametrize("key", SENTENCES)
def test_tokens_are_the_reference_tokenizers(model, reference, key):
    assert_same_tokens(model, reference[1], SENTENCES[key])


def test_the_long_text_is_longer_than_the_window(model):
    assert WINDOW + 40 < len(model.tokenize(SENTENCES["long"])) <= model.max_tokens


@pytest.fixture(scope="module")
def exact(model, reference, runs):
    """The reference in float64 on every text: the exact result that both float32 runs approximate."""
    import torch

    ref, _ = reference
    # torch's own casts: transformers refuses .float() on a model loaded from GGUF, although its
    # weights are plain dequantized float32 tensors, which the round trip restores exactly
    torch.nn.Module.double(ref)
    try:
        return decoder_runs(model, ref, SENTENCES)
    finally:
        torch.nn.Module.float(ref)


def assert_as_close_as_float32_allows(model, text, ref32, ref64, maxima, prefix: str) -> None:
    """End to end, each layer's input (the residual stream and, after the pre-norm, x) and output
    are within 1e-3 of the exact (float64) result, or no more than NOISE_FACTOR times further from
    it than transformers' own float32 run is; the weights match the float32 run to 1e-3."""
    for layer in range(model.n_layers):
        run = model.run(text, layer)
        weights_error = max_abs(run.trace["weights"], ref32.attentions[layer])
        maxima.record(model.name, f"{prefix}weights", weights_error)
        assert weights_error <= TOL, layer
        for name, ours, theirs, exact in (
            ("attention input", run.trace["x"], ref32.inputs[layer], ref64.inputs[layer]),
            ("attention output", run.trace["output"], ref32.outputs[layer], ref64.outputs[layer]),
            ("residual", run.residual, ref32.hidden[layer], ref64.hidden[layer]),
        ):
            ours_error, reference_error = max_abs(ours, exact), max_abs(theirs, exact)
            key = name.replace(" ", "_")
            maxima.record(model.name, f"{prefix}{key}_vs_float64", ours_error)
            maxima.record(model.name, f"{prefix}{key}_reference_float32_vs_float64", reference_error)
            if NOISE_FACTOR * reference_error > TOL:  # where the ratio, not 1e-3, is the test
                maxima.record(model.name, f"{prefix}{key}_error_ratio", ours_error / reference_error)
            assert ours_error <= max(TOL, NOISE_FACTOR * reference_error), (layer, name, ours_error, reference_error)


@pytest.mark.parametrize("key", SHORT)
def test_every_layer_matches_the_reference(model, runs, exact, maxima, key):
    """All 18 layers: weights = output_attentions, output = o_proj (hook), input = hidden state.
    float32 rounding differs with how a run's matrix products split their work, and the residual
    stream, past 100,000 in a few entries, amplifies it (once 0.148 off in a full run, 0.02 alone):
    where the float32 comparison fails, the test is the long text's, against the exact (float64)
    result."""
    assert model.n_layers == 18
    try:
        assert_matches(model, SENTENCES[key], runs[key], maxima, TOL, RESIDUAL_RTOL)
    except AssertionError as failed:
        maxima.record(model.name, "short_texts_judged_against_float64", 1.0)
        try:
            assert_as_close_as_float32_allows(model, SENTENCES[key], runs[key], exact[key], maxima, "short_")
        except AssertionError as also:
            raise AssertionError(f"{failed}; and against the exact result: {also}") from None
    assert_isolated(model, runs[key], exact[key], maxima, TOL, NOISE_FACTOR)


def test_a_long_text_matches_as_closely_as_float32_allows(model, runs, exact, maxima):
    """About 650 tokens through 18 layers. Here float32 rounding, amplified by a few residual entries
    near 100,000, moves even transformers' own float32 run more than 1e-3 away from the exact
    (float64) result in the later layers' inputs and outputs. So: every layer alone matches to 1e-3
    (our trace of the reference's own attention input), or as float32 allows (assert_isolated);
    the weights match to 1e-3 end to end; and
    end to end, the layer input and output are within 1e-3 of the exact result, or no more than
    NOISE_FACTOR times further from it than transformers' own float32 run is."""
    text, ref32, ref64 = SENTENCES["long"], runs["long"], exact["long"]
    assert_isolated(model, ref32, ref64, maxima, TOL, NOISE_FACTOR)
    assert_as_close_as_float32_allows(model, text, ref32, ref64, maxima, "long_")


def test_sliding_layers_hide_keys_beyond_the_window_and_full_layers_do_not(model, runs):
    text, ref = SENTENCES["long"], runs["long"]
    n = len(model.tokenize(text))
    far = slice(0, n - WINDOW)  # keys the last query cannot see through a window of 512
    sliding, _ = model.trace(text, 0)
    full, _ = model.trace(text, 5)
    assert sliding.config.sliding_window == WINDOW and full.config.sliding_window is None
    assert np.all(sliding["weights"][:, -1, far] == 0) and np.all(ref.attentions[0][:, -1, far] == 0)
    assert np.all(np.isneginf(sliding["mask"][:, -1, far]))
    assert full["weights"][:, -1, far].sum() > 0 and ref.attentions[5][:, -1, far].sum() > 0


def test_layer_configs_follow_the_gemma3_pattern(model):
    full = [i for i in range(18) if model.layer_config(i).sliding_window is None]
    assert full == [5, 11, 17]
    local, glob = model.layer_config(0), model.layer_config(5)
    assert (local.n_heads, local.n_kv_heads, local.d_head, local.kind) == (4, 1, 256, "MQA")
    assert local.qk_norm and local.causal and local.scale == pytest.approx(256**-0.5)
    assert (local.rope_theta, glob.rope_theta) == (10000.0, 1000000.0)
    t, _ = model.trace(SENTENCES["fox"], 0)
    assert list(t.stages)[4:10] == ["q_normed", "k_normed", "q_rotated", "k_rotated", "scores", "scaled"]
    assert t["q_normed"].shape == t["q"].shape and t["k_rotated"].shape == (1, t.n, 256)


def test_the_qk_norm_vectors_are_one_plus_the_checkpoints_weights_as_the_page_says(model, reference):
    """Gemma's RMSNorm multiplies by 1 + w; the page shows the multiplier and says so (norm_note)."""
    ref, _ = reference
    for layer in (0, 5):
        attention = ref.model.layers[layer].self_attn
        for ours, theirs in ((model.layer_weights(layer).q_norm, attention.q_norm), (model.layer_weights(layer).k_norm, attention.k_norm)):
            np.testing.assert_allclose(ours, 1 + theirs.weight.detach().numpy(), rtol=0, atol=1e-6)
    assert "multiplies by 1 + g" in model.arch.norm_note and "the learned w shown here for q and k is that 1 + g" in model.arch.norm_note


def test_a_layers_note_says_whether_it_is_local_or_global_as_transformers_config_has_it(model, reference):
    """Only the layer menu said which layers are global: the note says it where the Mask and
    Rotary stages show it, with each kind's window and rotary base, as transformers' config gives them."""
    ref, _ = reference
    cfg = ref.config
    full = [i for i, kind in enumerate(cfg.layer_types) if kind == "full_attention"]
    assert full == [5, 11, 17]
    for layer in (0, 5):
        note = model.arch.layer_note(layer)
        if layer in full:
            assert note.startswith(f"Layer {layer} is one of the model's {len(full)} global layers (5, 11, 17): its queries see every token before them, with no window")
        else:
            assert note.startswith(f"Layer {layer} is one of the model's {cfg.num_hidden_layers - len(full)} local layers: its queries see only the last {cfg.sliding_window} tokens")
        assert model.layer_config(layer).sliding_window == (None if layer in full else cfg.sliding_window)
        theta = model.layer_config(layer).rope_theta
        assert f"θ is {theta:,.0f}" in note


def test_the_layer_count_said_before_loading_is_the_models(model):
    from mha_explorer.models.registry import SPECS

    assert next(s for s in SPECS if s.name == "gemma3").n_layers == model.n_layers
    spec = next(s for s in SPECS if s.name == "gemma3")
    assert all(model.layer_config(layer).n_heads == spec.n_heads for layer in range(model.n_layers))  # said before it loads
    # the layer menu's outline before it loads: each layer's sliding window, as the loaded model has it
    assert [layer["sliding_window"] for layer in spec.outline()["layers"]] == [layer.get("sliding_window") for layer in model.config_summary()["layers"]]  # absent: every key


def test_a_long_texts_view_on_a_local_layer_starts_past_the_window(model):
    """A text longer than the window began, on a local layer, at its middle word, before position
    512: its mask showed the causal cut alone, and the window's went unseen until a later query
    was picked. It starts at the middle word past the window; a global layer's at the middle word."""
    from mha_explorer.modelview import middle_word

    text = " ".join(["Attention lets every token read from the tokens before it."] * 60)
    window = model.layer_config(0).sliding_window
    local = model.run(text, 0)
    n = len(local.tokens)
    assert window < n < 2 * window  # the text's middle word lies inside the window
    query = middle_word(local, model)
    assert window <= query < n - 1
    row = local.trace["mask"][0, query]  # head 0's scaled scores after the mask: -inf where masked
    assert np.isneginf(row[: query - window + 1]).all() and np.isneginf(row[query + 1 :]).all()  # cut on both sides
    assert np.isfinite(row[query - window + 1 : query + 1]).all()
    assert middle_word(model.run(text, 5), model) < window  # a global layer: the middle word, as before


def test_a_damaged_copy_joined_from_the_parts_says_to_delete_it(tmp_path, monkeypatch):
    """Gemma 3's file is joined from its packages' parts into the cache, checked against their
    SHA-256 once. Damaged since (same size: not joined again), it was refused as "the checkpoint is
    damaged", with nothing saying that the file is the explorer's own copy, which a delete mends."""
    from mha_explorer.models import CheckpointError, registry
    from mha_explorer.models.readers import GGUFFile

    require("gemma3")
    monkeypatch.setenv("MHA_EXPLORER_CACHE", str(tmp_path))
    spec = next(s for s in registry.SPECS if s.name == "gemma3")
    assert registry._load_named(spec, lambda *_: None).n_layers == 18
    joined = tmp_path / spec.joined_name
    start = GGUFFile(joined).tensors["blk.0.attn_q.weight"].start
    with joined.open("r+b") as f:
        f.seek(start)
        f.write(b"\xff" * 4096)  # the blocks' scales NaN
    with pytest.raises(CheckpointError, match=rf"NaN.*\. {joined} is the explorer's own copy, joined from {spec.package}'s parts, and damaged since: delete it, and it is joined again, and checked, at the next load$"):
        registry._load_named(spec, lambda *_: None)
    joined.unlink()
    assert registry._load_named(spec, lambda *_: None).n_layers == 18
    # refused though whole (its checksum matches): nothing said of deleting it, which would mend nothing
    def refused(*args, **kwargs):
        raise CheckpointError("some other fault")

    monkeypatch.setattr(registry, "open_checkpoint", refused)
    with pytest.raises(CheckpointError, match="^some other fault$"):
        registry._load_named(spec, lambda *_: None)
