"""The real-model endpoints: the list, loading with progress, compact per-head traces, clear errors."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace

import numpy as np
import pytest
from fastapi.testclient import TestClient

from mha_explorer.models import available_models, load_model
from mha_explorer.models.errors import ModelError
from mha_explorer.modelview import PER_HEAD_WEIGHTS, WHOLE_WEIGHTS, HeadArrays, LayerWeights, _check_kv_held, model_payload
from mha_explorer.schema import BINARY_MEDIA_TYPE, Array, Packer, TracePayload, to_numpy, unpack
from mha_explorer.server import create_app

pytestmark = pytest.mark.api
INSTALLED = {m.name for m in available_models() if m.installed}


def test_the_list_names_every_model_and_where_it_comes_from():
    models = TestClient(create_app()).get("/api/models").json()
    assert [m["name"] for m in models] == ["minilm", "smollm2", "gemma3"]
    assert all(m["package"] and m["state"] in ("idle", "ready") for m in models)
    # each one's layers before it loads, for the page's layer menu: Gemma 3's windows, global every sixth
    outline = {m["name"]: m["outline"] for m in models}
    assert [outline[name]["n_layers"] for name in ("minilm", "smollm2", "gemma3")] == [6, 30, 18]
    assert all(layer["sliding_window"] is None for name in ("minilm", "smollm2") for layer in outline[name]["layers"])
    windows = [layer["sliding_window"] for layer in outline["gemma3"]["layers"]]
    assert [i for i, w in enumerate(windows) if w is None] == [5, 11, 17] and set(windows) == {None, 512}


@pytest.mark.skipif("minilm" not in INSTALLED, reason="minilm is not installed: run make models")
def test_loading_reports_progress_then_traces_one_head_at_a_time():
    client = TestClient(create_app())
    assert client.post("/api/model-trace", json={"model": "minilm", "text": "hi", "layer": 0}).status_code == 409
    started = client.post("/api/models/minilm/load")
    assert started.status_code == 202 and started.json()["state"] in ("loading", "ready")
    seen = []
    deadline = time.monotonic() + 120
    while (state := client.get("/api/models/minilm").json())["state"] == "loading":
        seen.append((state["fraction"], state["message"]))
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert state["state"] == "ready" and state["config"]["n_layers"] == 6
    assert all(0.0 <= f <= 1.0 for f, _ in seen)

    text = "Heads read from different tokens."
    response = client.post("/api/model-trace", json={"model": "minilm", "text": text, "layer": 5, "head": 7})
    payload = TracePayload.model_validate(response.json())
    reference, tokens = load_model("minilm").trace(text, 5)
    assert payload.tokens == tokens and payload.model.layer == 5 and payload.model.n_layers == 6
    weights = payload.stages["weights"]
    assert weights.heads == [7] and weights.shape == list(reference["weights"].shape) and weights.dtype == "float32"
    np.testing.assert_allclose(to_numpy(weights)[0], reference["weights"][7], atol=1e-6)
    np.testing.assert_allclose(to_numpy(payload.stages["output"]), reference["output"], atol=1e-5)
    # the head's part of the output, in doubles rounded once: the trace's float32 product to its rounding
    parts = reference["contributions"][7]
    np.testing.assert_allclose(to_numpy(payload.stages["contributions"])[0], parts, rtol=0, atol=2e-6 * np.abs(parts).max())
    overview = to_numpy(payload.model.overview)
    np.testing.assert_allclose(overview, reference["weights"], atol=1e-6)  # short text: one token per cell
    # how much each head adds to each query's output: the length of its contribution, every head's
    shares = to_numpy(payload.model.head_shares)
    assert payload.model.head_shares.dtype == "float32" and shares.shape == (12, len(tokens))
    lengths = np.sqrt((reference["contributions"].astype(np.float64) ** 2).sum(axis=-1))  # (h, n)
    np.testing.assert_allclose(shares, lengths, rtol=1e-5)

    bad = client.post("/api/model-trace", json={"model": "minilm", "text": text, "layer": 6})
    assert bad.status_code == 422 and "layers 0 to 5" in bad.json()["detail"][0]["message"]
    bad = client.post("/api/model-trace", json={"model": "minilm", "text": text, "layer": 0, "head": 12})
    assert bad.status_code == 422 and "heads 0 to 11" in bad.json()["detail"][0]["message"]
    # however large, a layer or head is answered with the model's own range, not a cap of the schema
    from mha_explorer.modelview import layer_run

    runs = layer_run.cache_info().misses
    for field, value, words in (("layer", 10**30, "layers 0 to 5"), ("head", 5000, "heads 0 to 11"), ("layer", -1, "layers 0 to 5"), ("head", -1, "heads 0 to 11")):
        bad = client.post("/api/model-trace", json={"model": "minilm", "text": text, "layer": 0, field: value})
        assert bad.status_code == 422 and words in bad.json()["detail"][0]["message"], bad.json()
    assert layer_run.cache_info().misses == runs  # each refused before the model ran
    # a query past either end is answered with the text's positions, as a head or layer is with the model's
    for query in (-1, 99):
        bad = client.post("/api/model-trace", json={"model": "minilm", "text": text, "layer": 0, "query": query})
        assert bad.status_code == 422 and bad.json()["detail"][0] == {"field": "query", "message": f"query={query} is out of range; choose 0 to {len(tokens) - 1}"}

    # another head of the layer on screen: that head's arrays only, equal to its full trace's
    request = {"model": "minilm", "text": text, "layer": 5, "head": 3}
    lean = client.post("/api/model-head", json=request, headers={"accept-encoding": "gzip"})
    assert lean.status_code == 200 and "content-encoding" not in lean.headers  # faster sent as it is
    arrays = lean.json()
    full = TracePayload.model_validate(client.post("/api/model-trace", json=request).json())
    assert arrays["head"] == 3
    assert set(arrays["stages"]) == {name for name, a in full.stages.items() if a.heads is not None}
    assert {"q", "k", "v", "scores", "weights", "z", "contributions"} <= set(arrays["stages"])
    for name, a in [*arrays["stages"].items(), *arrays["weights"].items()]:
        assert a["heads"] == [3], name
        np.testing.assert_array_equal(to_numpy(Array.model_validate(a)), to_numpy(full.stages.get(name) or full.weights[name]), err_msg=name)
    np.testing.assert_allclose(to_numpy(full.stages["weights"])[0], reference["weights"][3], atol=1e-6)
    # none of the layer's whole arrays (x, concat, output, b^O): those of the head, and its rows of W^O
    assert set(arrays["weights"]) == {name for name, a in full.weights.items() if a.heads is not None} >= {"W_Q", "W_O"}
    assert arrays["weights"]["W_O"]["block"] == 32 and to_numpy(Array.model_validate(arrays["weights"]["W_O"])).shape == (32, 384)
    bad = client.post("/api/model-head", json={**request, "head": 12})
    assert bad.status_code == 422 and bad.json()["detail"][0]["field"] == "head" and "heads 0 to 11" in bad.json()["detail"][0]["message"]
    # a head's arrays hold every query: a query asked of them is said to mean nothing, not ignored
    bad = client.post("/api/model-head", json={**request, "query": 2})
    assert bad.status_code == 422 and bad.json()["detail"][0] == {"field": "query", "message": "is not a field of this request; remove it", "type": "extra_forbidden"}
    # the whole layer is gzipped for a client that accepts it, and only then
    zipped = client.post("/api/model-trace", json=request, headers={"accept-encoding": "gzip"})
    plain = client.post("/api/model-trace", json=request, headers={"accept-encoding": "gzip;q=0, identity"})
    assert zipped.headers["content-encoding"] == "gzip" and "content-encoding" not in plain.headers
    assert zipped.json() == plain.json() and int(zipped.headers["content-length"]) < len(plain.content)
    # binary answers (what the page asks for) hold exactly what the base64 ones hold
    for route, kind in (("/api/model-trace", TracePayload), ("/api/model-head", HeadArrays)):
        raw = client.post(route, json={**request, "encoding": "binary"}, headers={"accept-encoding": "identity"})
        assert raw.status_code == 200 and raw.headers["content-type"] == BINARY_MEDIA_TYPE, route
        as_base64 = kind.model_validate_json(client.post(route, json=request, headers={"accept-encoding": "identity"}).content)
        assert_same_answer(unpack(raw.content, kind), as_base64)
    zipped = client.post("/api/model-trace", json={**request, "encoding": "binary"}, headers={"accept-encoding": "gzip"})
    assert zipped.headers["content-encoding"] == "gzip"
    assert_same_answer(unpack(zipped.content, TracePayload), full)
    assert b'"planes":true' in zipped.content and b'"planes":true' not in raw.content  # by place only where compressed
    bad = client.post("/api/model-head", json={**request, "head": 12, "encoding": "binary"})
    assert bad.status_code == 422 and bad.json()["detail"][0]["field"] == "head"
    not_loaded = TestClient(create_app()).post("/api/model-head", json=request)  # a server that has not loaded it
    assert not_loaded.status_code == 409 and "POST /api/models/minilm/load first" in not_loaded.json()["detail"][0]["message"]


def assert_same_answer(binary, plain) -> None:
    """A real model's binary answer read back holds exactly what its base64 answer holds. Each
    head's part of the output, which the reader works out from z and the head's rows of W^O, is in
    both the product in double precision rounded once to float32: NumPy's, done here too. It agrees
    with the trace's float32 product to float32's rounding."""
    assert binary.model_dump() == plain.model_dump()
    z = to_numpy(plain.stages["z"])  # (1, n, f): the head's, float64 from float32
    W_O = to_numpy(plain.weights["W_O"])  # (f, d): its rows
    made = to_numpy(plain.stages["contributions"])[0]  # (n, d)
    np.testing.assert_array_equal(made, (z[0] @ W_O).astype(np.float32))


@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.skipif(name not in INSTALLED, reason=f"{name} is not installed: run make models")) for name in ("minilm", "smollm2", "gemma3")])
def test_a_layers_every_head_weights_come_whole_where_they_weigh_little(name):
    """The page works out the other heads itself from every head's W^Q, W^K, W^V, biases and W^O,
    where they weigh at most WHOLE_WEIGHTS (MiniLM's 2.4 MB, SmolLM2's 3.5 MB): the layer's answer
    says so, and /api/model-weights gives them, equal to the layer's. Gemma 3's 6.6 MB would take a
    512-token layer past 10 MB, and its q/k norm is not worked out on the page: they are refused,
    with what to ask for instead."""
    client = loaded(name)
    request = {"model": name, "text": "Every head reads the same tokens.", "layer": 1, "head": 2}
    traced = unpack(client.post("/api/model-trace", json={**request, "encoding": "binary"}).content, TracePayload)
    weights = load_model(name).layer_weights(1).arrays()
    asked = {"model": name.upper(), "layer": 1}
    if name == "gemma3":
        assert not traced.model.whole_weights
        assert sum(a.nbytes for w, a in weights.items() if w in PER_HEAD_WEIGHTS) > WHOLE_WEIGHTS
        refused = client.post("/api/model-weights", json=asked)
        assert refused.status_code == 422 and refused.json()["detail"][0]["field"] == "layer"
        assert "sent one at a time (POST /api/model-head)" in refused.json()["detail"][0]["message"]
        return
    assert traced.model.whole_weights
    raw = client.post("/api/model-weights", json={**asked, "encoding": "binary"})
    assert raw.headers["content-type"] == BINARY_MEDIA_TYPE
    whole = unpack(raw.content, LayerWeights)
    assert whole.model_dump() == LayerWeights.model_validate_json(client.post("/api/model-weights", json=asked).content).model_dump()
    assert set(whole.weights) == {w for w in PER_HEAD_WEIGHTS if w in weights} >= {"W_Q", "W_K", "W_V", "W_O"}
    assert sum(weights[w].nbytes for w in whole.weights) <= WHOLE_WEIGHTS
    for w, a in whole.weights.items():
        assert a.heads is None, w
        np.testing.assert_array_equal(to_numpy(a), weights[w], err_msg=w)
    bad = client.post("/api/model-weights", json={**asked, "layer": 99})
    assert bad.status_code == 422 and bad.json()["detail"][0]["field"] == "layer" and "layers 0 to" in bad.json()["detail"][0]["message"]


def loaded(name: str) -> TestClient:
    """A client of a new server that has loaded the model."""
    client = TestClient(create_app())
    client.post(f"/api/models/{name}/load")
    while client.get(f"/api/models/{name}").json()["state"] == "loading":
        time.sleep(0.05)
    return client


@pytest.mark.skipif("smollm2" not in INSTALLED, reason="smollm2 is not installed: run make models")
def test_a_causal_models_binary_answer_leaves_out_scaled_and_mask_and_they_come_back_exactly():
    """The reader computes the scaled scores and the causal mask from the scores, in float32."""
    client = loaded("smollm2")
    request = {"model": "smollm2", "text": "Every token reads the tokens before it.", "layer": 2, "head": 4}
    for route, kind in (("/api/model-trace", TracePayload), ("/api/model-head", HeadArrays)):
        raw = client.post(route, json={**request, "encoding": "binary"}, headers={"accept-encoding": "identity"})
        left = b'"derived":["scaled","mask","z","contributions"]' if kind is TracePayload else b'"derived":["scaled","mask","contributions"]'  # a head's arrays hold no concat
        assert left in raw.content and b'"scaled":{' not in raw.content, route
        full = kind.model_validate_json(client.post(route, json=request).content)
        assert {"scaled", "mask"} <= set(full.stages)
        assert_same_answer(unpack(raw.content, kind), full)


@pytest.mark.skipif("smollm2" not in INSTALLED, reason="smollm2 is not installed: run make models")
def test_a_heads_answer_leaves_out_the_kv_heads_arrays_the_page_holds_where_the_head_reads_it():
    """A page that holds K/V head 1's arrays (k, v, k after the rotation, W_K, W_V) is not sent them
    again for a head that reads K/V head 1; for a head of another K/V head, it is sent its own."""
    client = loaded("smollm2")
    request = {"model": "smollm2", "text": "Every token reads the tokens before it.", "layer": 2}
    group = load_model("smollm2").layer_config(2).kv_group  # 3 query heads a K/V head
    kv = {"k", "v", "k_rotated"}
    for encoding in ("base64", "binary"):
        for head, held, left_out in ((4, 1, True), (4, 0, False), (4, None, False), (0, 0, True)):
            raw = client.post("/api/model-head", json={**request, "head": head, "kv_held": held, "encoding": encoding}, headers={"accept-encoding": "identity"})
            assert raw.status_code == 200, raw.text
            answer = unpack(raw.content, HeadArrays) if encoding == "binary" else HeadArrays.model_validate_json(raw.content)
            assert (held == group[head]) is left_out
            assert not (kv & set(answer.stages)) if left_out else kv <= set(answer.stages), (encoding, head, held)
            assert not ({"W_K", "W_V"} & set(answer.weights)) if left_out else {"W_K", "W_V"} <= set(answer.weights), (encoding, head, held)
            if not left_out:
                assert answer.stages["k"].heads == [group[head]]
            # the head's own arrays are there either way, its weights equal the full trace's
            whole = TracePayload.model_validate_json(client.post("/api/model-trace", json={**request, "head": head}).content)
            for name in ("q", "q_rotated", "scores", "weights"):
                np.testing.assert_array_equal(to_numpy(answer.stages[name]), to_numpy(whole.stages[name]), err_msg=name)
    bad = client.post("/api/model-head", json={**request, "head": 0, "kv_held": "one"})
    assert bad.status_code == 422 and bad.json()["detail"][0]["field"] == "kv_held"
    for held in (3, -1):  # a K/V head the layer has not: said, not taken for one the page does not hold
        bad = client.post("/api/model-head", json={**request, "head": 0, "kv_held": held})
        assert bad.status_code == 422 and bad.json()["detail"][0]["field"] == "kv_held", bad.text
        assert "K/V heads 0 to 2" in bad.json()["detail"][0]["message"] or held < 0, bad.text
    # said before a run is waited for, as a bad head is (the server's check while the trace gate is busy)
    from mha_explorer.models import ModelError
    from mha_explorer.modelview import check_request

    with pytest.raises(ModelError, match=r"^kv_held 3 does not exist: this layer has K/V heads 0 to 2$"):
        check_request(load_model("smollm2"), request["text"], 2, 0, None, 3)
    mqa = SimpleNamespace(layer_config=lambda layer: SimpleNamespace(n_kv_heads=1))  # (Gemma 3's one K/V head)
    with pytest.raises(ModelError, match=r"^kv_held 1 does not exist: this layer has K/V head 0 only$"):
        _check_kv_held(mqa, 0, 1)


@pytest.mark.skipif("gemma3" not in INSTALLED, reason="gemma3 is not installed: run make models")
def test_a_binary_answer_leaves_out_q_and_k_after_the_norm_and_they_come_back_exactly():
    """Gemma's q/k norm: the answer carries the root mean square of each row of q and k, and the
    reader divides by it and multiplies by the norm's vector, in float32, as the trace did."""
    client = loaded("gemma3")
    request = {"model": "gemma3", "text": "Each query head reads the one key head.", "layer": 5, "head": 2}
    n = len(load_model("gemma3").encode(request["text"]).ids)  # (h, n): a number a row
    for route, kind in (("/api/model-trace", TracePayload), ("/api/model-head", HeadArrays)):
        raw = client.post(route, json={**request, "encoding": "binary"}, headers={"accept-encoding": "identity"})
        answer = kind.model_validate_json(raw.content[8 : 8 + int.from_bytes(raw.content[:8], "little")])
        assert {"q_normed", "k_normed"} <= set(answer.derived) and not {"q_normed", "k_normed"} & set(answer.stages), route
        assert answer.factors["q_rms"].heads == [2] and answer.factors["k_rms"].heads == [0] and answer.factors["q_rms"].shape == [4, n]
        full = kind.model_validate_json(client.post(route, json=request).content)
        assert not full.factors and not full.derived  # a base64 answer holds every stage
        again = unpack(raw.content, kind)
        assert not again.factors
        for name in ("q_normed", "k_normed"):
            np.testing.assert_array_equal(to_numpy(again.stages[name]), to_numpy(full.stages[name]), err_msg=name)
        assert_same_answer(again, full)
    # the page holds K/V head 0's arrays (MQA: every head reads it): the answer has the head's own alone
    raw = client.post("/api/model-head", json={**request, "kv_held": 0, "encoding": "binary"}, headers={"accept-encoding": "identity"})
    lean = unpack(raw.content, HeadArrays)
    assert not {"k", "v", "k_rotated", "k_normed"} & set(lean.stages) and "k_normed" not in lean.derived and set(lean.factors) <= {"q_rms"}
    assert not {"W_K", "W_V"} & set(lean.weights) and {"q", "q_normed", "q_rotated", "weights"} <= set(lean.stages)
    full = unpack(client.post("/api/model-head", json={**request, "encoding": "binary"}, headers={"accept-encoding": "identity"}).content, HeadArrays)
    assert len(raw.content) < 0.8 * len(client.post("/api/model-head", json={**request, "encoding": "binary"}, headers={"accept-encoding": "identity"}).content)
    np.testing.assert_array_equal(to_numpy(lean.stages["q_normed"]), to_numpy(full.stages["q_normed"]))
    # every head at once, as a copy that cannot ask for another takes them: the factors are every head's
    packer = Packer()
    whole = model_payload(load_model("gemma3"), request["text"], 5, None, packer=packer)
    assert whole.factors["q_rms"].heads is None and whole.factors["k_rms"].shape == [1, n]
    again = unpack(packer.body(whole.model_dump_json().encode()))
    plain = model_payload(load_model("gemma3"), request["text"], 5, None)
    for name in ("q_normed", "k_normed", "z"):
        np.testing.assert_array_equal(to_numpy(again.stages[name]), to_numpy(plain.stages[name]), err_msg=name)


