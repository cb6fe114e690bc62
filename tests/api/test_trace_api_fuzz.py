"""Property-based requests to POST /api/trace: a trace or a 422 naming a field, never a 5xx."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from mha_explorer.schema import TracePayload, payload_arrays
from mha_explorer.server import create_app

pytestmark = pytest.mark.api
client = TestClient(create_app())

width = st.one_of(st.integers(-2, 70), st.none())
requests = st.fixed_dictionaries(
    {
        "config": st.fixed_dictionaries(
            {"d_model": st.integers(-1, 70), "n_heads": st.integers(-1, 70)},
            optional={"n_kv_heads": width, "d_head": width, "d_v": width, "causal": st.booleans(), "bias": st.booleans()},
        ),
        "tokens": st.lists(st.text(min_size=0, max_size=70), min_size=0, max_size=66),
    },
    optional={"seed": st.integers(-5, 2**33), "query": st.integers(-2, 70), "encoding": st.sampled_from(["json", "base64", "xml"])},
)


@settings(max_examples=150, deadline=None)
@given(body=requests)
def test_trace_requests_get_a_trace_or_a_clear_422(body):
    response = client.post("/api/trace", json=body)
    assert response.status_code in (200, 422), response.text
    if response.status_code == 422:
        for problem in response.json()["detail"]:
            assert problem["field"] and problem["message"]
        return
    payload = TracePayload.model_validate(response.json())
    weights = payload_arrays(payload)["weights"]
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, atol=1e-12)
    assert payload.tokens == body["tokens"]
