"""The real-model endpoints: the list, loading with progress, compact per-head traces, clear errors."""

from __future__ import annotations

import time

import numpy as np
import pytest
from fastapi.testclient import TestClient

from mha_explorer.models import available_models, load_model
from mha_explorer.schema import TracePayload, to_numpy
from mha_explorer.server import create_app

pytestmark = pytest.mark.api
INSTALLED = {m.name for m in available_models() if m.installed}


def test_the_list_names_every_model_and_where_it_comes_from():
    models = TestClient(create_app()).get("/api/models").json()
    assert [m["name"] for m in models] == ["minilm", "smollm2", "gemma3"]
    assert all(m["package"] and m["state"] in ("idle", "ready") for m in models)


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
    overview = to_numpy(payload.model.overview)
    np.testing.assert_allclose(overview, reference["weights"], atol=1e-6)  # short text: one token per cell

    bad = client.post("/api/model-trace", json={"model": "minilm", "text": text, "layer": 6})
    assert bad.status_code == 422 and "layers 0 to 5" in bad.json()["detail"][0]["message"]
    bad = client.post("/api/model-trace", json={"model": "minilm", "text": text, "layer": 0, "head": 12})
    assert bad.status_code == 422 and "heads 0 to 11" in bad.json()["detail"][0]["message"]