@pytest.mark.skipif("smollm2" not in INSTALLED, reason="smollm2 is not installed: run make models")
def test_a_real_texts_view_starts_at_its_middle_word_so_the_causal_mask_shows():
    client = loaded("smollm2")
    text = "Every token reads the tokens before it."
    payload = TracePayload.model_validate_json(client.post("/api/model-trace", json={"model": "smollm2", "text": text, "layer": 0}).content)
    assert payload.model.readable[payload.query] == " the"  # Every token reads | the | tokens before it
    mask = to_numpy(payload.stages["mask"])[0, payload.query]  # head 0, the query's row
    assert np.isneginf(mask[payload.query + 1 :]).all() and np.isfinite(mask[: payload.query + 1]).all()


@pytest.mark.skipif("smollm2" not in INSTALLED, reason="smollm2 is not installed: run make models")
def test_the_whole_models_kv_cache_is_every_layers():
    client = loaded("smollm2")
    payload = TracePayload.model_validate_json(client.post("/api/model-trace", json={"model": "smollm2", "text": "Every token reads.", "layer": 4}).content)
    n = len(payload.tokens)
    # SmolLM2-135M: 30 layers, each with 3 K/V heads of 64 for keys and 64 for values, no window
    assert payload.model.kv_cache_all_layers == {"float16": 30 * 3 * (64 + 64) * n * 2, "float32": 30 * 3 * (64 + 64) * n * 4}
    assert payload.model.kv_cache_all_layers["float16"] == 30 * payload.costs.kv_cache.bytes["float16"]
    assert payload.model.kv_cache_layers == [(n, 3 * (64 + 64))] * 30  # each layer's tokens kept and numbers a token: the sum written out


