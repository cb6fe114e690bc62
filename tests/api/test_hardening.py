"""Safe defaults: body caps, the trace queue, security headers, logging, static paths, shutdown."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import httpx
import pytest
import uvicorn
from fastapi.testclient import TestClient

import mha_explorer
from mha_explorer import server
from mha_explorer.models import available_models
from mha_explorer.server import create_app

pytestmark = pytest.mark.api

SMALL = {"config": {"d_model": 4, "n_heads": 2}, "tokens": ["a", "b"]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_body_over_the_limit_is_refused_with_413():
    client = TestClient(create_app(max_body=2_000))
    big = json.dumps(SMALL | {"tokens": ["t"] * 40, "pad": "x" * 3_000}).encode()
    response = client.post("/api/trace", content=big, headers={"content-type": "application/json"})
    assert response.status_code == 413
    assert response.json()["detail"][0]["field"] == "body" and "2,000 bytes" in response.json()["detail"][0]["message"]
    assert "script-src 'self'" in response.headers["content-security-policy"]


def test_a_model_text_over_the_limit_is_refused_as_a_text_with_the_character_limit():
    client = TestClient(create_app(max_body=2_000))
    response = client.post("/api/model-trace", json={"model": "minilm", "text": "a " * 2_000, "layer": 0})
    assert response.status_code == 413
    detail = response.json()["detail"][0]
    assert detail["field"] == "text" and "a model's text may be at most 16,000 characters" in detail["message"] and "lab" not in detail["message"]


def test_a_streamed_body_without_length_is_cut_at_the_limit():
    client = TestClient(create_app(max_body=2_000))

    def chunks():
        yield b'{"config": {"d_model": 4, "n_heads": 2}, "tokens": ["'
        for _ in range(10):
            yield b"x" * 500
        yield b'"]}'

    response = client.post("/api/trace", content=chunks(), headers={"content-type": "application/json"})
    assert response.status_code == 413


def test_one_structured_log_line_per_request(caplog):
    client = TestClient(create_app())
    with caplog.at_level(logging.INFO, logger="mha_explorer.access"):
        client.get("/api/health")
        client.post("/api/trace", json={"tokens": []})
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "mha_explorer.access"]
    assert [(l["method"], l["path"], l["status"]) for l in lines] == [("GET", "/api/health", 200), ("POST", "/api/trace", 422)]
    assert all(isinstance(l["ms"], float) and l["ms"] >= 0 for l in lines)


def test_static_files_cannot_reach_outside_the_web_folder():
    client = TestClient(create_app())
    for path in ("/static/../server.py", "/static/%2e%2e/server.py", "/static/..%2fserver.py", "/static/%2e%2e%2f%2e%2e%2fpyproject.toml"):
        response = client.get(path)
        assert response.status_code == 404, path
        assert b"create_app" not in response.content


def test_no_route_takes_a_path():
    spec = TestClient(create_app()).get("/openapi.json").json()
    names = {p["name"] for ops in spec["paths"].values() for op in ops.values() for p in op.get("parameters", [])}
    assert names <= {"encoding", "name"}  # name: a model of the registry, never a file
    assert "path" not in json.dumps(spec["components"]["schemas"]["TraceRequest"]).lower()
    client = TestClient(create_app())
    for name in ("..%2F..%2Fetc%2Fpasswd", "%2Fetc%2Fpasswd", "C:%5Cmodels"):
        response = client.get(f"/api/models/{name}")
        assert response.status_code == 404, name
        assert "root:" not in response.text
    refused = client.post("/api/model-trace", json={"model": "/etc/passwd", "text": "a", "layer": 0})
    assert refused.status_code == 422 and "choose one of" in refused.json()["detail"][0]["message"]


@contextlib.contextmanager
def one_slot_taken(monkeypatch, before=None):
    """A server with one trace slot and no queue, that slot taken by a lab trace held until the
    block ends (which then must succeed); yields the API's base URL. before(base) runs first."""
    release = threading.Event()
    started = threading.Event()
    real = server.lab_payload

    def slow(request, *args):
        started.set()
        release.wait(20)
        return real(request, *args)

    monkeypatch.setattr(server, "lab_payload", slow)
    port = free_port()
    uv = uvicorn.Server(uvicorn.Config(create_app(workers=1, queue=0), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=uv.run, daemon=True)
    thread.start()
    while not uv.started:
        time.sleep(0.02)
    base = f"http://127.0.0.1:{port}/api/"
    first: dict = {}
    worker = None
    try:
        if before:
            before(base)
        worker = threading.Thread(target=lambda: first.setdefault("r", httpx.post(base + "trace", json=SMALL, timeout=30)))
        worker.start()
        assert started.wait(10)  # the one slot is taken
        yield base
    finally:
        release.set()
        if worker:
            worker.join(30)
        uv.should_exit = True
        thread.join(10)
    assert first["r"].status_code == 200


def test_a_full_trace_queue_answers_503_with_retry_after(monkeypatch):
    with one_slot_taken(monkeypatch) as base:
        second = httpx.post(base + "trace", json=SMALL, timeout=10)
        assert second.status_code == 503 and second.headers["retry-after"] == "1"
        assert "try again" in second.json()["detail"][0]["message"]
        assert httpx.get(base + "health").status_code == 200  # still serving


def load_minilm(base: str) -> None:
    assert httpx.post(base + "models/minilm/load", timeout=60).status_code == 202
    while httpx.get(base + "models/minilm", timeout=60).json()["state"] == "loading":
        time.sleep(0.05)


@pytest.mark.skipif("minilm" not in {m.name for m in available_models() if m.installed}, reason="minilm is not installed: run make models")
def test_a_request_the_trace_would_refuse_is_told_so_at_once_while_the_queue_is_full(monkeypatch):
    """With every slot taken and none to wait in, a good request is asked to retry (503); one
    with a head, layer, query or text a trace would refuse is told what to change (422) at
    once, and would be while waiting, instead of after the wait or never. A layer's weights run
    no trace: they come at once."""
    with one_slot_taken(monkeypatch, before=load_minilm) as base:
        text = "Heads read from different tokens."
        for route, body, field, said in [
            ("model-trace", {"model": "minilm", "text": text, "layer": 0, "head": 12}, "head", "heads 0 to 11"),
            ("model-head", {"model": "minilm", "text": text, "layer": 9, "head": 0}, "layer", "layers 0 to 5"),
            ("model-weights", {"model": "minilm", "layer": 9}, "layer", "layers 0 to 5"),
            ("model-trace", {"model": "minilm", "text": text, "layer": 0, "query": 40}, "query", "choose 0 to"),
            ("model-trace", {"model": "minilm", "text": "word " * 600, "layer": 0}, "text", "shorten the text"),
            ("trace", SMALL | {"query": 5}, "query", "query=5 is out of range"),
            ("trace", {"config": {"d_model": 5, "n_heads": 2}, "tokens": ["a"]}, "config", "d_model"),
        ]:
            answer = httpx.post(base + route, json=body, timeout=10)
            assert answer.status_code == 422, (route, body, answer.status_code, answer.text)
            detail = answer.json()["detail"][0]
            assert detail["field"] == field and said in detail["message"], (route, detail)
        # a good request is asked to come back
        good = httpx.post(base + "model-trace", json={"model": "minilm", "text": text, "layer": 0}, timeout=10)
        assert good.status_code == 503 and good.headers["retry-after"] == "1"
        assert httpx.post(base + "model-weights", json={"model": "minilm", "layer": 0}, timeout=10).status_code == 200


def test_serve_binds_loopback_and_stops_gracefully_on_sigterm():
    port = free_port()
    exe = os.path.join(os.path.dirname(sys.executable), "mha-explorer")
    proc = subprocess.Popen([exe, "serve", "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the server did not come up"
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    # uvicorn finishes the open requests, then ends the process with the signal it caught
    assert proc.returncode in (0, -signal.SIGTERM)
    assert f"http://127.0.0.1:{port}/" in out
    assert "Traceback" not in err
    assert '"path": "/api/health", "status": 200' in err


def test_a_post_from_another_sites_page_is_refused_and_the_pages_own_is_not():
    client = TestClient(create_app())
    own = client.post("/api/trace", json=SMALL, headers={"origin": "http://testserver"})
    assert own.status_code == 200
    for origin in ("http://evil.example", "null"):  # a form or a script on another site; a sandboxed page
        refused = client.post("/api/models/gemma3/load", headers={"origin": origin, "content-type": "application/x-www-form-urlencoded"}, content=b"x=1")
        assert refused.status_code == 403 and refused.json()["detail"][0]["field"] == "origin", origin
        assert "nosniff" in refused.headers["x-content-type-options"]
    proxied = client.post("/api/trace", json=SMALL, headers={"origin": "https://Explorer.example", "host": "explorer.example"})
    assert proxied.status_code == 200  # behind a reverse proxy that passes the browser's Host on (names are not case-sensitive)
    spoofed = client.post("/api/trace", json=SMALL, headers={"origin": "http://evil.example", "x-forwarded-host": "evil.example"})
    assert spoofed.status_code == 403  # a forwarding header is no proof of the page's origin
    assert client.get("/api/health", headers={"origin": "http://evil.example"}).status_code == 200  # reading is harmless


def test_a_loopback_server_answers_for_loopback_names_only():
    client = TestClient(create_app(hosts=server.LOOPBACK_NAMES), base_url="http://127.0.0.1:8000")
    assert client.get("/api/health").status_code == 200
    assert client.get("/api/health", headers={"host": "localhost:8000"}).status_code == 200
    assert client.get("/api/health", headers={"host": "[::1]:8000"}).status_code == 200
    rebound = client.get("/api/health", headers={"host": "evil.example:8000"})
    assert rebound.status_code == 403 and rebound.json()["detail"][0]["field"] == "host"
    assert "answers for 127.0.0.1, [::1], localhost only, not 'evil.example:8000'" in rebound.json()["detail"][0]["message"]


@contextlib.contextmanager
def serving(*options: str):
    """`mha-explorer serve` on a free loopback port, with options; yields its address once it answers."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "mha_explorer.cli", "serve", "--port", str(port), *options], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/api/health")
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=20)


def test_serve_on_the_loopback_address_refuses_other_host_names():
    with serving() as url:
        assert httpx.get(url + "/api/health").status_code == 200
        assert httpx.get(url + "/api/health", headers={"host": "evil.example"}).status_code == 403
    from click.testing import CliRunner

    from mha_explorer.cli import main

    for wrong in ("https://explorer.example", "explorer.example:443", ""):
        refused = CliRunner().invoke(main, ["serve", "--allow-host", wrong])
        assert refused.exit_code == 2 and "is not a host name; give it as a browser's address bar shows it" in refused.output, wrong
    with serving("--allow-host", "Explorer.example") as url:  # a reverse proxy's name is answered too
        assert httpx.get(url + "/api/health", headers={"host": "explorer.example:443"}).status_code == 200
        assert httpx.get(url + "/api/health", headers={"host": "evil.example"}).status_code == 403


def test_a_wrong_path_or_method_says_what_to_use_and_reads_answer_head():
    client = TestClient(create_app())
    wrong = client.get("/api/trace")
    assert wrong.status_code == 405
    assert wrong.json()["detail"] == [{"field": "method", "message": "GET is not answered at /api/trace; use POST"}]
    missing = client.get("/api/nothing-here")
    assert missing.status_code == 404 and "/openapi.json lists the API's paths" in missing.json()["detail"][0]["message"]
    for path in ("/api/health", "/api/example", "/api/models"):  # HEAD, as GET without the body
        head = client.head(path)
        assert head.status_code == 200 and head.content == b"", path
    refused = client.request("HEAD", "/api/trace")
    assert refused.status_code == 405 and refused.headers["allow"] == "POST"


def test_the_pages_files_are_checked_again_on_each_load():
    """After an upgrade the page must not run old scripts against the new server: its files are
    revalidated (no-cache); the scripts and styles are answered 304 while unchanged."""
    client = TestClient(create_app())
    assert client.get("/").headers["cache-control"] == "no-cache"
    for path in ("/static/explorer.js", "/static/page.css"):
        first = client.get(path)
        assert first.status_code == 200 and first.headers["cache-control"] == "no-cache", path
        assert client.get(path, headers={"if-none-match": first.headers["etag"]}).status_code == 304, path
    assert "cache-control" not in client.get("/api/health").headers


def test_a_model_the_path_names_that_is_not_there_is_404_and_one_not_installed_is_said(monkeypatch):
    from dataclasses import replace

    from mha_explorer.models import registry

    client = TestClient(create_app())
    for method, path in (("GET", "/api/models/bert-large"), ("POST", "/api/models/bert-large/load")):
        response = client.request(method, path)
        assert response.status_code == 404, path
        [problem] = response.json()["detail"]
        assert problem["field"] == "model" and problem["message"].startswith('no model named "bert-large"; choose one of: minilm, smollm2')
    # a model whose package is missing: its status says so (as the list does); loading it is refused with the command to run
    real = registry.available_models
    monkeypatch.setattr(registry, "available_models", lambda: [replace(m, installed=False, location=None) if m.name == "smollm2" else m for m in real()])
    status = client.get("/api/models/smollm2")
    assert status.status_code == 200 and status.json()["installed"] is False and status.json()["state"] == "idle"
    refused = client.post("/api/models/smollm2/load")
    assert refused.status_code == 409
    [problem] = refused.json()["detail"]
    assert problem["field"] == "model" and problem["message"].startswith("smollm2 is not installed; run: pip install")
    assert client.get("/api/models/smollm2").json()["state"] == "idle"  # nothing was started


def test_the_schema_lists_only_the_errors_a_route_can_answer():
    """A GET reads no body: no 400, 413 or 415 for it, nor a 422 said of a body (clients are generated from this)."""
    spec = TestClient(create_app()).get("/openapi.json").json()
    for path in ("/api/example", "/api/models/{name}"):
        answers = spec["paths"][path]["get"]["responses"]
        assert not {"400", "413", "415", "503"} & set(answers), (path, answers)
        assert "body" not in answers["422"]["description"] and "address" in answers["422"]["description"], path
    assert "400" not in spec["paths"]["/api/models/{name}/load"]["post"]["responses"]


def test_the_schema_lists_every_error_a_route_answers():
    """Every route refuses a foreign Host or Origin (403), and a parameter the address does not take
    (422, /api/models?x=1 too): the schema says both, as clients are generated from it."""
    client = TestClient(create_app())
    spec = client.get("/openapi.json").json()
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            assert "403" in operation["responses"], (method, path)
            assert ("422" in operation["responses"]) == (path != "/api/health"), (method, path)  # a probe takes what is added
    assert client.get("/api/models?x=1").status_code == 422
    assert client.post("/api/trace", json=SMALL, headers={"origin": "https://elsewhere.example"}).status_code == 403
    assert spec["info"]["version"] == mha_explorer.__version__


def test_loading_a_model_takes_no_body_and_says_so_when_one_comes():
    """Every other route refuses what it would not use; the load route took any body in silence."""
    client = TestClient(create_app())
    for body, kind in ((b"garbage", "application/json"), (b'{"x": 1}', "application/json"), (b"xx", "text/plain")):  # of any type: not "send JSON"
        refused = client.post("/api/models/bert-large/load", content=body, headers={"content-type": kind})
        assert refused.status_code == 422, body
        assert refused.json()["detail"] == [{"field": "body", "message": "this route takes no body: send none (the model is named in the path)"}]
    for nothing in (b"", b"{}", b" { } ", b"null"):  # none, or one that says nothing, of any type: the path is read
        for kind in ("application/json", "text/plain"):
            assert client.post("/api/models/bert-large/load", content=nothing, headers={"content-type": kind}).status_code == 404, (nothing, kind)
    assert client.put("/api/models/bert-large/load", content=b"xx").status_code == 405  # another method: as without a body


def test_a_body_that_cannot_be_read_as_json_says_the_ways_it_can_fail():
    """Nested a thousand deep (deeper than a JSON reader follows), or gzip-compressed: a 400 that
    names both, as well as UTF-8, so the sender knows what to change."""
    import gzip

    client = TestClient(create_app())
    deep = '{"config": {"d_model": 4, "n_heads": 2}, "tokens": ["a"], "x": ' + "[" * 1000 + "]" * 1000 + "}"
    squeezed = gzip.compress(json.dumps(SMALL).encode())
    for body, headers in [(deep.encode(), {}), (squeezed, {"content-encoding": "gzip"})]:
        answer = client.post("/api/trace", content=body, headers={"content-type": "application/json", **headers})
        assert answer.status_code == 400, answer.text
        message = answer.json()["detail"][0]["message"]
        assert "UTF-8" in message and "not compressed" in message and "nested at most a few hundred deep" in message, message


def test_a_number_too_long_to_read_is_said_as_such_not_as_bad_json():
    """A whole number of 5,000 digits is JSON, but more than Python reads (4,300): the 400 says
    that, not that the body is compressed or nested too deep."""
    client = TestClient(create_app())
    body = '{"config": {"d_model": ' + "9" * 5000 + ', "n_heads": 2}, "tokens": ["a"]}'
    answer = client.post("/api/trace", content=body.encode(), headers={"content-type": "application/json"})
    assert answer.status_code == 400, answer.text
    assert answer.json()["detail"] == [{"field": "body", "message": "the body holds a number thousands of digits long, which cannot be read; send numbers of the sizes each field takes"}]


def test_a_parameter_of_the_address_no_route_takes_is_refused_not_ignored():
    """?encoding=binary on a POST (whose encoding goes in the body) would answer JSON with no word
    of why: it is a 422 that says where the field goes. A GET is told what it takes; the page
    and the health probe take whatever a link or a monitor adds."""
    client = TestClient(create_app())
    answer = client.post("/api/trace?encoding=binary", json=SMALL)
    assert answer.status_code == 422
    assert answer.json()["detail"][0] == {"field": "url.encoding", "message": '"encoding" is not a parameter of this address; send it as a field of the JSON body'}
    typo = client.get("/api/example?encodin=base64").json()["detail"][0]
    assert typo == {"field": "url.encodin", "message": '"encodin" is not a parameter of this address (it takes encoding); remove it'}
    # the address's own parameter, wrong, is named as the address's (not the body's "query" field)
    assert client.get("/api/example?encoding=binary").json()["detail"][0]["field"] == "url.encoding"
    assert client.get("/api/example?encoding=base64").status_code == 200
    assert client.get("/?utm_source=mail").status_code == 200 and client.get("/api/health?t=1").status_code == 200
    # a route that takes no body: the parameter is to be left out, not moved into one
    force = client.post("/api/models/minilm/load?force=1").json()["detail"][0]
    assert force == {"field": "url.force", "message": '"force" is not a parameter of this address; remove it'}


def test_a_name_the_client_made_up_is_given_back_cut_short():
    """An unknown field of 900 KB came back whole in `field`: a 900 KB answer to one mistake."""
    client = TestClient(create_app(max_body=2_000_000))
    long_name = "k" * 900_000
    for answer in (
        client.post("/api/trace", json=SMALL | {long_name: 1}),
        client.post("/api/trace", json={**SMALL, "config": {"d_model": 4, "n_heads": 2, long_name: 1}}),
        client.get(f"/api/models?{'a' * 30_000}=1"),
        client.post("/api/trace", json=SMALL | {"weights": {"k" * 900_000: [[1.0]]}}),
    ):
        assert answer.status_code == 422 and len(answer.content) < 2_000, len(answer.content)
        field = answer.json()["detail"][0]["field"]
        assert field.endswith("k" * 30 + "…") or field.endswith("a" * 30 + "…"), field
    nothing = client.get("/" + "x" * 200).json()["detail"][0]["message"]
    assert "x" * 69 + "…;" in nothing  # a path cut short says so


def test_an_edit_index_padded_with_thousands_of_zeros_is_read_as_its_number():
    """Python reads no int of 4,300 digits or more: "000…0" was a 500."""
    client = TestClient(create_app())
    zeros = "0" * 4_301
    answer = client.post("/api/trace", json=SMALL | {"edits": {f"x:{zeros},0": 1.0}})
    assert answer.status_code == 200, answer.text
    x = client.post("/api/trace", json=SMALL | {"edits": {"x:0,0": 1.0}})
    assert answer.json()["stages"]["x"] == x.json()["stages"]["x"]  # the same cell as x:0,0
    past = client.post("/api/trace", json=SMALL | {"edits": {f"x:{zeros}9,0": 1.0}})
    assert past.status_code == 422 and past.json()["detail"][0]["field"].startswith("edits.x:000")


def test_the_opener_policy_is_sent_where_the_browser_takes_it():
    """Over plain HTTP from another machine Chromium ignores Cross-Origin-Opener-Policy and logs
    an error on every load: it is sent to a page on this machine, or over HTTPS, only."""
    app = create_app()
    for base, host, sent in (
        ("http://testserver", "127.0.0.1:8000", True),
        ("http://testserver", "localhost:8000", True),
        ("http://testserver", "[::1]:8000", True),
        ("https://explorer.example", "explorer.example", True),
        ("http://testserver", "192.0.2.2:8761", False),
        ("http://testserver", "explorer.example", False),
    ):
        answer = TestClient(app, base_url=base).get("/", headers={"host": host})
        assert answer.status_code == 200
        assert (answer.headers.get("cross-origin-opener-policy") == "same-origin") == sent, (base, host)
        assert answer.headers["x-frame-options"] == "DENY"


def test_the_pages_files_are_gzipped_and_the_apis_answers_are_not():
    client = TestClient(create_app())
    script = client.get("/static/explorer.js", headers={"accept-encoding": "gzip"})
    assert script.status_code == 200 and script.headers["content-encoding"] == "gzip" and "accept-encoding" in script.headers["vary"].lower()
    assert script.text == (server.WEB / "explorer.js").read_text(encoding="utf-8")  # the client unpacks it
    assert script.headers["cache-control"] == "no-cache" and script.headers["x-content-type-options"] == "nosniff"
    assert client.get("/", headers={"accept-encoding": "gzip"}).headers["content-encoding"] == "gzip"
    assert "content-encoding" not in client.get("/static/explorer.js", headers={"accept-encoding": "identity"}).headers
    assert "content-encoding" not in client.get("/api/example", headers={"accept-encoding": "gzip"}).headers
    # a page unchanged since it was fetched is still a 304, with no body
    again = client.get("/static/explorer.js", headers={"accept-encoding": "gzip", "if-none-match": script.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
