"""POST /api/trace against torch: causal, GQA and MQA lab traces, in every encoding, at 1e-10.

The lab draws x and the weights from the seed; torch recomputes every stage from the x and weights
the answer carries (float64), with scaled_dot_product_attention for the head outputs.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from fastapi.testclient import TestClient

from mha_explorer.schema import TracePayload, payload_arrays, to_numpy, unpack
from mha_explorer.server import create_app

pytestmark = pytest.mark.reference
TOL = dict(rtol=0, atol=1e-10)
CONFIGS = {
    "causal MHA with bias": {"d_model": 8, "n_heads": 2, "causal": True, "bias": True},
    "causal GQA": {"d_model": 12, "n_heads": 4, "n_kv_heads": 2, "causal": True},
    "MQA, d_v 3": {"d_model": 8, "n_heads": 4, "n_kv_heads": 1, "d_v": 3},
}


@pytest.fixture(scope="module")
def client():
    return TestClient(create_app())


def answer(client, config: dict, encoding: str) -> TracePayload:
    body = {"config": config, "tokens": "the cat sat on the mat".split(), "seed": 11, "encoding": encoding}
    response = client.post("/api/trace", json=body)
    assert response.status_code == 200, response.text
    if encoding == "binary":
        return unpack(response.content, TracePayload)
    return TracePayload.model_validate_json(response.content)


@pytest.mark.parametrize("encoding", ["json", "base64", "binary"])
@pytest.mark.parametrize("name", CONFIGS)
def test_api_trace_equals_torch(client, name, encoding):
    payload = answer(client, CONFIGS[name], encoding)
    c = payload.config
    ours = payload_arrays(payload)
    w = {k: torch.from_numpy(to_numpy(a)) for k, a in payload.weights.items()}  # float64
    x = torch.from_numpy(ours["x"])
    h, g, n = c.n_heads, c.n_kv_heads, x.shape[0]
    with torch.no_grad():
        q = torch.einsum("nd,hde->hne", x, w["W_Q"])  # (h, n, e)
        k = torch.einsum("nd,gde->gne", x, w["W_K"])  # (g, n, e)
        v = torch.einsum("nd,gdf->gnf", x, w["W_V"])  # (g, n, f)
        if c.bias:
            q, k, v = q + w["b_Q"][:, None], k + w["b_K"][:, None], v + w["b_V"][:, None]
        z = F.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=c.causal, enable_gqa=g < h)[0]  # (h, n, f)
        k_h, v_h = k.repeat_interleave(h // g, dim=0), v.repeat_interleave(h // g, dim=0)  # (h, n, .)
        scores = q @ k_h.transpose(1, 2)  # (h, n, n)
        scaled = scores / math.sqrt(c.d_head)
        hidden = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1) if c.causal else torch.zeros(n, n, dtype=torch.bool)
        mask = scaled.masked_fill(hidden, -math.inf)
        weights = torch.softmax(mask, dim=-1)
        concat = z.transpose(0, 1).reshape(n, h * c.d_v)  # (n, h*f)
        output = concat @ w["W_O"] + (w["b_O"] if c.bias else 0)
        contributions = torch.einsum("hnf,hfd->hnd", z, w["W_O"].reshape(h, c.d_v, c.d_model))
    expected = dict(q=q, k=k, v=v, scores=scores, scaled=scaled, weights=weights, z=weights @ v_h)
    expected |= dict(concat=concat, output=output, contributions=contributions)
    if c.causal:
        expected["mask"] = mask
    assert set(expected) | {"x"} == set(ours)
    np.testing.assert_allclose(ours["z"], z.numpy(), **TOL)  # SDPA's head outputs
    for stage, theirs in expected.items():
        np.testing.assert_allclose(ours[stage], theirs.numpy(), **TOL, err_msg=stage)
    assert payload.kv_group == [i // (h // g) for i in range(h)]