@pytest.mark.skipif("minilm" not in INSTALLED, reason="minilm is not installed: run make models")
def test_the_middle_word_is_a_whole_word_not_a_piece_or_a_mark():
    client = loaded("minilm")
    # it was un ##bel ##ie ##va ##bly warm in the kitchen . : seven words, the fourth is "warm"
    text = "It was unbelievably warm in the kitchen."
    payload = TracePayload.model_validate_json(client.post("/api/model-trace", json={"model": "minilm", "text": text, "layer": 0}).content)
    assert payload.tokens[payload.query] == "warm"


@pytest.mark.skipif("minilm" not in INSTALLED, reason="minilm is not installed: run make models")
def test_a_text_with_no_word_starts_at_its_own_token_not_the_one_the_tokenizer_adds():
    client = loaded("minilm")
    payload = TracePayload.model_validate_json(client.post("/api/model-trace", json={"model": "minilm", "text": "🐱🐱", "layer": 0}).content)
    assert payload.tokens == ["[CLS]", "[UNK]", "[SEP]"] and payload.query == 1


@pytest.mark.skipif("minilm" not in INSTALLED, reason="minilm is not installed: run make models")
@pytest.mark.parametrize("query", [3, 99, 10**12])
def test_a_query_outside_the_text_gets_a_422_with_the_range(query):
    client = loaded("minilm")
    request = {"model": "minilm", "text": "hi", "layer": 0}  # [CLS] hi [SEP]
    answer = client.post("/api/model-trace", json={**request, "query": query})
    assert answer.status_code == 422
    assert answer.json()["detail"] == [{"field": "query", "message": f"query={query} is out of range; choose 0 to 2"}]
    assert client.post("/api/model-trace", json={**request, "query": 2}).json()["query"] == 2


