"""`mha-explorer models`, `serve` and the errors of `trace` that name a bad option value or path."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
from click.testing import CliRunner

from mha_explorer.cli import layer_groups, main, page_url
from mha_explorer.modelview import token_label
from mha_explorer.config import AttentionConfig
from mha_explorer.models import NAMES, available_models
from mha_explorer.models.registry import SUPPORTED

try:
    import fcntl  # Linux and the like: a pipe's size
except ImportError:
    fcntl = None

pytestmark = pytest.mark.cli
INSTALLED = {m.name for m in available_models() if m.installed}


def invoke(*args: str, width: int = 80):
    result = CliRunner().invoke(main, list(args), env={"COLUMNS": str(width)})
    assert "Traceback" not in result.output
    return result


def one_error(result) -> str:
    """The command failed with exit status 2 and one line on stderr after any loading progress."""
    assert result.exit_code == 2, (result.output, result.exception)
    assert result.stdout == ""
    lines = [line for line in result.stderr.splitlines() if not line.startswith("loading ")]
    assert len(lines) == 1, lines
    assert lines[0].startswith("Error: ")
    return lines[0]


# --- 3. models, readable at 80 columns ------------------------------------------


def test_the_model_list_fits_80_columns_but_for_whole_paths():
    out = invoke("models").stdout
    paths = {m.location for m in available_models() if m.installed}
    assert all(any(line.strip() == path for line in out.splitlines()) for path in paths)  # copied whole
    assert max(len(line) for line in out.splitlines() if not any(p in line for p in paths)) <= 80
    for name in NAMES:
        assert any(line.startswith(f"{name} ") for line in out.splitlines()), name


def test_the_model_list_names_every_package_a_model_comes_from():
    """Gemma 3 ships in a package and four part packages, all of which must be installed: the list
    names each, as its --json does."""
    out = " ".join(invoke("models").stdout.split())  # unwrapped
    listed = {m["name"]: m for m in json.loads(invoke("models", "--json").stdout)}
    assert len(listed["gemma3"]["parts"]) == 4 and listed["minilm"]["parts"] == []
    for info in listed.values():
        for package in [info["package"], *info["parts"]]:
            assert package in out and package in info["install"], package


@pytest.mark.parametrize("name", ["minilm", "smollm2"])
def test_a_models_configuration_fits_80_columns_and_agrees_with_its_json(name):
    if name not in INSTALLED:
        pytest.skip(f"{name} is not installed: run make models")
    out = invoke("models", name).stdout
    summary = json.loads(invoke("models", name, "--json").stdout)
    paths = (summary["source"], summary["tokenizer"])
    assert any(summary["source"] in line for line in out.splitlines())  # a path whole (on a line of its own if need be): it can be copied
    assert max(len(line) for line in out.splitlines() if not any(p in line for p in paths)) <= 80
    assert "{'" not in out  # no Python dict
    by_layer = " ".join(out.partition(f"attention, by layer ({summary['n_layers']} layers")[2].split())
    assert summary["layers"].count(summary["layers"][0]) == summary["n_layers"]  # one kind of layer
    for key in ("d_model", "n_heads", "n_kv_heads", "d_head", "d_v"):
        assert f"{key} {summary['layers'][0][key]}" in by_layer, key
    assert "layers 0" not in out  # nothing to group
    # the tool's own limit on a text is not said as the model's: SmolLM2 was built for 8,192
    context = {"minilm": 512, "smollm2": 8192}[name]
    assert summary["context_length"] == context and summary["max_tokens"] == min(context, 1024)
    assert f"context_length: {context} (the longest input the model was built for)" in out
    assert f"max_tokens: {min(context, 1024)} (the longest text traced here: the context length, up to 1024)" in out


def _spans_to_layers(spans: str) -> list[int]:
    out = []
    for span in spans.split(", "):
        first, _, last = span.partition("–")
        out += range(int(first), int(last or first) + 1)
    return out


def test_layers_are_grouped_by_kind_and_the_sliding_window_ones_named():
    """A Gemma-3-like model: a full-attention layer after every five sliding-window ones, with
    float32 numbers as GGUF stores them."""
    eps, sliding = float(np.float32(1e-6)), [i % 6 != 5 for i in range(18)]
    base = AttentionConfig(d_model=640, n_heads=4, n_kv_heads=1, d_head=256, causal=True, qk_norm=True, norm_eps=eps, scale=0.0625)
    layers = [
        replace(base, sliding_window=512, rope_theta=1e4).to_dict() if s else replace(base, rope_theta=1e6).to_dict()
        for s in sliding
    ]
    lines = layer_groups(layers)
    assert lines[0].startswith("every layer: ") and "norm_eps 1e-06" in lines[0] and "scale 0.0625" in lines[0]
    assert "e-07" not in " ".join(lines)
    kinds = {line.partition(": ")[2]: _spans_to_layers(line.removeprefix("layers ").partition(": ")[0]) for line in lines[1:]}
    assert kinds == {
        "rope_theta 10000, sliding window 512": [i for i in range(18) if sliding[i]],
        "rope_theta 1000000, no sliding window (global: full attention)": [i for i in range(18) if not sliding[i]],
    }
    # a kind of one layer is "layer 2", not "layers 2" (layers 3 to 5 given, as 0 to 2)
    assert layer_groups(layers[3:6])[1:] == ["layers 0–1: rope_theta 10000, sliding window 512", "layer 2: rope_theta 1000000, no sliding window (global: full attention)"]


# --- 5. token labels, as the page draws them -----------------------------------


@pytest.mark.parametrize(
    ("token", "text", "label"),
    [("Ġfox", " fox", "␣fox"), ("▁▁mat", "  mat", "␣␣mat"), ("Ċ", "\n", "↵"), ("Ġ", " ", "␣"), ("\t", "\t", "⇥"),
     ("##ing", "ing", "ing"), ("<0xE2>", "\ufffd", "<0xE2>"), ("[CLS]", "[CLS]", "[CLS]"),
     ("ĊĠĠĠ", "\n   ", "↵␣␣␣"), ("ĠĠĊ", "  \n", "␣␣↵"), ("fox▁", "fox ", "fox␣"), ("a▁b", "a b", "a b"),
     ("\u200b", "\u200b", "U+200B"), ("\u200d\u200b", "\u200d\u200b", "U+200D U+200B"),
     ("ĠâĢ®", " \u202e", "␣U+202E"), ("Ċ", "\n\u2066\u2069", "↵U+2066 U+2069"), ("ab", "a\u200db", "a\u200db")],  # an override beside a space is named, not hidden; a joiner inside a word stays
)
def test_token_labels_follow_the_pages_token_labels(token, text, label):
    assert token_label(token, text) == label


# --- 6. paths that do not exist, checkpoints the explorer does not read -------


@pytest.mark.parametrize("path", ["./nonexistent", "~/nonexist.gguf", "models/none"])
def test_a_missing_path_says_no_such_file_and_lists_the_models(path):
    error = one_error(invoke("trace", "--model", path))
    assert f"no such file or directory: {path}" in error
    assert ", ".join(NAMES) in error
    assert "unknown model" not in error


def test_an_unknown_name_is_an_unknown_model():
    error = one_error(invoke("trace", "--model", "gpt5"))
    assert "unknown model 'gpt5'" in error and ", ".join(NAMES) in error


@pytest.mark.parametrize(
    "given, said",
    [
        (b"/tmp", "the model is bytes, not a name or a path: decode it first (os.fsdecode)"),  # was "no such file or directory: b'/tmp'"
        (3, 'the model is int, not a name or a path: give a name such as "minilm", or a checkpoint\'s path'),  # was "unknown model '3'"
        (None, "the model is NoneType, not a name or a path"),
    ],
)
def test_load_model_given_no_name_or_path_says_what_it_takes(given, said):
    from mha_explorer.models import ModelError, load_model

    with pytest.raises(ModelError) as error:
        load_model(given)
    assert str(error.value).startswith(said), str(error.value)


@pytest.mark.parametrize("name", ["", " "])
def test_an_empty_model_name_lists_the_models_and_never_reads_the_current_directory(name, tmp_path, monkeypatch):
    (tmp_path / "weights.bin").write_bytes(b"\x80\x02")  # a pickle, which the current directory would be refused for
    monkeypatch.chdir(tmp_path)
    error = one_error(invoke("trace", "--model", name))
    assert ", ".join(NAMES) in error and "weights.bin" not in error and "pickle" not in error


def test_an_unsupported_architecture_is_said_before_missing_files(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "mamba"}))
    error = one_error(invoke("trace", "--model", str(tmp_path)))
    assert "model_type 'mamba' is not supported" in error and "bert, llama or gemma3_text" in error
    assert "tokenizer.json" not in error.partition("supported")[0]


def test_a_config_without_model_type_says_so(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 8}))
    error = one_error(invoke("models", str(tmp_path)))
    assert "has no model_type" in error and "None" not in error
    (tmp_path / "config.json").write_text("[1, 2]")  # (said as "has no model_type": no object has a key)
    error = one_error(invoke("models", str(tmp_path)))
    assert error == f"Error: {tmp_path / 'config.json'} is not a JSON object (it holds an array): a checkpoint's config.json maps each setting to its value"


def test_a_safetensors_file_without_its_config_says_what_is_missing(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    error = one_error(invoke("trace", "--model", str(tmp_path / "model.safetensors")))
    assert error == (
        f"Error: {tmp_path} has no config.json beside model.safetensors; give a Hugging Face directory that holds"
        " config.json, tokenizer.json and the .safetensors files"
    ), error


def test_a_directory_without_tokenizer_json_says_how_to_write_one(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (tmp_path / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    error = one_error(invoke("models", str(tmp_path)))
    assert error.startswith(f"Error: {tmp_path} has no tokenizer.json") and "save_pretrained(this directory)" in error, error


def test_a_directory_with_a_gguf_file_points_at_it(tmp_path):
    (tmp_path / "model.gguf").write_bytes(b"GGUF")
    error = one_error(invoke("trace", "--model", str(tmp_path)))
    assert error == f"Error: {tmp_path} holds no .safetensors file but a GGUF file: give its path, {tmp_path / 'model.gguf'}", error


# --- 7. option values that are not whole numbers --------------------------------


@pytest.mark.parametrize("head", ["abc", "1.0", "²", "1e0", ""])
def test_a_head_that_is_not_a_whole_number_says_so(head):
    error = one_error(invoke("trace", "--head", head))
    assert "is not a whole number" in error and "0 to 1" in error


@pytest.mark.parametrize("head", ["2", "-1"])
def test_a_whole_head_out_of_range_says_so(head):
    error = one_error(invoke("trace", "--head", head))
    assert f"--head {head} is out of range" in error and "0 to 1" in error


# --- 4. --json with options that choose what the walkthrough shows ----------------


def test_json_says_that_head_and_stage_choose_the_walkthrough():
    result = invoke("trace", "--json", "--head", "1", "--stage", "output")
    assert result.exit_code == 0
    assert result.stderr.startswith("Note: --json writes every head and stage") and len(result.stderr.splitlines()) == 1
    assert json.loads(result.stdout)["config"]["n_heads"] == 2
    assert invoke("trace", "--json", "--stage", "output").stderr == "Note: --json writes every head and stage; --stage chooses what the walkthrough shows\n"


def test_json_with_every_head_asks_for_what_it_writes_and_is_not_told_otherwise():
    result = invoke("trace", "--json", "--head", "all")
    assert result.exit_code == 0 and result.stderr == ""
    assert json.loads(result.stdout)["config"]["n_heads"] == 2


# --- 5. a position, in the teaching example -------------------------------


def test_a_number_that_is_no_token_is_a_position():
    assert "query warm (position 2)" in invoke("trace", "--query", "2", "--stage", "weights").stdout
    error = one_error(invoke("trace", "--query", "9"))
    assert error == "Error: --query 9 is out of range: the text has 4 tokens, at positions 0 to 3; choose one of those, or a token: cats, like, warm, milk"


def test_a_token_at_a_position_is_named_as_the_tables_label_it_and_a_wrong_one_says_where_it_is():
    for query in ("milk@3", "milk @3"):  # "milk @3": as a table labels a repeated token
        assert "query milk (position 3)" in invoke("trace", "--query", query, "--stage", "weights").stdout
    error = one_error(invoke("trace", "--query", "milk@2"))
    assert error == "Error: --query milk@2: 'milk' is at position 3 only, not 2: write milk, or milk@3"


# --- 8. serve on a port in use ------------------------------------------------------


@pytest.mark.parametrize(
    "host, url",
    [
        ("127.0.0.1", "http://127.0.0.1:8000/"),
        ("localhost", "http://localhost:8000/"),
        ("::1", "http://[::1]:8000/"),
        ("0.0.0.0", "http://localhost:8000/"),  # every address: not one a browser opens
        ("::", "http://[::1]:8000/"),  # IPv6 only: "localhost" may be tried as 127.0.0.1, where nothing listens
    ],
)
def test_the_page_address_is_a_valid_url(host, url):
    assert page_url(host, 8000) == url


def test_a_server_on_every_address_says_where_other_machines_open_it(monkeypatch):
    """Bound to 0.0.0.0 it printed only localhost, which a student on another machine cannot use."""
    import mha_explorer.cli as cli

    monkeypatch.setattr(cli, "network_address", lambda host: "192.0.2.2")
    monkeypatch.setattr(cli, "check_port", lambda host, port: None)
    import uvicorn

    import mha_explorer.memory

    monkeypatch.setattr(uvicorn, "run", lambda *args, **kwargs: None)  # started, not served
    monkeypatch.setattr(mha_explorer.memory, "settle_server_process", lambda: None)  # this process is the tests'
    result = CliRunner().invoke(main, ["serve", "--host", "0.0.0.0", "--port", "8761"])
    assert result.exit_code == 0, result.output
    assert "mha-explorer: open http://localhost:8761/ (Ctrl+C stops)" in result.stdout
    assert "mha-explorer: from other machines: http://192.0.2.2:8761/ (this machine's address on its network)" in result.stdout
    loopback = CliRunner().invoke(main, ["serve", "--port", "8761"])
    assert "other machines" not in loopback.stdout


def test_serve_on_a_port_in_use_says_so_before_anything_else():
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        error = one_error(invoke("serve", "--port", str(port)))
    assert f"port {port}" in error and "already in use" in error and "--port" in error


@pytest.mark.parametrize("encoding", ["ascii", "cp1252"])
def test_output_under_another_encoding_spells_out_the_signs_it_cannot_write(encoding):
    """Output redirected under a code page (Windows) or ASCII: the walkthrough's signs (√, −∞, ·)
    are spelled out, not a UnicodeEncodeError."""
    import os
    import subprocess
    import sys

    env = os.environ | {"PYTHONIOENCODING": encoding, "COLUMNS": "80"}
    done = subprocess.run([sys.executable, "-m", "mha_explorer.cli", "trace", "--causal"], env=env, capture_output=True, timeout=120)
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr.decode(errors="replace")
    out = done.stdout.decode(encoding)
    assert "sqrt(2)" in out and "-inf" in out and "Scores" in out  # cp1252 has ÷ and ·, not √, − or ∞
    # a longer spelling takes its room from the padding after it: the panels keep their width
    assert max(len(line) for line in out.splitlines()) == 80
    masked = [line for line in out.splitlines() if "-inf" in line and line.startswith("| |")]
    assert masked and {len(line) for line in masked} == {80}
    if encoding == "ascii":  # a header spelled longer ("÷ Σ e^s" as "/ sum e^s") has its column's room
        done = subprocess.run([sys.executable, "-m", "mha_explorer.cli", "trace", "--stage", "weights", "--head", "0"], env=env, capture_output=True, timeout=120)
        lines = done.stdout.decode(encoding).splitlines()
        header = next(i for i, line in enumerate(lines) if "/ sum e^s" in line)
        borders = [[i for i, c in enumerate(line) if c == "|"] for line in lines[header : header + 3]]
        assert borders[0] == borders[2] and len(borders[0]) == 8, lines[header : header + 3]  # the row under it lines up


def test_a_longer_spelling_takes_its_room_from_the_padding_after_it():
    assert "a √2     |".encode("ascii", "mha-explorer-ascii") == b"a sqrt(2) |"  # (its operand in brackets: it read "sqrt2", "sqrtd_head")
    assert "÷√64 x".encode("ascii", "mha-explorer-ascii") == b"/sqrt(64) x" and "√".encode("ascii", "mha-explorer-ascii") == b"sqrt"
    assert "| −∞    |".encode("ascii", "mha-explorer-ascii") == b"| -inf  |"
    assert "√x|".encode("ascii", "mha-explorer-ascii") == b"sqrt(x)|"  # no padding: the line grows
    assert "| 🐱 1 |  |".encode("ascii", "mha-explorer-ascii") == b"| ?  1 |  |"  # a wide character keeps its two columns
    assert "h·n²".encode("ascii", "mha-explorer-ascii") == b"h.n^2"


def test_no_command_prints_the_help_and_succeeds():
    result = invoke()
    assert result.exit_code == 0 and "Commands:" in result.stdout and "trace" in result.stdout
    # each command in a whole line of its own ("... (works..." was its docstring cut), serve's
    # without the promise of a browser it does not open
    commands = result.stdout.split("Commands:")[1].strip().splitlines()
    assert [line.split()[0] for line in commands] == ["export-site", "models", "serve", "trace"]
    assert not any(line.endswith("...") for line in commands) and "open the address it prints in a browser" in result.stdout


def test_a_stage_the_teaching_example_lacks_is_said_of_the_example_not_of_a_layer():
    said = one_error(invoke("trace", "--stage", "rope"))
    assert said == "Error: the teaching example has no rope stage (it has no rotary positions); choose one of: projections, scores, weights, mixing, concat, output"


def test_python_dash_m_runs_the_same_command_line():
    env = {**os.environ, "COLUMNS": "80"}
    done = subprocess.run([sys.executable, "-m", "mha_explorer", "trace", "--stage", "weights", "--head", "1"], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == invoke("trace", "--stage", "weights", "--head", "1").output
    usage = subprocess.run([sys.executable, "-m", "mha_explorer", "--help"], capture_output=True, text=True, timeout=120, env=env)
    assert usage.stdout.startswith("Usage: mha-explorer ")


def test_serve_refuses_a_checkpoint_of_an_architecture_it_cannot_read_before_starting(tmp_path):
    """A Hugging Face directory whose config.json names another architecture (GPT-2) is refused at
    once, as trace and models refuse it: it was offered on the page, and refused only when picked."""
    folder = tmp_path / "gpt2"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt2"}), encoding="utf-8")
    (folder / "model.safetensors").write_bytes(b"")
    result = CliRunner().invoke(main, ["serve", "--port", "1", "--model", str(folder)])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == f"Error: {folder}: model_type 'gpt2' is not supported; supported: {SUPPORTED}"
    (folder / "config.json").write_text("{", encoding="utf-8")
    result = CliRunner().invoke(main, ["serve", "--port", "1", "--model", str(folder)])
    assert result.exit_code == 2 and "config.json is not readable JSON" in result.stderr, result.output


def test_serve_refuses_a_gguf_file_of_another_architecture_or_none_before_starting(tmp_path):
    """A GGUF file is checked at the start as a directory is: its header and tensor table read, not
    its tensors (it was offered on the page, and refused only when picked)."""
    import gguf

    phi = tmp_path / "phi.gguf"
    w = gguf.GGUFWriter(phi, "phi2")
    w.add_tensor("t", np.ones(4, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    text = tmp_path / "notes.gguf"
    text.write_text("not a model", encoding="utf-8")
    with socket.socket() as taken:  # (a server started all the same would stop at its port, not serve on)
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        result = CliRunner().invoke(main, ["serve", "--host", "127.0.0.1", "--port", port, "--model", str(phi)])
        assert result.exit_code == 2, result.output
        assert result.stderr.strip() == f"Error: phi.gguf: general.architecture 'phi2' is not supported; supported: {SUPPORTED}"
        result = CliRunner().invoke(main, ["serve", "--host", "127.0.0.1", "--port", port, "--model", str(text)])
        assert result.exit_code == 2 and "notes.gguf is not a GGUF file: it does not start with the bytes 'GGUF'" in result.stderr, result.output


def test_serve_offers_only_the_named_models_asked_for(monkeypatch):
    """A host with little memory leaves Gemma 3 out: --offer lists the models the page may load."""
    import uvicorn

    import mha_explorer.memory
    import mha_explorer.server

    made = {}
    real = mha_explorer.server.create_app
    monkeypatch.setattr(mha_explorer.server, "create_app", lambda **kwargs: made.setdefault("app", real(**kwargs)))
    monkeypatch.setattr(uvicorn, "run", lambda *args, **kwargs: None)
    monkeypatch.setattr(mha_explorer.memory, "settle_server_process", lambda: None)
    monkeypatch.setattr("mha_explorer.cli.check_port", lambda host, port: None)
    result = CliRunner().invoke(main, ["serve", "--offer", "minilm", "--offer", "smollm2"])
    assert result.exit_code == 0, result.output
    from fastapi.testclient import TestClient

    client = TestClient(made["app"], base_url="http://127.0.0.1")  # a loopback server answers for loopback names
    assert [m["name"] for m in client.get("/api/models").json()] == ["minilm", "smollm2"]
    refused = client.post("/api/models/gemma3/load")
    assert refused.status_code == 404 and refused.json()["detail"][0]["message"] == "no model named \"gemma3\"; choose one of: minilm, smollm2"
    wrong = CliRunner().invoke(main, ["serve", "--offer", "gemma"])
    assert wrong.exit_code == 2 and "--offer 'gemma' is not a named model; choose from: minilm, smollm2, gemma3" in wrong.stderr


@pytest.mark.skipif(not hasattr(fcntl, "F_SETPIPE_SZ"), reason="the pipe's size is set by Linux's F_SETPIPE_SZ")
def test_a_walkthrough_piped_into_a_reader_that_stops_early_ends_quietly_as_a_pipe_ends():
    """`mha-explorer trace | head -3`: the walkthrough stops when head has its lines, killed by
    SIGPIPE as other tools are (status 141 in the shell), with nothing on stderr. (The pipe holds
    one page, less than the walkthrough: what is left is written after the reader has gone.)"""
    read, write = os.pipe()
    fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, 4096)
    cli = [sys.executable, "-c", "from mha_explorer.cli import run; run()", "trace"]
    with subprocess.Popen(cli, stdout=write, stderr=subprocess.PIPE) as process:
        os.close(write)
        with os.fdopen(read, "rb") as reader:
            first = [reader.readline() for _ in range(3)]  # then the reader goes, the rest unread
        errors = process.stderr.read()
        status = process.wait(timeout=60)
    assert all(first) and status == -signal.SIGPIPE and errors == b"", (status, errors)


def test_the_command_called_in_another_process_leaves_its_sigpipe_alone():
    """main() called in a process of another's (this test's, a notebook's) set that process's
    SIGPIPE to kill it: a socket of the page's server, closed by the browser under a write, then
    ended the whole test run (make: Error 141)."""
    before = signal.getsignal(signal.SIGPIPE)
    for command in (["trace"], ["models"]):
        assert CliRunner().invoke(main, command).exit_code == 0
        assert signal.getsignal(signal.SIGPIPE) == before
