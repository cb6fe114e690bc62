"""A user's own checkpoint: small random Llama and Gemma 3 models that transformers writes in the
Hugging Face layout (config.json, model.safetensors) here, with a tokenizer.json beside them, loaded
by path and compared with transformers layer by layer. The Gemma 3 one has a sliding window of 4,
a score scale that is not 1/sqrt(d_head) and norm weights that are not zero, so every extra stage
and the "1 + w" of its norms matter."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest

from ._reference import max_abs, require, run_reference

pytestmark = pytest.mark.models

TOL = 1e-4  # values reach about 10 here; float32 keeps 7 digits
TEXT = "Small random models still have to match, token for token and layer by layer."


def tokenizer_json():
    return require("minilm").source + "/tokenizer.json"  # any tokenizer.json will do: WordPiece, 30522 ids


def build(kind: str, folder):
    import torch
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    common = dict(vocab_size=30522, hidden_size=64, intermediate_size=96, num_attention_heads=4, max_position_embeddings=256)
    if kind == "llama":
        config = LlamaConfig(**common, num_hidden_layers=3, num_key_value_heads=2, rope_theta=5000.0, rms_norm_eps=1e-5)
        model = LlamaForCausalLM(config)
    else:
        config = Gemma3TextConfig(
            **common,
            num_hidden_layers=6,
            num_key_value_heads=1,
            head_dim=32,
            sliding_window=4,
            query_pre_attn_scalar=20,
            rope_theta=1e6,
            rope_local_base_freq=1e4,
        )
        model = Gemma3ForCausalLM(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.normal_(0.0, 0.5)  # Gemma multiplies by 1 + w: make w matter
            else:
                p.normal_(0.0, 0.08)
    model.save_pretrained(folder, safe_serialization=True)
    shutil.copy(tokenizer_json(), folder / "tokenizer.json")
    return model.float().eval()


@pytest.mark.parametrize("kind", ["llama", "gemma3"])
def test_a_local_checkpoint_matches_transformers(tmp_path, kind):
    from transformers import AutoModelForCausalLM

    from mha_explorer.models import load_model

    build(kind, tmp_path)
    reference = AutoModelForCausalLM.from_pretrained(tmp_path, attn_implementation="eager").float().eval()
    ours = load_model(tmp_path)
    assert ours.origin == "local checkpoint" and ours.arch.family == kind
    ids = ours.tokenizer.encode(TEXT).ids
    layers = reference.model.layers
    ref = run_reference(reference, ids, [l.self_attn for l in layers], [l.self_attn.o_proj for l in layers])
    for layer in range(ours.n_layers):
        run = ours.run(TEXT, layer)
        assert max_abs(run.trace["weights"], ref.attentions[layer]) <= TOL, layer
        assert max_abs(run.trace["output"], ref.outputs[layer]) <= TOL, layer
        assert max_abs(run.trace["x"], ref.inputs[layer]) <= TOL, layer
        assert max_abs(run.residual, ref.hidden[layer]) <= TOL, layer
    if kind == "gemma3":
        sliding, full = ours.layer_config(0), ours.layer_config(5)
        assert (sliding.sliding_window, full.sliding_window, sliding.scale) == (4, None, 20**-0.5)
        t = ours.run(TEXT, 0).trace
        assert np.all(t["weights"][:, -1, :-4] == 0) and "q_normed" in t.stages


def test_a_local_gguf_file_loads_by_path():
    from mha_explorer.models import load_model

    named = require("smollm2")
    by_path = load_model(named.source)
    assert by_path is not named and by_path.config_summary()["layers"] == named.config_summary()["layers"]
    a, _ = named.trace("A short check.", 29)
    b, _ = by_path.trace("A short check.", 29)
    np.testing.assert_array_equal(a["output"], b["output"])


def test_a_load_waits_only_for_loads_of_the_same_model(tmp_path, monkeypatch):
    """Models load one at a time each, not one at a time in all: a small one chosen while a big
    one loads is ready in its own time."""
    import threading
    import time

    from mha_explorer.models import registry

    source = require("minilm").source
    for name in ("slow", "quick"):
        shutil.copytree(source, tmp_path / name)
    release = threading.Event()
    opened = []
    real = registry.open_checkpoint

    def open_checkpoint(path, progress, **kwargs):
        opened.append(path.name)
        if path.name == "slow":
            release.wait(20)  # a load that takes until the test says (at most 20 s)
        return real(path, progress, **kwargs)

    monkeypatch.setattr(registry, "open_checkpoint", open_checkpoint)
    slow = threading.Thread(target=registry.load_model, args=(str(tmp_path / "slow"),))
    slow.start()
    while "slow" not in opened:
        time.sleep(0.01)
    start = time.monotonic()
    quick = registry.load_model(str(tmp_path / "quick"))  # behind one lock for all, it would wait 20 s
    assert time.monotonic() - start < 10 and quick.n_layers == 6
    twice = threading.Thread(target=registry.load_model, args=(str(tmp_path / "slow"),))  # the same model waits
    twice.start()
    release.set()
    slow.join()
    twice.join()
    assert opened == ["slow", "quick"], opened  # the second load of slow took the first one's model


def test_a_base_models_save_without_the_model_prefix_loads_the_same_weights(tmp_path):
    """LlamaModel.save_pretrained (an embedding model's layout) names its tensors without "model.":
    read from there, the same weights trace to the very same numbers."""
    from mha_explorer.models import load_model

    model = build("llama", tmp_path / "causal")
    model.model.save_pretrained(tmp_path / "base", safe_serialization=True)
    shutil.copy(tokenizer_json(), tmp_path / "base" / "tokenizer.json")
    causal, base = load_model(tmp_path / "causal"), load_model(tmp_path / "base")
    for layer in range(causal.n_layers):
        np.testing.assert_array_equal(base.run(TEXT, layer).trace["output"], causal.run(TEXT, layer).trace["output"])


def save(model, folder):
    model.save_pretrained(folder, safe_serialization=True)
    shutil.copy(tokenizer_json(), folder / "tokenizer.json")


REFUSED = {
    "gemma3-attention-bias": "attention_bias is True; the Gemma 3 converter supports models without it",
    "bert-decoder": "is_decoder is True; the BERT converter supports False only",
    "tokenizer-of-another-model": "the tokenizer has 30522 tokens and the embedding table 1000 rows: the tokenizer does not belong to this checkpoint",
    "llama-linear-rope": "rope_parameters asks for RoPE scaling 'linear'; supported: default",
    # the old key beside a new one that says default: transformers scales all the same
    "llama-linear-rope-in-the-old-key": "rope_scaling asks for RoPE scaling 'linear'; supported: default",
    # one base for every layer, as Llama's: transformers keeps Gemma 3's per layer type (1e6, 1e4)
    "gemma3-flat-rope-parameters": "config.json: rope_parameters gives one rope_theta (50000.0) for every layer; Gemma 3's is per layer type",
}


@pytest.mark.parametrize("kind", REFUSED)
def test_a_checkpoint_that_would_trace_wrong_numbers_is_refused_saying_why(tmp_path, kind):
    """Each loads in transformers; read by us as it is, it would give other numbers (biases not
    added, no causal mask, token ids past the embeddings): it is refused instead."""
    from transformers import BertConfig, BertModel, Gemma3ForCausalLM, Gemma3TextConfig, LlamaConfig, LlamaForCausalLM

    from mha_explorer.models import CheckpointError, load_model

    small = dict(hidden_size=32, intermediate_size=64, num_attention_heads=2, num_hidden_layers=1, max_position_embeddings=64)
    if kind == "gemma3-attention-bias":
        save(Gemma3ForCausalLM(Gemma3TextConfig(**small, vocab_size=30522, num_key_value_heads=1, head_dim=16, attention_bias=True)), tmp_path)
    elif kind == "gemma3-flat-rope-parameters":
        save(Gemma3ForCausalLM(Gemma3TextConfig(**small, vocab_size=30522, num_key_value_heads=1, head_dim=16)), tmp_path)
        cfg = json.loads((tmp_path / "config.json").read_text())
        (tmp_path / "config.json").write_text(json.dumps(cfg | {"rope_parameters": {"rope_type": "default", "rope_theta": 50000.0}}))
        # what transformers makes of it: the flat base unused, Gemma 3's own per layer type
        from transformers import AutoConfig

        read = AutoConfig.from_pretrained(tmp_path).rope_parameters
        assert read["full_attention"]["rope_theta"] == 1e6 and read["sliding_attention"]["rope_theta"] == 1e4
    elif kind == "bert-decoder":
        save(BertModel(BertConfig(**small, vocab_size=30522, is_decoder=True)), tmp_path)
    elif kind == "tokenizer-of-another-model":
        save(LlamaForCausalLM(LlamaConfig(**small, vocab_size=1000, num_key_value_heads=2)), tmp_path)
    else:
        save(LlamaForCausalLM(LlamaConfig(**small, vocab_size=30522, num_key_value_heads=2)), tmp_path)
        cfg = json.loads((tmp_path / "config.json").read_text())
        linear = {"rope_type": "linear", "factor": 2.0}
        if kind == "llama-linear-rope":
            cfg["rope_parameters"] = cfg["rope_parameters"] | linear
        else:
            cfg["rope_scaling"] = linear
        (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match=re.escape(REFUSED[kind])):
        load_model(tmp_path)


def test_a_sharded_save_loads_and_a_missing_or_doubled_shard_is_said(tmp_path):
    """save_pretrained with a small max_shard_size writes shards and model.safetensors.index.json."""
    from mha_explorer.models import CheckpointError, load_model

    model = build("llama", tmp_path / "one")
    sharded = tmp_path / "sharded"
    model.save_pretrained(sharded, safe_serialization=True, max_shard_size="2MB")
    shutil.copy(tokenizer_json(), sharded / "tokenizer.json")
    shards = sorted(sharded.glob("model-*.safetensors"))
    assert len(shards) > 1 and (sharded / "model.safetensors.index.json").is_file()
    np.testing.assert_array_equal(load_model(sharded).run(TEXT, 2).trace["output"], load_model(tmp_path / "one").run(TEXT, 2).trace["output"])

    stale = tmp_path / "stale"
    shutil.copytree(sharded, stale)
    shutil.copy(tmp_path / "one" / "model.safetensors", stale / "model.safetensors")
    with pytest.raises(CheckpointError, match="holds model.safetensors and the shards model.safetensors.index.json lists: keep one"):
        load_model(stale)
    missing = tmp_path / "missing"  # a fresh path: a loaded model is kept by its path
    shutil.copytree(sharded, missing)
    (missing / shards[-1].name).unlink()
    with pytest.raises(CheckpointError, match=f"lacks {shards[-1].name}, which model.safetensors.index.json lists"):
        load_model(missing)


def test_a_gemma3_config_without_its_scale_or_rope_bases_is_read_with_transformers_defaults(tmp_path):
    """A hand-written config.json may leave out query_pre_attn_scalar and the RoPE bases:
    transformers then takes Gemma 3's own (256; 1e6 and 1e4), not 1/sqrt(d_head) and Llama's 1e4."""
    import json

    import torch
    from transformers import AutoModelForCausalLM, Gemma3ForCausalLM, Gemma3TextConfig

    from mha_explorer.models import load_model

    torch.manual_seed(1)
    config = Gemma3TextConfig(vocab_size=30522, hidden_size=64, intermediate_size=96, num_attention_heads=4, num_key_value_heads=2,
                              head_dim=16, num_hidden_layers=6, sliding_window=4, max_position_embeddings=256)
    save(Gemma3ForCausalLM(config), tmp_path)
    file = tmp_path / "config.json"
    cfg = json.loads(file.read_text())
    for key in ("query_pre_attn_scalar", "rope_parameters", "rope_theta", "rope_local_base_freq"):
        cfg.pop(key, None)
    file.write_text(json.dumps(cfg))
    reference = AutoModelForCausalLM.from_pretrained(tmp_path, attn_implementation="eager").float().eval()
    assert reference.config.query_pre_attn_scalar == 256  # what transformers read the trimmed config as
    ours = load_model(tmp_path)
    assert ours.layer_config(0).scale == 256**-0.5 and ours.layer_config(5).rope_theta == 1e6 and ours.layer_config(0).rope_theta == 1e4
    ids = ours.tokenizer.encode(TEXT).ids
    layers = reference.model.layers
    ref = run_reference(reference, ids, [l.self_attn for l in layers], [l.self_attn.o_proj for l in layers])
    for layer in (0, 5):  # a sliding layer and the full one
        run = ours.run(TEXT, layer)
        assert max_abs(run.trace["weights"], ref.attentions[layer]) <= TOL, layer
        assert max_abs(run.residual, ref.hidden[layer]) <= TOL, layer


DAMAGED_CONFIGS = {
    "num_hidden_layers is null": ({"num_hidden_layers": None}, "config.json: num_hidden_layers is null; give a whole number"),
    "a word for a size": ({"hidden_size": "sixty-four"}, "config.json: hidden_size is 'sixty-four'; give a whole number, 1 or more"),
    "no layers": ({"num_hidden_layers": 0}, "config.json: num_hidden_layers is 0; give a whole number, 1 or more"),
    "a negative epsilon": ({"rms_norm_eps": -1e-5}, "config.json: rms_norm_eps is -1e-05; give a number above 0"),
    "heads that do not share": (
        {"num_key_value_heads": 3},
        "config.json gives an attention layer that cannot be built: num_attention_heads=4 is not a multiple of num_key_value_heads=3: choose num_key_value_heads from [1, 2, 4]",
    ),
    "more K/V heads than the tensors hold": (
        {"num_key_value_heads": 4},
        "model.layers.0.self_attn.k_proj.weight has shape (32, 64), not (64, 64) as config.json gives it: num_key_value_heads × head_dim (4 × 16 = 64), where the tensor has 32. Set those to fit the tensor",
    ),
    "a width the embeddings do not have": (
        {"hidden_size": 128},
        "model.embed_tokens.weight has shape (30522, 64); expected (vocab, 128), the model width config.json's hidden_size gives",
    ),
    "an MLP width the tensors do not have": (
        {"intermediate_size": 128},
        "model.layers.0.mlp.gate_proj.weight has shape (96, 64), not (128, 64) as config.json gives it: intermediate_size (128), where the tensor has 96. Set those to fit the tensor",
    ),
    "heads that do not divide the width": (
        {"num_attention_heads": 5, "num_key_value_heads": 5, "head_dim": None},
        "config.json: hidden_size 64 is not divisible by num_attention_heads 5; give a head count that divides it, or the head width as head_dim",
    ),
    "more layers than it holds": (
        {"num_hidden_layers": 5},
        "config.json's num_hidden_layers is 5, but the checkpoint holds no layer 3 (no model.layers.3.self_attn.q_proj.weight): give the number of layers it holds",
    ),
    "a word for the rope base": (
        {"rope_parameters": {"rope_type": "default", "rope_theta": "x"}, "rope_theta": None},
        "config.json: rope_parameters' rope_theta is 'x'; give a number above 0",
    ),
    "a vocabulary the embeddings do not have": ({"vocab_size": 1000}, "config.json: vocab_size is 1000, but the embedding table has 30522 rows; set vocab_size to 30522"),
    "a scaling named, not given (it was read as none)": (
        {"rope_scaling": "linear"},
        "config.json: rope_scaling is 'linear'; transformers writes it as an object",
    ),
}


def test_a_gguf_files_attention_that_cannot_be_built_is_said_in_its_metadatas_keys():
    from mha_explorer.models.registry import said_as_keys

    said = said_as_keys("rope_theta needs an even d_head to rotate pairs of components; d_head=5 is odd", False, "gemma3")
    assert said == "gemma3.rope.freq_base needs an even gemma3.attention.key_length to rotate pairs of components; gemma3.attention.key_length=5 is odd"
    said = said_as_keys("n_heads=9 is not a multiple of n_kv_heads=2: choose n_kv_heads from [1, 3, 9]", False, "llama")
    assert said == "llama.attention.head_count=9 is not a multiple of llama.attention.head_count_kv=2: choose llama.attention.head_count_kv from [1, 3, 9]"
    assert said_as_keys("d_v=3 and d_model_x stay", True, "llama") == "d_v=3 and d_model_x stay"  # whole names only


@pytest.mark.parametrize("damage", DAMAGED_CONFIGS)
def test_a_config_with_a_number_of_the_wrong_kind_is_refused_naming_the_key(tmp_path, damage):
    import json

    from mha_explorer.models import CheckpointError, load_model

    build("llama", tmp_path)
    changes, message = DAMAGED_CONFIGS[damage]
    file = tmp_path / "config.json"
    file.write_text(json.dumps({**json.loads(file.read_text()), **changes}))
    with pytest.raises(CheckpointError, match=re.escape(message)):
        load_model(tmp_path)


BERT_DAMAGES = {
    "heads that do not divide the width": (
        {"num_attention_heads": 7},
        "config.json: hidden_size 384 is not divisible by num_attention_heads 7; give a head count that divides it",
    ),
    "a width the embeddings do not have": (
        {"hidden_size": 770},  # which 12 heads do not divide either: the width is what to mend
        "config.json: hidden_size is 770, but the embedding table embeddings.word_embeddings.weight is 384 wide; set hidden_size to 384",
    ),
    "a position table of other rows": (
        {"max_position_embeddings": 8},
        "config.json: max_position_embeddings is 8, but the position table embeddings.position_embeddings.weight has 512 rows; set max_position_embeddings to 512",
    ),
    "a vocabulary the embeddings do not have": ({"vocab_size": 1000}, "config.json: vocab_size is 1000, but the embedding table has 30522 rows; set vocab_size to 30522"),
}


def minilm_copy(folder, changes: dict):
    """MiniLM's checkpoint as a folder of its own (the weights linked, not copied), its config.json changed."""
    from pathlib import Path

    source = Path(require("minilm").source)
    for name in ("model.safetensors", "tokenizer.json"):
        (folder / name).symlink_to(source / name)
    (folder / "config.json").write_text(json.dumps({**json.loads((source / "config.json").read_text()), **changes}))
    return folder


@pytest.mark.parametrize("damage", BERT_DAMAGES)
def test_a_bert_config_that_does_not_fit_its_weights_says_what_to_set(tmp_path, damage):
    """Each says which key of config.json to change, and to what where the weights tell."""
    from mha_explorer.models import CheckpointError, load_model

    changes, message = BERT_DAMAGES[damage]
    with pytest.raises(CheckpointError, match=re.escape(message)):
        load_model(minilm_copy(tmp_path, changes))


def test_a_count_written_as_a_float_is_a_whole_number(tmp_path):
    """12.0 heads is 12 heads (it was refused as "give a whole number", which it is)."""
    from mha_explorer.models import load_model

    model = load_model(minilm_copy(tmp_path, {"num_attention_heads": 12.0, "num_hidden_layers": 6.0}))
    assert model.layer_config(0).n_heads == 12 and model.n_layers == 6


def test_a_checkpoint_saved_again_is_read_again_and_one_unchanged_is_not(tmp_path):
    """Loaded once per process: a checkpoint saved again since (a training step, an edited
    config.json) is read again, where the first load was handed back with the old weights."""
    import json

    from mha_explorer.models import load_model

    build("llama", tmp_path)
    first = load_model(tmp_path)
    assert load_model(tmp_path) is first and load_model(tmp_path / "config.json") is first
    (tmp_path / "training.log").write_text("step 1")  # a file a load does not read is no change
    assert load_model(tmp_path) is first
    file = tmp_path / "config.json"
    cfg = json.loads(file.read_text())
    file.write_text(json.dumps(cfg | {"rope_parameters": cfg["rope_parameters"] | {"rope_theta": 777.0}}))
    again = load_model(tmp_path)
    assert again is not first and again.layer_config(0).rope_theta == 777.0 and first.layer_config(0).rope_theta == 5000.0
    assert load_model(tmp_path) is again


def test_a_checkpoint_saved_again_is_read_again_by_the_server_when_next_traced(tmp_path):
    """`serve --model`: a checkpoint saved again (a training step) was traced with its first
    weights for the server's life, where load_model() reads it again. Now the server, asked about
    it, finds it changed and loads it again; a trace asked of it before says so."""
    import time

    from fastapi.testclient import TestClient

    from mha_explorer.models import load_model
    from mha_explorer.modelview import GONE, SAVED_AGAIN, ModelService
    from mha_explorer.schema import TracePayload, to_numpy
    from mha_explorer.server import create_app

    build("llama", tmp_path)
    client = TestClient(create_app(models=ModelService(local={"tiny": tmp_path})))
    request = {"model": "tiny", "text": TEXT, "layer": 1, "head": 0}

    def loaded() -> dict:
        assert client.post("/api/models/tiny/load").status_code == 202
        deadline = time.monotonic() + 60
        while (state := client.get("/api/models/tiny").json())["state"] == "loading":
            assert time.monotonic() < deadline
            time.sleep(0.02)
        return state

    def weights() -> np.ndarray:
        return to_numpy(TracePayload.model_validate(client.post("/api/model-trace", json=request).json()).stages["weights"])

    assert loaded()["state"] == "ready"
    first = weights()
    (tmp_path / "training.log").write_text("step 1")  # a file a load does not read is no change
    assert client.get("/api/models/tiny").json()["state"] == "ready"
    file = tmp_path / "config.json"
    cfg = json.loads(file.read_text())
    file.write_text(json.dumps(cfg | {"rope_parameters": cfg["rope_parameters"] | {"rope_theta": 777.0}}))
    state = client.get("/api/models/tiny").json()
    assert state["state"] == "idle" and state["message"] == SAVED_AGAIN, state
    refused = client.post("/api/model-trace", json=request)
    # (said as an API's client does it: "trace it again", the page's words, gave the same 409 for ever)
    said = "tiny was saved again since it was read: POST /api/models/tiny/load to read it anew, then ask again"
    assert refused.status_code == 409 and refused.json()["detail"] == [{"field": "model", "message": said}]
    assert loaded()["state"] == "ready"
    again = weights()
    assert np.abs(again - first).max() > 1e-3  # other rotary positions: other weights
    np.testing.assert_allclose(again[0], load_model(tmp_path).trace(TEXT, 1)[0]["weights"][0], atol=1e-6)
    # moved away: said so, not "saved again", and its load fails saying where it was
    moved = tmp_path.with_name(tmp_path.name + "-moved")
    tmp_path.rename(moved)
    try:
        assert client.get("/api/models/tiny").json()["message"] == GONE
        refused = client.post("/api/model-trace", json=request)
        assert refused.status_code == 409 and refused.json()["detail"][0]["message"] == f"tiny is {GONE}, then POST /api/models/tiny/load"
        state = loaded()
        assert state["state"] == "error" and "is not there any more (moved or deleted?)" in state["message"], state
        refused = client.post("/api/model-trace", json=request)
        assert refused.status_code == 409 and refused.json()["detail"][0]["message"].endswith("(POST /api/models/tiny/load)")
    finally:
        moved.rename(tmp_path)
    assert loaded()["state"] == "ready"  # put back, read again


def test_weights_whose_residual_outgrows_a_norm_are_refused_not_traced_as_zeros(tmp_path):
    """MLP weights 1e12 times too large: the residual stream reaches 1e37, still finite, but its
    squares pass float32's range in the next RMS norm, which gave zeros, and the layer's weights
    came out exactly uniform. transformers computes the same; here it is said, and the terminal
    printed NumPy's overflow warning with a line of our source."""
    from click.testing import CliRunner
    from safetensors.numpy import load_file, save_file

    from mha_explorer.cli import main
    from mha_explorer.models import ModelError, load_model

    build("llama", tmp_path)
    tensors = load_file(tmp_path / "model.safetensors")
    save_file({k: v * np.float32(1e12) if ".mlp." in k else v for k, v in tensors.items()}, tmp_path / "model.safetensors", metadata={"format": "pt"})
    model = load_model(tmp_path)
    model.run(TEXT, 0)  # the embeddings are as they were
    with pytest.raises(ModelError, match=re.escape("the text's numbers outgrow float32 by layer 1: a row's squares, in an RMS norm, goes past the largest float32")):
        model.run(TEXT, 1)
    result = CliRunner().invoke(main, ["trace", "--model", str(tmp_path), "--layer", "1", "--text", TEXT])
    assert result.exit_code == 2 and "outgrow float32 by layer 1" in result.output, result.output
    assert "Warning" not in result.output and "Traceback" not in result.output, result.output


def test_a_null_where_the_family_has_a_default_takes_the_default(tmp_path):
    """null reads as "not given", as a key left out: rms_norm_eps then is Llama's 1e-6."""
    import json

    from mha_explorer.models import load_model

    build("llama", tmp_path)
    file = tmp_path / "config.json"
    file.write_text(json.dumps({**json.loads(file.read_text()), "rms_norm_eps": None}))
    assert load_model(tmp_path).arch.sizes.eps == 1e-6


@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_a_weight_that_is_not_a_finite_number_is_refused_at_load_naming_the_tensor(tmp_path, value):
    from safetensors.numpy import load_file, save_file

    from mha_explorer.models import CheckpointError, load_model

    build("llama", tmp_path)
    tensors = load_file(tmp_path / "model.safetensors")
    tensors["model.layers.1.self_attn.q_proj.weight"][0, 0] = value
    save_file(tensors, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match=r"model\.layers\.1\.self_attn\.q_proj\.weight holds NaN or infinite numbers"):
        load_model(tmp_path)


def test_a_file_inside_a_checkpoint_directory_stands_for_the_directory(tmp_path):
    """config.json was refused ("give its directory") while model.safetensors loaded the directory,
    titled "model": each file of it now opens the directory, titled by its name."""
    from mha_explorer.models import load_model

    folder = tmp_path / "my-llama"
    folder.mkdir()
    build("llama", folder)
    whole = load_model(folder)
    for name in ("config.json", "tokenizer.json", "model.safetensors"):
        assert load_model(folder / name) is whole, name
    assert whole.title == "my-llama"


def test_a_checkpoint_given_by_a_link_is_named_after_the_link(tmp_path):
    """A link named after an experiment, into a cache of hashes: the menu, the link and the title
    said the target's name. They say the link's now; the same checkpoint by two paths is one."""
    from mha_explorer.models import load_model
    from mha_explorer.models.registry import local_models

    (tmp_path / "snapshot-3f9a").mkdir()
    target = minilm_copy(tmp_path / "snapshot-3f9a", {})
    link = tmp_path / "my-experiment"
    link.symlink_to(target)
    assert list(local_models([str(link), str(target)])) == ["my-experiment"]
    assert load_model(link).title == "my-experiment"


def test_an_empty_folder_is_said_to_hold_no_checkpoint(tmp_path):
    from mha_explorer.models import CheckpointError, load_model

    with pytest.raises(CheckpointError, match=re.escape(f"{tmp_path} holds no checkpoint: a Hugging Face directory holds config.json, tokenizer.json and .safetensors files; or give a GGUF file")):
        load_model(tmp_path)


def test_damaged_files_that_no_check_foresaw_are_said_as_the_checkpoints_in_a_line(tmp_path, monkeypatch):
    """Each was a stack trace at the terminal (and a bare "'int' object is not iterable" on the
    page): a value of the wrong kind read deep in a converter, JSON nested thousands deep, an index
    that names no files."""
    from click.testing import CliRunner

    from mha_explorer.cli import main
    from mha_explorer.models import CheckpointError, load_model

    def copy(name, changes=None):
        (tmp_path / name).mkdir()
        return minilm_copy(tmp_path / name, changes or {})

    with pytest.raises(CheckpointError, match=re.escape("config.json: type_vocab_size is 'abc'; give a whole number, 1 or more")):
        load_model(copy("types", {"type_vocab_size": "abc"}))
    deep = copy("deep")
    (deep / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(CheckpointError, match=re.escape("config.json is not readable JSON (nested too deep): the file is damaged")):
        load_model(deep)
    folder = copy("folder")
    (folder / "config.json").unlink()
    (folder / "config.json").mkdir()
    with pytest.raises(CheckpointError, match=re.escape("config.json is a folder, not a file")):
        load_model(folder)
    config = copy("big")
    text = (config / "config.json").read_text()
    assert '"vocab_size": 30522' in text
    (config / "config.json").write_text(text.replace('"vocab_size": 30522', '"vocab_size": ' + "9" * 5000))
    with pytest.raises(CheckpointError, match=re.escape("config.json is not readable JSON (")):  # an integer of 5,000 digits
        load_model(config)
    cases = (("none", {}, "lists no files in its weight_map"), ("number", {"a": 5}, "some are not names (5)"), ("mixed", {"a": "model.safetensors", "b": True}, "some are not names (true)"))
    for name, index, message in cases:
        indexed = copy(name)
        (indexed / "model.safetensors.index.json").write_text(json.dumps({"weight_map": index}))
        with pytest.raises(CheckpointError, match=re.escape(message)):
            load_model(indexed)
    # what no check foresees: said as the checkpoint's, with the error, in one line; exit 2 at the terminal
    import mha_explorer.models.registry as registry

    def fails(*args, **kwargs):
        raise TypeError("'int' object is not iterable")

    monkeypatch.setattr(registry, "_convert_hf", fails)
    odd = copy("odd")
    with pytest.raises(CheckpointError, match=re.escape("the checkpoint could not be read (TypeError: 'int' object is not iterable): a file in it is damaged")):
        load_model(odd)
    result = CliRunner().invoke(main, ["trace", "--model", str(odd), "--text", "hi"])
    assert result.exit_code == 2 and "Traceback" not in result.output and "could not be read (TypeError" in result.output, result.output
    # and on the page: serve --model reads it the same way, and says to pick it again once mended
    from mha_explorer.modelview import ModelService

    service = ModelService(local={"odd": odd})
    service._load("odd")
    state = service.state("odd")
    assert state["state"] == "error" and state["message"].startswith("odd: the checkpoint could not be read (TypeError: 'int' object is not iterable)"), state
    assert state["message"].endswith("Once the checkpoint is mended, pick it again: it is read anew"), state


def test_a_gemma3_layer_types_not_a_list_is_said_with_the_names_it_takes(tmp_path):
    """layer_types 5 was "'int' object is not iterable"; a string was split into its letters."""
    from mha_explorer.models import CheckpointError, load_model

    build("gemma3", tmp_path)
    file = tmp_path / "config.json"
    cfg = json.loads(file.read_text())
    for n, (types, message) in enumerate(
        (
            (5, 'layer_types is 5; give a list, one "sliding_attention" or "full_attention" per layer'),
            ("full_attention", "layer_types is 'full_attention'; give a list"),
            (["full"] * 6, 'layer_types [\'full\', \'full\', \'full\', \'full\', \'full\', \'full\'] do not give one of "sliding_attention" and "full_attention" for each of the 6 layers'),
        )
    ):
        damaged = tmp_path / f"damaged{n}"
        shutil.copytree(tmp_path, damaged, ignore=shutil.ignore_patterns("damaged*"))
        (damaged / "config.json").write_text(json.dumps({**cfg, "layer_types": types}))
        with pytest.raises(CheckpointError, match=re.escape(message)):
            load_model(damaged)


def test_a_tensor_missing_from_one_layer_is_not_taken_for_a_wrong_layer_count(tmp_path):
    """Layer 1's q projection left out of a 3-layer checkpoint was said as "num_hidden_layers is 3,
    but the checkpoint holds no layer 1: give the number of layers it holds", advice that would
    have cut layer 2 off. A count past the layers held is still said so."""
    from safetensors.numpy import load_file, save_file

    from mha_explorer.models import CheckpointError, load_model

    build("llama", tmp_path)
    tensors = load_file(tmp_path / "model.safetensors")
    save_file({k: v for k, v in tensors.items() if k != "model.layers.1.self_attn.q_proj.weight"}, tmp_path / "model.safetensors")
    with pytest.raises(CheckpointError, match=r"layer 1 has no model\.layers\.1\.self_attn\.q_proj\.weight, though layer 2 has its own: the checkpoint is missing tensors"):
        load_model(tmp_path)
    save_file({k: v for k, v in tensors.items() if not k.startswith("model.layers.2.")}, tmp_path / "model.safetensors")
    with pytest.raises(CheckpointError, match="num_hidden_layers is 3, but the checkpoint holds no layer 2"):
        load_model(tmp_path)


def test_a_ggufs_vocab_size_other_than_its_embedding_tables_rows_is_refused(monkeypatch):
    """As config.json's vocab_size is checked against the table, so is a GGUF's: SmolLM2's file
    saying llama.vocab_size 1000 (its table has 49,152 rows) loaded as if nothing were wrong."""
    from mha_explorer.models import CheckpointError
    from mha_explorer.models.readers import GGUFFile
    from mha_explorer.models.registry import open_checkpoint

    path = require("smollm2").source
    assert GGUFFile(path).value("llama.vocab_size") == 49152  # the file's own, checked and loaded (require)
    said = GGUFFile.value
    monkeypatch.setattr(GGUFFile, "value", lambda self, key, default=...: 1000 if key == "llama.vocab_size" else said(self, key, default))
    with pytest.raises(CheckpointError, match=r"its metadata's llama\.vocab_size is 1000, but the embedding table has 49152 rows; the file is damaged"):
        open_checkpoint(path, lambda *_: None)