@pytest.mark.skipif(not {"minilm", "smollm2"} <= INSTALLED, reason="minilm and smollm2 are not installed: run make models")
def test_a_local_checkpoint_given_to_the_server_is_offered_loaded_and_traced_by_its_short_name(tmp_path):
    """`serve --model PATH`: a Hugging Face directory (here a copy of MiniLM's, under a name of its own)."""
    import shutil

    from mha_explorer.models.registry import local_models
    from mha_explorer.modelview import ModelService

    folder = tmp_path / "My BERT v2"
    shutil.copytree(load_model("minilm").source, folder)
    local = local_models([str(folder)])
    assert local == {"my-bert-v2": folder.resolve()}
    gguf = tmp_path / "Tiny.Q8_0.gguf"
    gguf.write_bytes(b"GGUF")
    with pytest.raises(ModelError, match="Tiny.Q8_0.gguf is cut short"):  # its header read as the server starts
        local_models([str(gguf)])
    gguf.unlink()
    gguf.symlink_to(load_model("smollm2").source)
    assert list(local_models([str(gguf)])) == ["tiny-q8_0"]  # a file's .gguf ending is no part of its name
    client = TestClient(create_app(models=ModelService(local=local)))
    listed = client.get("/api/models").json()
    assert [m["name"] for m in listed] == ["minilm", "smollm2", "gemma3", "my-bert-v2"]
    assert listed[-1]["installed"] and listed[-1]["package"] == "local checkpoint" and listed[-1]["title"] == "My BERT v2"
    assert client.post("/api/models/my-bert-v2/load").status_code == 202
    deadline = time.monotonic() + 120
    while (state := client.get("/api/models/my-bert-v2").json())["state"] == "loading":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert state["state"] == "ready" and state["config"]["family"] == "bert", state
    # the answer names the checkpoint by its short name, and holds no path of the server's machine
    assert state["config"]["name"] == "my-bert-v2" and str(tmp_path) not in json.dumps(state)

    text = "A checkpoint of my own."
    payload = TracePayload.model_validate(client.post("/api/model-trace", json={"model": "my-bert-v2", "text": text, "layer": 2, "head": 4}).json())
    reference, tokens = load_model("minilm").trace(text, 2)
    assert payload.tokens == tokens and payload.model.name == "my-bert-v2"
    np.testing.assert_allclose(to_numpy(payload.stages["weights"])[0], reference["weights"][4], atol=1e-6)


