"""all-MiniLM-L6-v2 (BERT encoder, from safetensors) against transformers' BertModel, eager attention."""

from __future__ import annotations

import numpy as np
import pytest

from ._reference import assert_matches, compare_isolated, require, run_reference

pytestmark = pytest.mark.models

TOL = 1e-4
SENTENCES = {
    "fox": "The quick brown fox jumps over the lazy dog.",
    "heads": "Attention lets every token look at every other token, and the heads do it in parallel.",
    "accents": "Unbelievably, naïve café owners in Zürich didn't mind the 42 rainy days!",
}


@pytest.fixture(scope="module")
def model():
    return require("minilm")


@pytest.fixture(scope="module")
def reference(model):
    import torch
    from transformers import AutoModel, AutoTokenizer

    ref = AutoModel.from_pretrained(model.source, attn_implementation="eager", dtype=torch.float32).eval()
    return ref, AutoTokenizer.from_pretrained(model.source)


@pytest.fixture(scope="module")
def runs(model, reference):
    ref, _ = reference
    layers = ref.encoder.layer
    return {
        key: run_reference(
            ref,
            model.tokenizer.encode(text).ids,
            [layer.attention.self for layer in layers],
            [layer.attention.output.dense for layer in layers],
        )
        for key, text in SENTENCES.items()
    }


@pytest.mark.parametrize("key", SENTENCES)
def test_tokens_are_the_reference_tokenizers(model, reference, key):
    _, tokenizer = reference
    ids = tokenizer(SENTENCES[key], padding=False, truncation=False)["input_ids"]
    assert model.tokenize(SENTENCES[key]) == tokenizer.convert_ids_to_tokens(ids)
    assert model.tokenizer.encode(SENTENCES[key]).ids.tolist() == ids


@pytest.mark.parametrize("key", SENTENCES)
def test_every_layer_matches_the_reference(model, runs, maxima, key):
    """Weights = output_attentions, output = the output projection (hook), input = hidden state."""
    assert model.n_layers == 6
    assert_matches(model, SENTENCES[key], runs[key], maxima, TOL)  # no residual_rtol: the stream stays small here
    assert max(compare_isolated(model, runs[key], maxima).values()) <= TOL


def test_the_trace_is_the_layer_the_api_names(model, runs):
    t, tokens = model.trace(SENTENCES["fox"], 3)
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]"
    assert list(t.stages) == ["x", "q", "k", "v", "scores", "scaled", "weights", "z", "concat", "output", "contributions"]
    assert t["weights"].shape == (12, len(tokens), len(tokens))
    np.testing.assert_allclose(t["weights"], runs["fox"].attentions[3], atol=TOL)
    assert model.config_summary()["kind"] == "MHA" and not model.layer_config(0).causal


def test_a_checkpoint_directory_path_loads_the_same_model(model):
    from mha_explorer.models import load_model

    by_path = load_model(model.source)
    assert by_path is not model and by_path.origin == "local checkpoint"
    a, _ = model.trace(SENTENCES["heads"], 5)
    b, _ = by_path.trace(SENTENCES["heads"], 5)
    np.testing.assert_array_equal(a["output"], b["output"])
    assert load_model(model.source) is by_path  # cached per process


def test_text_longer_than_the_model_takes_is_refused(model):
    from mha_explorer.models import ModelError

    assert model.max_tokens == 512
    with pytest.raises(ModelError, match="at most 512"):
        model.trace("word " * 600, 0)
    with pytest.raises(ModelError, match="layers 0 to 5"):
        model.trace("fine", 6)
    # a layer of another type is said to be one, not to be missing
    for layer in ("2", 2.0, True):
        with pytest.raises(ModelError, match=rf"layer {layer!r} is {type(layer).__name__}, not a whole number: give an int from 0 to 5"):
            model.trace("fine", layer)


@pytest.mark.parametrize(
    "text, said",
    [(None, "the text is NoneType, not str"), (["a cat", "a dog"], r"the text is list, not str: give a sentence as a str \(one text a call\)"), (b"a cat", r"the text is bytes, not str: give a sentence as a str \(decode bytes first\)"), ("", "the text is empty"), (" \n", "the text holds only spaces or line breaks: give a sentence"), ("\u200b\u200b", r"the text has nothing all-MiniLM-L6-v2's tokenizer keeps \(only \[CLS\] \[SEP\]\): give a sentence of words")],
)
def test_a_text_that_is_not_a_sentence_is_said_for_what_it_is(model, text, said):
    from mha_explorer.models import ModelError

    with pytest.raises(ModelError, match=said):
        model.trace(text, 0)


def test_special_tokens_typed_in_the_text_are_the_texts_own(model):
    """[SEP] [MASK] typed: special tokens, but the text's, not only those the tokenizer adds."""
    _, tokens = model.trace("[SEP] [MASK]", 0)
    assert tokens == ["[CLS]", "[SEP]", "[MASK]", "[SEP]"]


def test_the_layer_count_said_before_loading_is_the_models(model):
    from mha_explorer.models.registry import SPECS

    assert next(s for s in SPECS if s.name == "minilm").n_layers == model.n_layers
    spec = next(s for s in SPECS if s.name == "minilm")
    assert all(model.layer_config(layer).n_heads == spec.n_heads for layer in range(model.n_layers))  # said before it loads


def test_a_model_is_named_in_any_case_and_loaded_once(model, tmp_path, monkeypatch):
    """"MiniLM", as the page and the README write it, is minilm: the same loaded model, not a second
    copy; a folder of that name in the working directory is a checkpoint's path, and stays one."""
    from mha_explorer import Explorer
    from mha_explorer.models import ModelError, load_model

    assert load_model("MiniLM") is model and load_model(" MINILM ") is model
    view = Explorer.from_model(model, text="cats like milk", layer=2)  # a model load_model gave
    assert repr(view).startswith("Explorer(minilm, layer 2, 5 tokens")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "MiniLM").mkdir()
    with pytest.raises(ModelError, match="MiniLM holds no checkpoint"):  # an empty folder: no checkpoint, said as the folder's
        load_model("MiniLM")
    with pytest.raises(ModelError, match=r"progress is int; give a function of \(fraction, message\), or None"):
        load_model("minilm", progress=5)
