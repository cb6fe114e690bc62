"""The HTTP API through TestClient: the example, the lab's trace, and every kind of bad request."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient

from mha_explorer.schema import BINARY_MEDIA_TYPE, TracePayload, payload_arrays, to_numpy, unpack
from mha_explorer.server import create_app

pytestmark = pytest.mark.api


@pytest.fixture(scope="module")
def client():
    return TestClient(create_app())


def test_health(client):
    assert client.get("/api/health").json() == {"status": "ok"}


def test_the_page_answers_a_head_request_as_uptime_checks_send():
    response = TestClient(create_app()).head("/")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html") and response.content == b""


def test_every_response_carries_the_hardening_headers(client):
    for response in (client.get("/"), client.get("/api/example"), client.get("/static/explorer.js"), client.get("/nope")):
        assert "script-src 'self'" in response.headers["content-security-policy"]
        assert response.headers["x-content-type-options"] == "nosniff"


def test_example_in_both_encodings_holds_the_same_numbers(client):
    as_json = TracePayload.model_validate(client.get("/api/example").json())
    as_b64 = TracePayload.model_validate(client.get("/api/example?encoding=base64").json())
    assert as_json.tokens == ["cats", "like", "warm", "milk"] and as_json.tokens[as_json.query] == "like"
    a, b = payload_arrays(as_json), payload_arrays(as_b64)
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])
    for name in as_json.weights:
        np.testing.assert_array_equal(to_numpy(as_json.weights[name]), to_numpy(as_b64.weights[name]))


def test_a_seeded_lab_trace_is_reproducible_and_complete(client):
    body = {"config": {"d_model": 8, "n_heads": 4, "n_kv_heads": 2, "causal": True}, "tokens": "a b c d e".split(), "seed": 7}
    first, second = client.post("/api/trace", json=body), client.post("/api/trace", json=body)
    assert first.status_code == 200 and first.content == second.content
    payload = TracePayload.model_validate(first.json())
    assert payload.config.kind == "GQA" and payload.kv_group == [0, 0, 1, 1]
    assert [s.id for s in payload.page_stages] == ["projections", "scores", "mask", "weights", "mixing", "concat", "output"]
    weights = payload_arrays(payload)["weights"]
    assert np.all(weights[:, np.triu_indices(5, 1)[0], np.triu_indices(5, 1)[1]] == 0.0)
    other = client.post("/api/trace", json=body | {"seed": 8})
    assert other.content != first.content


def test_explicit_values_are_used_as_given(client):
    x = [[0.5, -1.0], [1.0, 0.0]]
    weights = {"W_Q": [[[1.0], [0.0]]], "W_K": [[[0.0], [1.0]]], "W_V": [[[1.0], [1.0]]], "W_O": [[2.0, 0.0]]}
    body = {"config": {"d_model": 2, "n_heads": 1, "d_head": 1}, "tokens": ["p", "q"], "x": x, "weights": weights}
    arrays = payload_arrays(TracePayload.model_validate(client.post("/api/trace", json=body).json()))
    np.testing.assert_array_equal(arrays["x"], x)
    np.testing.assert_array_equal(arrays["q"][0, :, 0], [0.5, 1.0])  # x @ [1, 0]
    np.testing.assert_array_equal(arrays["k"][0, :, 0], [-1.0, 0.0])  # x @ [0, 1]


def everything(payload: TracePayload) -> dict[str, np.ndarray]:
    """The stages and the weights of a payload, by name."""
    return payload_arrays(payload) | {name: to_numpy(a) for name, a in payload.weights.items()}


def test_edits_set_single_values_of_the_drawn_ones(client):
    """The page's lab sends the seed and its edited cells: the answer is the seeded trace with
    those values set, as numpy computes it from the same arrays."""
    body = {"config": {"d_model": 4, "n_heads": 2, "bias": True}, "tokens": ["a", "b", "c"], "seed": 3}
    drawn = everything(TracePayload.model_validate(client.post("/api/trace", json=body).json()))
    edits = {"x:1,2": 0.25, "W_Q:1,3,0": -2, "W_O:2,1": 1.5, "b_V:0,1": 0.75}
    arrays = everything(TracePayload.model_validate(client.post("/api/trace", json=body | {"edits": edits}).json()))
    expected = {name: drawn[name].copy() for name in ("x", "W_Q", "W_O", "b_V")}
    for key, value in edits.items():
        name, index = key.split(":")
        expected[name][tuple(int(i) for i in index.split(","))] = value
    for name, values in expected.items():
        np.testing.assert_array_equal(arrays[name], values)
    np.testing.assert_array_equal(arrays["W_K"], drawn["W_K"])  # what was not edited stays as drawn
    q = np.einsum("nd,hde->hne", expected["x"], expected["W_Q"]) + drawn["b_Q"][:, None, :]
    np.testing.assert_allclose(arrays["q"], q, rtol=1e-12)


def test_an_edit_index_written_with_leading_zeros_is_that_index(client):
    body = {"config": {"d_model": 2, "n_heads": 1}, "tokens": ["a"], "seed": 0}
    arrays = everything(TracePayload.model_validate(client.post("/api/trace", json=body | {"edits": {"x:0000000000,1": 0.25}}).json()))
    assert arrays["x"][0, 1] == 0.25


def test_the_largest_lab_configuration_with_an_edit_fits_in_a_request(client):
    """64 heads of width 64 on 64 tokens: over 1 million values, which as JSON would pass the body
    limit; the seed and the edit are a few hundred bytes."""
    config = {"d_model": 64, "n_heads": 64, "d_head": 64, "d_v": 64}
    body = {"config": config, "tokens": [f"t{i}" for i in range(64)], "seed": 1, "edits": {"W_V:63,63,63": 0.5}, "encoding": "binary"}
    response = client.post("/api/trace", json=body)
    assert response.status_code == 200, response.text[:300]
    assert everything(unpack(response.content))["W_V"][63, 63, 63] == 0.5


BAD = {
    "d_model over the limit": ({"config": {"d_model": 65, "n_heads": 1}, "tokens": ["a"]}, "config.d_model", "at most 64"),
    "zero heads": ({"config": {"d_model": 4, "n_heads": 0}, "tokens": ["a"]}, "config.n_heads", "at least 1"),
    "heads not a multiple": ({"config": {"d_model": 8, "n_heads": 6, "n_kv_heads": 4}, "tokens": ["a"]}, "config", "n_heads=6 is not a multiple of n_kv_heads=4"),
    "width not divisible": ({"config": {"d_model": 6, "n_heads": 4}, "tokens": ["a"]}, "config", "set d_head"),
    "too many tokens": ({"config": {"d_model": 4, "n_heads": 1}, "tokens": ["a"] * 65}, "tokens", "limit is 64"),
    "no tokens": ({"config": {"d_model": 4, "n_heads": 1}, "tokens": []}, "tokens", "at least 1"),
    "long token": ({"config": {"d_model": 4, "n_heads": 1}, "tokens": ["a" * 65]}, "tokens.0", "limit is 64"),
    "text in x": ({"config": {"d_model": 2, "n_heads": 1}, "tokens": ["a"], "x": [["abc", 1]]}, "x.0.0", "not a number"),
    "x of the wrong shape": ({"config": {"d_model": 2, "n_heads": 1}, "tokens": ["a", "b"], "x": [[1, 1]]}, "x", "need (2, 2)"),
    "ragged x": ({"config": {"d_model": 2, "n_heads": 1}, "tokens": ["a", "b"], "x": [[1, 1], [1]]}, "x", "rectangular"),
    "missing weight": ({"config": {"d_model": 2, "n_heads": 1}, "tokens": ["a"], "weights": {"W_Q": [[[1.0], [1.0]]]}}, "weights.W_K", "missing"),
    "unknown weight": ({"config": {"d_model": 2, "n_heads": 1}, "tokens": ["a"], "weights": {"W_X": []}}, "weights.W_X", "not a weight"),
    "weight of the wrong shape": (
        {"config": {"d_model": 2, "n_heads": 1}, "tokens": ["a"], "weights": {"W_Q": [[[1.0]]], "W_K": [[[1.0], [1.0]]], "W_V": [[[1.0], [1.0]]], "W_O": [[1.0, 1.0]]}},
        "weights.W_Q",
        "needs (1, 2, 2)",
    ),
    "text in a weight": (
        {"config": {"d_model": 1, "n_heads": 1}, "tokens": ["a"], "weights": {"W_Q": [[["NaN"]]], "W_K": [[[1.0]]], "W_V": [[[1.0]]], "W_O": [[1.0]]}},
        "weights.W_Q",
        'entry [0][0][0] is "NaN", not a number',
    ),
    "query out of range": ({"config": {"d_model": 2, "n_heads": 1}, "tokens": ["a"], "query": 3}, "query", "query=3 is out of range: there is 1 token; choose 0"),
    "unknown field": ({"config": {"d_model": 2, "n_heads": 1, "heads": 2}, "tokens": ["a"]}, "config.heads", "remove it"),
    "missing config": ({"tokens": ["a"]}, "config", "is required; add it"),
    "edit of an unknown array": ({"config": {"d_model": 2, "n_heads": 1}, "tokens": ["a"], "edits": {"W_X:0,0": 1}}, "edits.W_X:0,0", "name one of x, W_Q, W_K, W_V, W_O"),
    "edit of a bias the config lacks": ({"config": {"d_model": 2, "n_heads": 1}, "tokens": ["a"], "edits": {"b_Q:0,0": 1}}, "edits.b_Q:0,0", "b_Q is a bias, and this config has none: set bias to true, or edit one of x, W_Q, W_K, W_V, W_O"),
    "edit out of range": ({"config": {"d_model": 2, "n_heads": 1}, "tokens": ["a"], "edits": {"x:1,0": 1}}, "edits.x:1,0", "x has shape (1, 2)"),
    "edit with too few indices": ({"config": {"d_model": 2, "n_heads": 1}, "tokens": ["a"], "edits": {"W_Q:0,0": 1}}, "edits.W_Q:0,0", "give 3 indices"),
    "edit that is not a number": ({"config": {"d_model": 2, "n_heads": 1}, "tokens": ["a"], "edits": {"x:0,0": "1"}}, "edits.x:0,0", "number"),
    # once answered with a bare 500: Python reads no int of over 4,300 digits, and makes no float of one past float64
    "edit index of 5,000 digits": ({"config": {"d_model": 2, "n_heads": 1}, "tokens": ["a"], "edits": {"x:" + "9" * 5000 + ",0": 1}}, "edits.x:" + "9" * 28 + "…", "x has shape (1, 2)"),
    "edit index past the array": ({"config": {"d_model": 2, "n_heads": 1}, "tokens": ["a"], "edits": {"x:1000000000,0": 1}}, "edits.x:1000000000,0", "x has shape (1, 2)"),
    "edit of a megabyte of indices": ({"config": {"d_model": 2, "n_heads": 1}, "tokens": ["a"], "edits": {"x:" + "0," * 50_000 + "0": 1}}, "edits.x:" + "0," * 14 + "…", "give 2 indices"),
    "whole number past float64 in a weight": (
        {"config": {"d_model": 1, "n_heads": 1}, "tokens": ["a"], "weights": {"W_Q": [[[10**309]]], "W_K": [[[1]]], "W_V": [[[1]]], "W_O": [[1]]}},
        "weights.W_Q",
        "entry [0][0][0] is a whole number of about 310 digits, past the largest float64",
    ),
    "whole number past float64 in x": ({"config": {"d_model": 2, "n_heads": 1}, "tokens": ["a"], "x": [[10**309, 1]]}, "x.0.0", "is a whole number past the largest float64"),
    "long text where a number goes": ({"config": {"d_model": "a" * 100_000, "n_heads": 1}, "tokens": ["a"]}, "config.d_model", "(100,000 characters) is not a whole number"),
}


@pytest.mark.parametrize("body, field, words", BAD.values(), ids=BAD.keys())
def test_bad_requests_get_a_422_that_names_the_field_and_the_fix(client, body, field, words):
    response = client.post("/api/trace", json=body)
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert any(d["field"] == field and words in d["message"] for d in detail), detail


NON_FINITE = {
    "NaN": (b'{"config": {"d_model": 2, "n_heads": 1}, "tokens": ["a"], "x": [[NaN, 1]]}', "x.0.0"),
    "1e999": (b'{"config": {"d_model": 2, "n_heads": 1}, "tokens": ["a"], "x": [[1e999, 1]]}', "x.0.0"),
    "NaN in a weight": (
        b'{"config": {"d_model": 1, "n_heads": 1}, "tokens": ["a"], "weights": {"W_Q": [[[NaN]]], "W_K": [[[1]]], "W_V": [[[1]]], "W_O": [[1]]}}',
        "weights.W_Q",
    ),
}


@pytest.mark.parametrize("raw, field", NON_FINITE.values(), ids=NON_FINITE.keys())
def test_non_finite_numbers_are_refused(client, raw, field):
    response = client.post("/api/trace", content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 422
    assert response.json()["detail"][0]["field"] == field and "finite" in response.json()["detail"][0]["message"]


def test_a_fault_of_the_servers_own_is_a_500_in_the_same_shape_with_the_same_headers(monkeypatch):
    from fastapi.testclient import TestClient

    from mha_explorer import server

    def broken(request, packer=None):
        raise RuntimeError("a bug")

    monkeypatch.setattr(server, "lab_payload", broken)
    response = TestClient(server.create_app(), raise_server_exceptions=False).post("/api/trace", json={"config": {"d_model": 2, "n_heads": 1}, "tokens": ["a"]})
    assert response.status_code == 500 and response.headers["x-content-type-options"] == "nosniff"
    [problem] = response.json()["detail"]
    assert problem["field"] == "server" and "a fault of its own" in problem["message"] and "RuntimeError" not in problem["message"]


def test_a_body_that_is_not_json_gets_a_422_that_says_where_it_breaks(client):
    response = client.post("/api/trace", content=b"{bad json", headers={"content-type": "application/json"})
    assert response.status_code == 422
    [problem] = response.json()["detail"]
    assert problem["field"] == "body" and "not valid JSON" in problem["message"]
    assert "at character 2" in problem["message"] and "/openapi.json" in problem["message"]


@pytest.mark.parametrize(
    ("send", "status", "field"),
    [
        ({"content": b'{"config": {"d_model": 4, "n_heads": 2}, "tokens": ["a"]}', "headers": {"content-type": "text/plain"}}, 415, "content-type"),
        ({"data": {"config": "x", "tokens": "a"}}, 415, "content-type"),
        ({"json": ["a", "b"]}, 422, "body"),
        ({"content": b"[1]", "headers": {"content-type": "application/json; charset=utf-8"}}, 422, "body"),
        ({"content": b"[1]", "headers": {"content-type": "application/problem+json"}}, 422, "body"),
    ],
    ids=["text/plain", "form", "array", "json with charset", "a json type"],
)
def test_a_body_that_is_not_a_json_object_is_told_what_to_send(client, send, status, field):
    response = client.post("/api/trace", **send)
    assert response.status_code == status  # 415: sent as another type; 422: JSON, but not an object
    [problem] = response.json()["detail"]
    assert problem["field"] == field and "Content-Type: application/json" in problem["message"] and "JSON object" in problem["message"]
    assert response.headers["x-content-type-options"] == "nosniff"


def test_the_schema_is_served_and_the_docs_pages_that_need_a_cdn_are_not(client):
    assert client.get("/openapi.json").json()["info"]["title"] == "mha-explorer"
    assert client.get("/docs").status_code == 404 and client.get("/redoc").status_code == 404


LAB = {"config": {"d_model": 4, "n_heads": 2}, "tokens": ["a", "b"]}
MODEL = {"model": "minilm", "text": "hi", "layer": 0}
IN_OUR_WORDS = {
    "word for a width": ("/api/trace", LAB | {"config": {"d_model": "four", "n_heads": 2}}, "config.d_model", '"four" is not a whole number; send a whole number from 1 to 64'),
    "fraction for a width": ("/api/trace", LAB | {"config": {"d_model": 4.5, "n_heads": 2}}, "config.d_model", "4.5 is not a whole number; send a whole number from 1 to 64"),
    "number as text": ("/api/trace", LAB | {"config": {"d_model": "4", "n_heads": 2}}, "config.d_model", '"4" is not a whole number'),
    "letter for a query": ("/api/trace", LAB | {"query": "b"}, "query", '"b" is not a whole number; send a whole number, 0 or more'),
    "huge query": ("/api/trace", LAB | {"query": 1e30}, "query", "1e+30 is a whole number written as a decimal; send it without a point or an exponent, as a whole number, 0 or more"),
    "whole width with a point": ("/api/trace", LAB | {"config": {"d_model": 4.0, "n_heads": 2}}, "config.d_model", "4.0 is a whole number written as a decimal; send it without a point or an exponent, as a whole number from 1 to 64"),
    "huge width as a decimal": ("/api/trace", LAB | {"config": {"d_model": 1e9, "n_heads": 2}}, "config.d_model", "1000000000.0 is more than the limit of 64; send a whole number from 1 to 64"),
    "layer with a point": ("/api/model-trace", MODEL | {"layer": 2.0}, "layer", "2.0 is a whole number written as a decimal; send it without a point or an exponent, as a whole number such as 2"),
    "word for a layer": ("/api/model-trace", MODEL | {"layer": "zero"}, "layer", '"zero" is not a whole number; send a whole number such as 2'),
    "2 for a flag": ("/api/trace", LAB | {"config": {"d_model": 4, "n_heads": 2, "causal": 2}}, "config.causal", "2 is not true or false; send JSON true or false"),
    "yes for a flag": ("/api/trace", LAB | {"config": {"d_model": 4, "n_heads": 2, "causal": "yes"}}, "config.causal", '"yes" is not true or false'),
    "tokens as one string": ("/api/trace", LAB | {"tokens": "a b"}, "tokens", '"a b" is not a list; send a JSON array'),
    "config as a number": ("/api/trace", LAB | {"config": 5}, "config", "5 is not an object; send a JSON object"),
    "number as text in x": ("/api/trace", LAB | {"x": [["4", 1, 1, 1], [1, 1, 1, 1]]}, "x.0.0", '"4" is not a number; send a JSON number such as 0.5'),
    "true in x": ("/api/trace", LAB | {"x": [[True, 1, 1, 1], [1, 1, 1, 1]]}, "x.0.0", "true is not a number"),
    "text in a weight": (
        "/api/trace",
        {"config": {"d_model": 2, "n_heads": 1, "d_head": 1}, "tokens": ["a"], "weights": {"W_Q": [[[1, "x"]]], "W_K": [[[0.0], [1.0]]], "W_V": [[[1.0], [1.0]]], "W_O": [[2.0]]}},
        "weights.W_Q",
        'entry [0][0][1] is "x", not a number; send JSON numbers such as 0.5',
    ),
    "true in a weight": (
        "/api/trace",
        {"config": {"d_model": 1, "n_heads": 1}, "tokens": ["a"], "weights": {"W_Q": [[[1]]], "W_K": [[[1]]], "W_V": [[[1]]], "W_O": [[True]]}},
        "weights.W_O",
        "entry [0][0] is true, not a number",
    ),
}


@pytest.mark.parametrize("route, body, field, words", IN_OUR_WORDS.values(), ids=IN_OUR_WORDS.keys())
def test_type_errors_say_what_to_send_and_nothing_is_coerced(client, route, body, field, words):
    """Booleans must be JSON true/false and values JSON numbers: "yes", "4" and true are refused."""
    response = client.post(route, json=body)
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert any(d["field"] == field and words in d["message"] for d in detail), detail
    assert not any("Input should" in d["message"] or "0.5" in d["message"] and "whole" in d["message"] for d in detail), detail


@pytest.mark.parametrize("encoding", ["json", "base64", "binary"])
def test_values_that_overflow_get_a_422_not_a_wrong_trace(client, encoding):
    """1e200 squared is past float64: the scores would be +inf and the weights NaN, which JSON
    cannot carry (null means a masked -inf). The lab says what to change instead."""
    big = {"config": {"d_model": 2, "n_heads": 1}, "tokens": ["a", "b", "c"], "x": [[1e200, 1e200], [1e200, -1e200], [0.5, 0.5]], "encoding": encoding}
    answer = client.post("/api/trace", json=big)
    assert answer.status_code == 422
    [problem] = answer.json()["detail"]
    assert problem["field"] == "x" and "too large to compute with together; make the largest of them smaller" in problem["message"]
    # said of what the request gave, a field it has: its edits
    edited = client.post("/api/trace", json={"config": {"d_model": 2, "n_heads": 1}, "tokens": ["a", "b"], "seed": 0, "edits": {"x:0,0": 1e200, "x:0,1": 1e200}, "encoding": encoding})
    assert edited.status_code == 422 and edited.json()["detail"][0]["field"] == "edits"
    # of the field that gave the largest value: huge weights with a small x, a huge x with a small edit
    w = {"W_Q": [[[1e200], [1e200]]], "W_K": [[[1e200], [1e200]]], "W_V": [[[1.0], [1.0]]], "W_O": [[1.0, 1.0]]}
    heavy = client.post("/api/trace", json={"config": {"d_model": 2, "n_heads": 1, "d_head": 1}, "tokens": ["a", "b"], "x": [[1, 1], [1, 2]], "weights": w, "encoding": encoding})
    assert heavy.status_code == 422 and heavy.json()["detail"][0]["field"] == "weights"
    wide = client.post("/api/trace", json={**big, "edits": {"x:2,0": 0.25}})
    assert wide.status_code == 422 and wide.json()["detail"][0]["field"] == "x"
    fine = client.post("/api/trace", json={**big, "x": [[1e99, 1e99], [1e99, -1e99], [0.5, 0.5]]})
    assert fine.status_code == 200  # values the page's cells take (under 1e100) are fine alone
    causal = client.post("/api/trace", json={**big, "config": {"d_model": 2, "n_heads": 1, "causal": True}, "x": [[1, 2], [3, 4], [5, 6]]})
    assert causal.status_code == 200  # a mask's -inf is not an overflow


@pytest.mark.parametrize(
    "config",
    [{"d_model": 6, "n_heads": 3, "causal": True, "bias": True}, {"d_model": 8, "n_heads": 4, "n_kv_heads": 2}, {"d_model": 4, "n_heads": 4, "n_kv_heads": 1, "d_v": 3}],
)
def test_a_binary_answer_holds_exactly_what_the_base64_answer_holds(client, config):
    """The page's encoding: a JSON head and the raw float64 arrays, 8-byte aligned after it."""
    request = {"config": config, "tokens": ["a", "b", "c", "d", "e"], "seed": 7, "query": 2}
    binary = client.post("/api/trace", json=request | {"encoding": "binary"})
    base64 = client.post("/api/trace", json=request | {"encoding": "base64"})
    assert binary.status_code == 200 and binary.headers["content-type"] == BINARY_MEDIA_TYPE
    head_size = int.from_bytes(binary.content[:8], "little")
    assert head_size % 8 == 0 and binary.content[8:9] == b"{"
    assert unpack(binary.content, TracePayload).model_dump() == TracePayload.model_validate_json(base64.content).model_dump()
    assert len(binary.content) < len(base64.content)
    mask = payload_arrays(unpack(binary.content, TracePayload)).get("mask")
    assert config.get("causal") is not True or np.isneginf(mask[:, 0, 1:]).all()  # -inf travels as itself