def test_a_local_checkpoint_that_cannot_be_served_is_refused_before_the_server_starts(tmp_path):
    from click.testing import CliRunner

    from mha_explorer.cli import main

    missing = CliRunner().invoke(main, ["serve", "--model", str(tmp_path / "nowhere")])
    assert missing.exit_code == 2 and "no such file or directory" in missing.output and "Traceback" not in missing.output
    named = CliRunner().invoke(main, ["serve", "--model", "minilm"])  # a named model is on the page already
    assert named.exit_code == 2 and "minilm is offered already, as every named model is; --model adds a local checkpoint: give its path" in named.output
    pickled = tmp_path / "weights.bin"
    pickled.write_bytes(b"\x80\x04\x95" + b"\0" * 32)
    refused = CliRunner().invoke(main, ["serve", "--model", str(pickled)])
    assert refused.exit_code == 2 and "pickle" in refused.output.lower() and "Traceback" not in refused.output
    notes = tmp_path / "notes.txt"
    notes.write_text("not weights")
    other = CliRunner().invoke(main, ["serve", "--model", str(notes)])
    assert other.exit_code == 2 and "notes.txt is not a checkpoint the explorer reads" in other.output
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"")
    no_type = CliRunner().invoke(main, ["serve", "--model", str(tmp_path)])  # a config.json that names no architecture
    assert no_type.exit_code == 2 and "config.json has no model_type" in no_type.output
    (tmp_path / "config.json").write_text('{"model_type": "bert"}')
    # files a load needs, missing: said now, not once the model is picked on the page
    no_tokenizer = CliRunner().invoke(main, ["serve", "--model", str(tmp_path)])
    assert no_tokenizer.exit_code == 2 and "has no tokenizer.json" in no_tokenizer.output, no_tokenizer.output
    for folder, said in (("empty", "holds no checkpoint"), ("pickled", "pickle"), ("parent", "holds no checkpoint")):
        (tmp_path / folder).mkdir()
        if folder == "pickled":
            (tmp_path / folder / "pytorch_model.bin").write_bytes(b"\x80\x04\x95" + b"\0" * 32)
        if folder == "parent":
            (tmp_path / folder / "my-checkpoint").mkdir()
        result = CliRunner().invoke(main, ["serve", "--model", str(tmp_path / folder)])
        assert result.exit_code == 2 and said in result.output.lower() and "Traceback" not in result.output, result.output
    alone = tmp_path / "empty" / "weights.safetensors"
    alone.write_bytes(b"")
    result = CliRunner().invoke(main, ["serve", "--model", str(alone)])
    assert result.exit_code == 2 and "has no config.json beside weights.safetensors" in result.output, result.output
    (tmp_path / "tokenizer.json").write_text("{}")
    # a file of a checkpoint directory stands for the directory, by the directory's name
    from mha_explorer.models.registry import local_models, short_name

    for name in ("config.json", "model.safetensors"):
        assert local_models([str(tmp_path / name)]) == {short_name(tmp_path): tmp_path.resolve()}


@pytest.mark.skipif("minilm" not in INSTALLED, reason="minilm is not installed: run make models")
def test_a_trace_of_a_model_not_ready_says_where_its_load_stands(tmp_path):
    import json
    import shutil

    from mha_explorer.models.registry import local_models
    from mha_explorer.modelview import ModelService

    folder = tmp_path / "broken"
    shutil.copytree(load_model("minilm").source, folder)
    config = json.loads((folder / "config.json").read_text())
    del config["hidden_size"]
    (folder / "config.json").write_text(json.dumps(config))
    service = ModelService(local=local_models([str(folder)]))
    client = TestClient(create_app(models=service))
    ask = lambda name: client.post("/api/model-trace", json={"model": name, "text": "hi", "layer": 0})  # noqa: E731
    assert ask("broken").json()["detail"][0]["message"] == "broken is not loaded yet: POST /api/models/broken/load first"
    client.post("/api/models/broken/load")
    deadline = time.monotonic() + 60
    while client.get("/api/models/broken").json()["state"] == "loading":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    failed = ask("broken")
    assert failed.status_code == 409
    message = failed.json()["detail"][0]["message"]
    assert message.startswith("broken could not be loaded: ") and "hidden_size" in message, message
    assert str(tmp_path) not in message and str(tmp_path.resolve()) not in message  # the server's paths stay its own
    assert str(tmp_path) not in client.get("/api/models/broken").json()["message"]
    # a load under way (as the service reports it while its thread reads the files)
    service.status["minilm"] = {"state": "loading", "fraction": 0.4, "message": "layer 2"}
    message = ask("minilm").json()["detail"][0]["message"]
    assert message == "minilm is still loading (40%, layer 2): try again when GET /api/models/minilm says ready", message