def test_a_binary_request_that_is_wrong_still_gets_a_json_422(client):
    answer = client.post("/api/trace", json={"config": {"d_model": 4, "n_heads": 3}, "tokens": ["a"], "encoding": "binary"})
    assert answer.status_code == 422 and answer.headers["content-type"] == "application/json"
    assert answer.json()["detail"][0]["field"] == "config" and "n_heads=3" in answer.json()["detail"][0]["message"]


@pytest.mark.parametrize(
    "entry, said",
    [
        ("1e400", "entry [0][0][0] is past the largest float64 (about 1.8e308), so it reads as infinite; send a smaller one"),
        ("-Infinity", "entry [0][0][0] is past the largest float64 (about 1.8e308), so it reads as infinite; send a smaller one"),
        ("NaN", "entry [0][0][0] is NaN: every value must be a finite number"),
    ],
)
def test_a_weight_past_float64_is_said_in_the_numbers_sent(client, entry, said):
    """1e400 in the JSON is read as infinity: the message speaks of the number sent, not of "inf"."""
    rows = "[[" + entry + ", 0], [0, 0], [0, 0], [0, 0]], [[0, 0], [0, 0], [0, 0], [0, 0]]"
    body = '{"config": {"d_model": 4, "n_heads": 2}, "tokens": ["a"], "weights": {"W_Q": [' + rows + "]}}"
    answer = client.post("/api/trace", content=body, headers={"content-type": "application/json"})
    assert answer.status_code == 422
    detail = answer.json()["detail"][0]
    assert detail["field"] == "weights.W_Q" and detail["message"] == said