@pytest.mark.skipif("minilm" not in INSTALLED, reason="minilm is not installed: run make models")
def test_a_text_whose_numbers_outgrow_float32_is_a_422_on_the_text_not_a_server_fault(monkeypatch):
    """Numbers past float32 in a layer (weights damaged or too large) are the model's answer to the
    text: said as such, as NaN in the input is."""
    from mha_explorer.models import forward
    from mha_explorer.trace import Overflow, past_range

    model = load_model("minilm")
    model.forget()

    def overflowing(*args, **kwargs):
        raise Overflow(past_range("scores", np.float32))

    monkeypatch.setattr(forward, "attention_layers", overflowing)  # the layers before the traced one
    client = TestClient(create_app())
    client.post("/api/models/minilm/load")
    while client.get("/api/models/minilm").json()["state"] == "loading":
        time.sleep(0.05)
    answer = client.post("/api/model-trace", json={"model": "minilm", "text": "a text never traced before here", "layer": 2})
    assert answer.status_code == 422
    [problem] = answer.json()["detail"]
    assert problem["field"] == "text" and problem["message"].startswith("the text's numbers outgrow float32 by layer 2: the scores stage goes past the largest float32")
    model.forget()


@pytest.mark.skipif(not {"minilm", "smollm2"} <= INSTALLED, reason="minilm and smollm2 are not installed: run make models")
def test_a_checkpoint_files_failed_load_names_neither_it_nor_its_folder_by_path(tmp_path):
    import shutil

    from mha_explorer.models.registry import local_models
    from mha_explorer.modelview import ModelService

    # a GGUF file saved again, damaged, after the server started: read, and refused, when it loads
    shutil.copy(load_model("smollm2").source, tmp_path / "weights.gguf")
    client = TestClient(create_app(models=ModelService(local=local_models([str(tmp_path / "weights.gguf")]))))
    shutil.copy(load_model("minilm").source + "/model.safetensors", tmp_path / "weights.gguf")
    client.post("/api/models/weights/load")
    deadline = time.monotonic() + 60
    while (state := client.get("/api/models/weights").json())["state"] == "loading":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert state["state"] == "error" and "weights.gguf" in state["message"], state
    assert str(tmp_path) not in state["message"] and str(tmp_path.resolve()) not in state["message"]
    # what to do next: the server reads it anew, with no restart
    assert state["message"].endswith(". Once the checkpoint is mended, pick it again: it is read anew"), state


@pytest.mark.skipif("smollm2" not in INSTALLED, reason="smollm2 is not installed: run make models")
def test_the_byte_pieces_of_a_character_that_draws_nothing_are_named_by_its_code():
    """A zero-width space cut into two byte pieces read " 1/2" and " 2/2" (the space drawing nothing)."""
    client = loaded("smollm2")
    payload = TracePayload.model_validate_json(client.post("/api/model-trace", json={"model": "smollm2", "text": "a\u200bb", "layer": 0}).content)
    assert payload.model.labels == ["a", "U+200B 1/2", "U+200B 2/2", "b"]


@pytest.mark.skipif("minilm" not in INSTALLED, reason="minilm is not installed: run make models")
def test_a_model_is_named_in_any_case_as_the_terminal_and_python_take_it():
    """"MiniLM" was "no model named": the CLI, load_model and the page's links read any case."""
    client = TestClient(create_app())
    assert client.post("/api/models/MiniLM/load").status_code == 202
    deadline = time.monotonic() + 120
    while client.get("/api/models/MINILM").json()["state"] == "loading":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    answer = client.post("/api/model-trace", json={"model": "MiniLM", "text": "The cat sat.", "layer": 1, "head": 2})
    assert answer.status_code == 200 and TracePayload.model_validate(answer.json()).model.name == "minilm"
    refused = client.post("/api/model-trace", json={"model": "MiniLMX", "text": "hi", "layer": 0})
    assert refused.status_code == 422 and "choose one of: minilm, smollm2, gemma3" in refused.json()["detail"][0]["message"]


@pytest.mark.skipif("minilm" not in INSTALLED, reason="minilm is not installed: run make models")
def test_weights_that_cannot_be_read_at_a_trace_are_the_models_fault_not_the_texts(monkeypatch):
    """A loaded model's embedding rows are read from its file at each trace. That file cut short
    in place since (its load checked it whole) was answered as a 422 on the text, naming a path of
    the server's machine; it is a 409 on the model now, its path left out."""
    from mha_explorer.models import CheckpointError
    from mha_explorer.models.readers import SafetensorsFile

    client = TestClient(create_app())
    client.post("/api/models/minilm/load")
    while client.get("/api/models/minilm").json()["state"] == "loading":
        time.sleep(0.05)
    source = load_model("minilm").source

    def cut(self, name, ids):
        raise CheckpointError(f"cannot read {self.path}: it is cut short")

    monkeypatch.setattr(SafetensorsFile, "rows", cut)
    refused = client.post("/api/model-trace", json={"model": "minilm", "text": "a text never traced before here", "layer": 0})
    assert refused.status_code == 409, refused.json()
    [said] = refused.json()["detail"]
    assert said["field"] == "model" and said["message"].startswith("minilm's weights could not be read: cannot read ") and source not in said["message"], said
