"""`mha-explorer trace --model`: the walkthrough of a real layer, through click's CliRunner.

Expected numbers come from the checkpoint's own tensors, read here with the safetensors package
(not the explorer's reader), and from plain NumPy products written here.
"""

from __future__ import annotations

import json
import re
import time
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from rich.cells import cell_len

from mha_explorer.cli import main
from mha_explorer.models import available_models, load_model
from mha_explorer.schema import TracePayload, to_numpy

from .test_cli import broken_vectors, cells, two, unruled

pytestmark = pytest.mark.cli
INSTALLED = {m.name: m for m in available_models() if m.installed}
needs = {name: pytest.mark.skipif(name not in INSTALLED, reason=f"{name} is not installed: run make models") for name in ("minilm", "smollm2", "gemma3")}

FOX = "The quick brown fox jumps over the lazy dog."
NUMBER = re.compile(r"-?\d+\.\d\d")


def trace(*args: str, width: int = 250):
    result = CliRunner().invoke(main, ["trace", *args], env={"COLUMNS": str(width)})
    assert "Traceback" not in result.output
    return result


def ok(*args: str, width: int = 250) -> str:
    result = trace(*args, width=width)
    assert result.exit_code == 0, (result.stderr, result.exception)
    return result.stdout


def minilm_tensors(layer: int) -> dict[str, np.ndarray]:
    """The attention tensors of one BERT layer, as the checkpoint stores them: weight (out, in)."""
    from safetensors.numpy import load_file

    tensors = load_file(str(Path(INSTALLED["minilm"].location) / "model.safetensors"))
    prefix = f"encoder.layer.{layer}.attention."
    names = {"q": "self.query", "k": "self.key", "v": "self.value", "o": "output.dense"}
    return {f"{short}.{kind}": tensors[prefix + long + "." + kind] for short, long in names.items() for kind in ("weight", "bias")}


def payload(*args: str) -> TracePayload:
    return TracePayload.model_validate_json(ok(*args, "--json"))


def headers(out: str) -> list[list[str]]:
    """The header cells of every table, with the panel's own borders dropped; a header on two
    lines ("q = x W^Q" over "(32 numbers)") is joined into one."""
    tables, lines = [], out.splitlines()
    for before, line in zip(["", *lines], lines):
        if "┃" not in line:
            continue
        row = [c.strip() for c in line.split("┃")[1:-1]]
        if "┃" in before:
            row = [" ".join(filter(None, pair)) for pair in zip(tables.pop(), row)]
        tables.append(row)
    return tables


def output_table(out: str) -> dict[str, list[str]]:
    """The Output projection table's rows: label -> cells."""
    rows = {}
    for row in cells(out):
        if row and (row[0].startswith("head ") or row[0] in ("bias", "output y")):
            rows[row[0]] = row[1:]
    return rows


# --- 1. biases are shown where they are added ---------------------------------


@needs["minilm"]
def test_the_walkthrough_says_where_x_comes_from_and_where_y_goes():
    from mha_explorer.models import load_model

    arch = load_model("minilm").arch
    out = ok("--model", "minilm", "--text", FOX, "--stage", "scores")
    assert f"{arch.input_note} {arch.output_note}" in " ".join(out.split())
    assert "Weights:" not in out  # the published float32 ones


@needs["smollm2"]
def test_the_walkthrough_says_a_quantized_models_weights_are_dequantized():
    from mha_explorer.models import load_model

    out = " ".join(ok("--model", "smollm2", "--text", "x", "--stage", "weights").split())
    assert out.startswith("SmolLM2-135M-Instruct · layer 0 of 0–29 · 1 token ")  # one token, not "1 tokens"
    assert f"Weights: {load_model('smollm2').storage}." in out and "dequantized to float32" in out


@needs["minilm"]
def test_output_table_has_a_bias_row_and_its_rows_add_up():
    args = ("--model", "minilm", "--text", FOX, "--layer", "3", "--query", "fox")
    out = ok(*args, "--head", "5", "--stage", "output")
    rows = output_table(out)
    assert list(rows) == [*(f"head {h}" for h in range(12)), "bias", "output y"]
    # the components that fit, then each row's length over all 384 (how much each head adds)
    lengths = {label: float(cells.pop()) for label, cells in rows.items()}
    shown = len(rows["output y"])
    assert f"the first {shown} of 384" in out and any("length: over all 384 components" in line for line in out.splitlines())  # one line
    w = minilm_tensors(3)
    assert rows["bias"] == [two(float(b)) for b in w["o.bias"][:shown]]
    # every row against the checkpoint's W^O applied to the layer's concatenated head outputs
    concat = to_numpy(payload(*args).stages["concat"])[4]  # (h*d_v,): "fox" is token 4
    for h in range(12):
        block = slice(32 * h, 32 * (h + 1))
        contribution = concat[block] @ w["o.weight"][:, block].T  # (384,)
        np.testing.assert_allclose([float(c) for c in rows[f"head {h}"]], contribution[:shown], atol=0.0051)
        assert abs(lengths[f"head {h}"] - np.linalg.norm(contribution)) <= 0.0051
    y = concat @ w["o.weight"].T + w["o.bias"]
    np.testing.assert_allclose([float(c) for c in rows["output y"]], y[:shown], atol=0.0051)
    assert abs(lengths["output y"] - np.linalg.norm(y)) <= 0.0051 and abs(lengths["bias"] - np.linalg.norm(w["o.bias"])) <= 0.0051


@needs["minilm"]
def test_projections_name_the_bias_and_show_it():
    args = ("--model", "minilm", "--text", FOX, "--layer", "3", "--query", "fox", "--head", "5")
    out = ok(*args, "--stage", "projections")
    header = next(row for row in headers(out) if row and row[0] == "token")
    assert header[2:] == ["q = x W^Q + b^Q (32 numbers)", "k = x W^K + b^K (32 numbers)", "v = x W^V + b^V (32 numbers)"]
    bias_row = next(row for row in cells(out) if row and row[0] == "bias")
    w, head = minilm_tensors(3), slice(5 * 32, 6 * 32)
    for cell, name in zip(bias_row[2:], "qkv"):
        assert NUMBER.findall(cell)[:3] == [two(float(b)) for b in w[f"{name}.bias"][head][:3]], name
    # the query row's q is x W^Q + b^Q, with W^Q and b^Q from the checkpoint
    x = to_numpy(payload(*args).stages["x"])[4]
    q = x @ w["q.weight"][head].T + w["q.bias"][head]
    fox_row = next(row for row in cells(out) if row and row[0] == "fox")
    np.testing.assert_allclose([float(v) for v in NUMBER.findall(fox_row[2])[:3]], q[:3], atol=0.0051)


@pytest.mark.parametrize("name", [pytest.param("minilm", marks=needs["minilm"]), pytest.param("smollm2", marks=needs["smollm2"])])
def test_a_real_layer_at_80_columns_cuts_no_vector_across_lines(name):
    """Long vectors show as many first numbers as fit (3, 2 or 1), and their headers say how many
    they have; sums of products likewise; z_h and the concatenation one line each."""
    out = ok("--model", name, "--text", FOX, "--layer", "1", "--head", "1", width=80)
    assert broken_vectors(out) == []
    assert max(map(cell_len, out.splitlines())) <= 80
    assert "Concatenation" in out and "\n│ z_1 = [" in out
    # a long text (the tables list the keys that matter and count the others), every head
    # (those sharing a K/V head print their q alone), the rotary stage's pairs turned by hand
    long = "Attention lets every token read from the others, weighted by how well its query matches their keys, in every head at once and in every layer."
    out = ok("--model", name, "--text", long, "--layer", "5", width=80)
    assert broken_vectors(out) == [], broken_vectors(out)
    assert "other tokens" in out and "other keys" in out


# --- 2. the output table fits the terminal ------------------------------------


@needs["minilm"]
@pytest.mark.parametrize("width", [80, 60, 120])
def test_output_table_fits_the_width_and_says_what_it_leaves_out(width):
    out = ok("--model", "minilm", "--text", FOX, "--layer", "3", "--query", "fox", "--stage", "output", width=width)
    assert max(len(line) for line in out.splitlines()) <= width
    rows = output_table(out) if width >= 80 else {row[0]: row[1:] for row in unruled(out) if row[0].startswith("head ") or row[0] in ("bias", "output y")}
    assert list(rows)[-2:] == ["bias", "output y"]  # labels whole, each on one line
    shown = len(rows["output y"]) - 1  # the components that fit, then the row's length
    assert all(len(r) == shown + 1 and all(NUMBER.fullmatch(c) for c in r) for r in rows.values()), rows
    header = next(row for row in (headers(out) if width >= 80 else unruled(out)) if row and row[-1] == "length")
    assert header[-shown - 1 :] == [*(f"y[{m}]" for m in range(shown)), "length"]
    said = re.search(r"the first (\d+) of 384 \((\d+) left out\)", " ".join(out.replace("│", " ").split()))
    assert said and int(said[1]) == shown and int(said[2]) == 384 - shown
    assert shown >= {60: 4, 80: 6, 120: 8}[width]


# --- 4. --json carries the model, as the server's answer does -----------------


@needs["minilm"]
def test_json_names_the_model_and_equals_the_servers_answer():
    from fastapi.testclient import TestClient

    from mha_explorer.server import create_app

    text = "Heads read from different tokens."
    ours = json.loads(ok("--model", "minilm", "--text", text, "--layer", "2", "--head", "7", "--json"))
    client = TestClient(create_app())
    client.post("/api/models/minilm/load")
    deadline = time.monotonic() + 120
    while client.get("/api/models/minilm").json()["state"] == "loading":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    theirs = client.post("/api/model-trace", json={"model": "minilm", "text": text, "layer": 2, "head": 7}).json()
    assert ours["model"]["name"] == "minilm" and ours["model"]["layer"] == 2 and ours["model"]["text"] == text
    assert ours == theirs
    core, _ = load_model("minilm").trace(text, 2)
    np.testing.assert_array_equal(to_numpy(ours["stages"]["weights"])[0], core["weights"][7])  # the JSON read as it is


@needs["minilm"]
def test_json_writes_the_chosen_head_and_says_that_stage_is_for_the_walkthrough():
    from tokenizers import Tokenizer

    args = ("--model", "minilm", "--text", FOX, "--layer", "3", "--query", "fox", "--head", "5", "--json")
    result = trace(*args, "--stage", "output")
    assert result.exit_code == 0
    assert "--json writes every stage" in result.stderr
    p = TracePayload.model_validate_json(result.stdout)
    tokenizer = Tokenizer.from_file(str(Path(INSTALLED["minilm"].location) / "tokenizer.json"))
    tokenizer.no_padding()
    encoding = tokenizer.encode(FOX)
    assert p.tokens == encoding.tokens and p.query == encoding.tokens.index("fox")
    assert p.model.readable == [tokenizer.decode([i], skip_special_tokens=False) for i in encoding.ids]
    q = p.stages["q"]
    assert q.heads == [5]
    w, head = minilm_tensors(3), slice(5 * 32, 6 * 32)
    x = to_numpy(p.stages["x"])  # (n, d_model)
    np.testing.assert_allclose(to_numpy(q)[0], x @ w["q.weight"][head].T + w["q.bias"][head], atol=2e-5)


# --- 5. the query as the page labels it, and at which position -----------------

CATS = "The cat sat on the mat. The cat purred."


@needs["smollm2"]
@pytest.mark.parametrize("query", ["cat", "␣cat", "Ġcat"])
def test_a_query_may_be_written_as_text_as_the_page_labels_it_or_as_the_token(query):
    tokens = payload("--model", "smollm2", "--text", CATS).tokens
    out = ok("--model", "smollm2", "--text", CATS, "--query", query, "--stage", "weights", "--head", "0")
    assert f"query ␣cat @{tokens.index('Ġcat')} (position {tokens.index('Ġcat')})" in out  # twice in the text: named as the tables name it
    first, second = [j for j, t in enumerate(tokens) if t == "Ġcat"]
    result = trace("--model", "smollm2", "--text", CATS, "--query", query, "--stage", "weights", "--head", "0")
    assert f"Note: {query!r} is at positions {first}, {second}; the first is traced (name another as {query}@{second})" in result.stderr.splitlines()
    assert "Note:" not in trace("--model", "smollm2", "--text", CATS, "--query", f"{query}@{first}", "--stage", "weights", "--head", "0").stderr


@needs["minilm"]
def test_a_token_that_is_an_at_sign_and_occurs_twice_gets_the_note_too():
    text = "me @ home @ work"
    tokens = payload("--model", "minilm", "--text", text).tokens
    first, second = [j for j, t in enumerate(tokens) if t == "@"]
    result = trace("--model", "minilm", "--text", text, "--query", "@", "--stage", "weights", "--head", "0")
    assert result.exit_code == 0 and f"query @ @{first} (position {first})" in result.stdout
    assert f"Note: '@' is at positions {first}, {second}; the first is traced (name another as @@{second})" in result.stderr.splitlines()


@needs["smollm2"]
def test_a_position_and_labels_as_on_the_page():
    tokens = payload("--model", "smollm2", "--text", CATS).tokens
    second = [j for j, t in enumerate(tokens) if t == "Ġcat"][1]
    for query in (f"cat@{second}", f"␣cat@{second}", f"Ġcat@{second}", f"␣cat @{second}"):  # the last as the tables label it
        out = ok("--model", "smollm2", "--text", CATS, "--query", query, "--stage", "scores", "--head", "0")
        assert f"query ␣cat @{second} (position {second})" in out
    assert "Ġ" not in out
    keys = [row[0].removesuffix(" (masked next)") for row in cells(out) if len(row) == 4 and NUMBER.fullmatch(row[2])]
    labels = [t.replace("Ġ", "␣") for t in tokens]
    assert keys == [label if labels.count(label) == 1 else f"{label} @{j}" for j, label in enumerate(labels)]  # ␣cat @1, ␣cat @{second}

    first = tokens.index("Ġcat")
    result = trace("--model", "smollm2", "--text", CATS, "--query", "cat@3")
    assert result.exit_code == 2 and result.stdout == ""
    error = result.stderr.splitlines()[-1]
    nearest = min((first, second), key=lambda j: abs(j - 3))
    assert error == f"Error: --query cat@3: 'cat' is at positions {first}, {second}, not 3; name one, as cat@{nearest}"


@needs["minilm"]
def test_a_number_that_is_a_token_is_that_token_and_at_a_number_is_a_position():
    text = "I have 5 cats and 2 dogs"
    tokens = payload("--model", "minilm", "--text", text).tokens  # [CLS] i have 5 cats and 2 dogs [SEP]
    assert tokens.index("2") != 2 and tokens.index("5") != 5
    out = ok("--model", "minilm", "--text", text, "--query", "2", "--stage", "weights", "--head", "0")
    assert f"query 2 (position {tokens.index('2')})" in out  # the token "2"
    out = ok("--model", "minilm", "--text", text, "--query", "@2", "--stage", "weights", "--head", "0")
    assert "query have (position 2)" in out  # position 2, whatever token stands there
    result = trace("--model", "minilm", "--text", text, "--query", f"@{len(tokens)}")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.splitlines()[-1].startswith(f"Error: --query @{len(tokens)} is out of range: the text has {len(tokens)} tokens, at positions 0 to {len(tokens) - 1}")


@needs["minilm"]
def test_a_long_unknown_word_is_cut_in_the_query_line_the_tables_and_the_error():
    word = "5feceb66ffc86f38d952786c6d696c79c2dbc239dd4e91b46729d73a27fb57e96b86b273ff34fce1" + "9d6b804eff5a3f5747ada4eaa22f1d49c01e52ddb7875b4b"  # over 100 characters: MiniLM reads it as [UNK]
    text = f"see {word} now"
    out = ok("--model", "minilm", "--text", text, "--query", "2", "--stage", "weights", "--head", "0", width=80)
    assert "query [UNK] 5feceb66ffc86f38d… (position 2)\n" in out and word not in out
    rows = [line for line in out.splitlines() if "[UNK]" in line and "│" in line]
    assert len(rows) == 2 and all(NUMBER.search(row) for row in rows)  # a row of each table, with its numbers: no lines of text under it
    result = trace("--model", "minilm", "--text", text, "--query", "zz")
    error = result.stderr.splitlines()[-1]
    assert result.exit_code == 2 and "[UNK] 5feceb66ffc86f38d…," in error and word not in error
    # the label as the list gives it names the token
    assert "(position 2)" in ok("--model", "minilm", "--text", text, "--query", "[UNK] 5feceb66ffc86f38d…", "--stage", "weights", "--head", "0")


@needs["smollm2"]
def test_an_unknown_query_lists_the_tokens_as_the_page_labels_them():
    result = trace("--model", "smollm2", "--text", CATS, "--query", "dog")
    assert result.exit_code == 2
    error = result.stderr.splitlines()[-1]
    assert error.startswith("Error: unknown query token 'dog'") and "␣cat" in error and "Ġ" not in error


@needs["minilm"]
@pytest.mark.parametrize(
    ("layer", "said"),
    [
        ("abc", "not a whole number; choose a layer from 0 to 5"),  # said before the model loads
        ("1.0", "not a whole number; choose a layer from 0 to 5"),
        ("6", "out of range; choose a layer from 0 to 5"),
    ],
)
def test_a_layer_that_is_not_a_whole_number_says_so(layer, said):
    result = trace("--model", "minilm", "--layer", layer)
    assert result.exit_code == 2 and result.stdout == ""
    error = result.stderr.splitlines()[-1]
    assert error.startswith("Error: --layer") and said in error


@pytest.mark.parametrize("name", [pytest.param(n, marks=needs[n]) for n in ("minilm", "smollm2", "gemma3")])
def test_a_stage_a_named_model_lacks_is_refused_before_it_loads_as_its_loaded_layers_would(name, monkeypatch):
    """--stage qk_norm on SmolLM2 waited for the model to load (6 s; Gemma 3's rope, 20 s) to be
    refused. A named model's family tells its optional stages: each is refused at once, and the
    family's stages are those every one of its loaded layers has."""
    from mha_explorer.cli import FAMILY_STAGES
    from mha_explorer.models import registry
    from mha_explorer.narrative import LACKS, page_stages

    model = load_model(name)
    family = registry.spec_named(name).family
    for layer in range(model.n_layers):
        assert {s.id for s in page_stages(model.layer_config(layer))} & set(LACKS) == set(FAMILY_STAGES[family]), layer
    lacked = [stage for stage in LACKS if stage not in FAMILY_STAGES[family]]

    def no_load(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr("mha_explorer.models.load_model", no_load)
    for stage in lacked:
        result = trace("--model", name, "--stage", stage)
        assert result.exit_code == 2 and result.stderr.splitlines()[-1].startswith(f"Error: {model.title} has no {stage} stage ({LACKS[stage]}); choose one of: projections")


@needs["minilm"]
def test_every_heads_weights_are_readable_in_an_80_column_terminal():
    """Twelve heads side by side do not fit 80 columns: they come as several tables of fewer heads,
    every number whole (no "…"), each head's column summing to 1."""
    from mha_explorer.models import load_model

    out = ok("--model", "minilm", "--text", FOX, "--stage", "weights", "--query", "fox", width=80)
    assert "…" not in out
    # 12 tokens: no softmax by hand (8 at most), and the rounding note names none
    assert "e^s" not in out and "full numbers, so a sum" in " ".join(out.split())
    run = load_model("minilm").run(FOX, 0)
    query = run.tokens.index("fox")
    seen, heads = {}, []
    for line in out.splitlines():
        if "┃ key" in line:
            heads = [int(c.strip().split()[1]) for c in line.split("┃") if c.strip().startswith("head ")]
            assert 0 < len(heads) < 12
        elif heads and line.count("│") > 4:
            parts = [p.strip() for p in line.split("│")][2:-2]
            if parts[0].startswith("sum of all") or parts[0] == "":
                continue
            for k, h in enumerate(heads):
                seen.setdefault(h, []).append(parts[1 + k].split()[0])  # the weight, before its bar
    assert sorted(seen) == list(range(12))
    for h, numbers in seen.items():
        assert numbers == [two(float(w)) for w in run.trace["weights"][h, query]], h


@needs["smollm2"]
def test_a_character_cut_into_byte_pieces_is_named_by_itself_as_its_first_piece():
    out = ok("--model", "smollm2", "--text", "I like 🐱 cats", "--query", "🐱", "--stage", "weights", "--head", "0")
    assert "query ␣🐱 1/3 (position 2)" in out
    assert "query ␣🐱 2/3" in ok("--model", "smollm2", "--text", "I like 🐱 cats", "--query", "␣🐱 2/3", "--stage", "weights", "--head", "0")


@needs["minilm"]
def test_a_wordpiece_inside_a_word_keeps_its_marks():
    """"unbelievably" is un ##bel ##ie ##va ##bly: without the ## the pieces would read as words."""
    out = ok("--model", "minilm", "--text", "unbelievably good", "--stage", "weights", "--head", "0")
    rows = [row[0] for row in cells(out) if row and row[0] != "key"]
    keys = rows[: rows.index("sum of all 8")]  # the weights table (the softmax by hand follows it)
    assert keys == ["[CLS]", "un", "##bel", "##ie", "##va", "##bly", "good", "[SEP]"]
    assert "query ##bel" in ok("--model", "minilm", "--text", "unbelievably good", "--query", "bel", "--stage", "weights", "--head", "0")


def test_a_stage_no_layer_has_is_refused_before_the_model_loads(monkeypatch):
    import mha_explorer.models as models

    monkeypatch.setattr(models, "load_model", lambda *a, **k: pytest.fail("the model was loaded"))
    result = trace("--model", "gemma3", "--stage", "bogus")
    assert result.exit_code == 2 and "unknown stage 'bogus'; choose one of: projections, qk_norm, rope" in result.stderr
    # a named model's own stages, not every family's
    result = trace("--model", "minilm", "--stage", "bogus")
    assert result.stderr.splitlines()[-1] == "Error: unknown stage 'bogus'; choose one of: projections, scores, weights, mixing, concat, output"
    result = trace("--model", "smollm2", "--stage", "bogus")
    assert result.stderr.splitlines()[-1] == "Error: unknown stage 'bogus'; choose one of: projections, rope, scores, mask, weights, mixing, concat, output"


@needs["minilm"]
@pytest.mark.parametrize("stage, why", [("rope", "it has no rotary positions"), ("mask", "it is not causal and has no sliding window")])
def test_a_stage_this_layer_lacks_says_why(stage, why):
    result = trace("--model", "minilm", "--text", FOX, "--stage", stage)
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == f"Error: all-MiniLM-L6-v2 has no {stage} stage ({why}); choose one of: projections, scores, weights, mixing, concat, output"


@needs["smollm2"]
def test_query_heads_sharing_a_kv_head_show_k_and_v_once():
    """SmolLM2: 9 query heads read 3 K/V heads. k and v are printed once per K/V head (with the
    first query head that reads it); the other query heads show their own q alone."""
    out = ok("--model", "smollm2", "--text", "the cat sat", "--query", "cat", "--stage", "projections", width=120)
    tables = headers(out)
    assert sum(any(cell.startswith("k = x W^K") for cell in t) for t in tables) == 3
    assert sum(t == ["token", "q = x W^Q"] for t in tables) == 6
    assert "head 1 (K/V head 0): its q; x, k and v are head 0's above" in out
    assert "head 4 (K/V head 1): its q; x, k and v are head 3's above" in out
    # the rotary stage the same way: each K/V head's k before and after the rotation once
    out = ok("--model", "smollm2", "--text", "the cat sat", "--query", "cat", "--stage", "rope", width=160)
    tables = headers(out)
    long = [f"{name} (64 numbers)" for name in ("q", "q rotated", "k", "k rotated")]  # d_head = 64
    assert sum(t == ["token", "position", *long] for t in tables) == 3
    assert sum(t == ["token", "position", *long[:2]] for t in tables) == 6
    assert "head 5: q and k turned by their position (θ = 100000); k as head 3's above" in out
    assert "head 3: q and k turned by their position (θ = 100000); k of K/V head 1" in out  # whose k, as the page says it


def test_a_rope_base_is_written_whole_as_the_page_writes_it():
    from mha_explorer.config import AttentionConfig
    from mha_explorer.walkthrough import _features

    assert _features(AttentionConfig(d_model=8, n_heads=2, causal=True, rope_theta=1e6)) == ["causal", "RoPE θ=1000000"]


@needs["smollm2"]
def test_the_rotary_stage_turns_three_pairs_by_hand_as_the_page_does():
    """SmolLM2 (d_head 64, θ 100000): pairs (0, 32), (1, 33), (31, 63) of the query's q at its
    position, turned by a cos/sin worked out here; the result is the trace's rotated q."""
    import math

    from mha_explorer.models import load_model

    text = "the cat sat on the mat"
    out = ok("--model", "smollm2", "--text", text, "--query", "mat", "--stage", "rope", "--head", "2", width=160)
    run = load_model("smollm2").run(text, 0)
    i = run.tokens.index("Ġmat")
    q, rotated = run.trace["q"][2, i], run.trace["q_rotated"][2, i]
    rows = {row[0]: row[1:] for row in cells(out) if row and row[0].startswith("(")}
    assert list(rows) == ["(0, 32)", "(1, 33)", "(31, 63)"]
    for m in (0, 1, 31):
        angle = i * 100000.0 ** (-2 * m / 64)
        a, b = float(q[m]), float(q[m + 32])
        by_hand = (a * math.cos(angle) - b * math.sin(angle), a * math.sin(angle) + b * math.cos(angle))
        shown = rows[f"({m}, {m + 32})"]
        # the angle to four significant digits (2.866e-5 under 0.001), cos and sin to four decimals
        assert float(shown[0]) == float(f"{angle:.4g}") and ("e" in shown[0]) == (angle < 1e-3)
        assert shown[1] == f"{math.cos(angle):.4f}, {math.sin(angle):.4f}".replace("-0.0000", "0.0000") and shown[2] == f"{two(a)}, {two(b)}"
        assert shown[3] == f"{two(by_hand[0])}, {two(by_hand[1])}" == f"{two(float(rotated[m]))}, {two(float(rotated[m + 32]))}" == shown[4]
    # the shown numbers turned by hand (half away from zero), where they miss the rotated q shown
    misses = []
    for pair, (_, turn, before, _, after) in rows.items():
        (cos, sin), (a, b), (a_after, b_after) = ([Decimal(x) for x in cell.split(", ")] for cell in (turn, before, after))
        for name, hand, layer in (("a′", a * cos - b * sin, a_after), ("b′", a * sin + b * cos, b_after)):
            if hand.quantize(Decimal("0.01"), ROUND_HALF_UP) != layer:
                misses.append(f"{name} of pair {pair} comes to {hand.quantize(Decimal('0.01'), ROUND_HALF_UP)} (shown: {layer})")
    said = " ".join(out.replace("│", " ").split())
    assert misses and "from the rounded numbers shown, " + "; ".join(misses) + "." in said, (misses, said)


@needs["minilm"]
def test_a_failed_load_on_a_terminal_ends_the_progress_line_first(tmp_path, monkeypatch):
    """On a terminal the progress is one line redrawn; a failure's message starts a line of its own."""
    import io
    import shutil
    import sys

    from mha_explorer import cli
    from mha_explorer.models import ModelError

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    folder = tmp_path / "broken"
    from mha_explorer.models import load_model

    shutil.copytree(load_model("minilm").source, folder)
    config = json.loads((folder / "config.json").read_text())
    del config["hidden_size"]
    (folder / "config.json").write_text(json.dumps(config))
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with pytest.raises(ModelError):
        cli._load(str(folder))
    assert terminal.getvalue().startswith("\rloading ") and terminal.getvalue().endswith("\n"), repr(terminal.getvalue())


@needs["smollm2"]
def test_a_long_texts_tables_list_the_keys_that_matter_and_count_the_rest():
    """Past 24 tokens, as on the page: the scores list each head's 8 highest keys the query sees,
    highest first, and how many keys are left out (and masked); the weights one head's 8 largest,
    largest first; projections the query, then the keys it weighs most. A 110-token text is not a
    thousand lines."""
    text = " ".join(["the quick brown fox jumps over the lazy dog"] * 12)
    p = payload("--model", "smollm2", "--text", text, "--head", "0")
    n, i = len(p.tokens), p.query
    scaled = to_numpy(p.stages["mask"])[0, i]  # -inf where masked
    weights = to_numpy(p.stages["weights"])[0, i]
    labels = [t.replace("Ġ", "␣") for t in p.tokens]
    name = lambda j: f"{labels[j]} @{j}"  # past 24 tokens, every key with its position

    out = ok("--model", "smollm2", "--text", text, "--head", "0", "--stage", "scores")
    listed = [row[0] for row in cells(out) if len(row) == 4 and NUMBER.fullmatch(row[2])]
    top = list(np.argsort(-scaled, kind="stable")[:8])
    assert listed == [name(j) for j in top] and top != sorted(top)  # as the title says, not in text order
    hidden = int(np.isinf(scaled).sum())
    assert f"… {n - 8} other keys, {hidden} of them masked next" in " ".join(out.split())

    out = ok("--model", "smollm2", "--text", text, "--head", "0", "--stage", "weights")
    listed = [row[0] for row in cells(out) if len(row) == 2 and NUMBER.fullmatch(row[1].split()[0])]  # (a weight, then its bar)
    assert listed == [name(j) for j in np.argsort(-weights, kind="stable")[:8]] + [f"sum of all {n}"]  # not of the rows above
    assert f"… {n - 8} other keys" in out
    assert f"query {name(i)} (position {i})" in out  # named as the tables name it

    out = ok("--model", "smollm2", "--text", text, "--head", "0", "--stage", "projections")
    listed = [row[0] for row in cells(out) if len(row) == 5 and row[1].startswith("[")]
    assert listed == [name(j) for j in [i, *(j for j in np.argsort(-weights, kind="stable")[:8] if j != i)]]
    assert len(ok("--model", "smollm2", "--text", text, "--head", "0").splitlines()) < 400


@needs["smollm2"]
def test_a_long_texts_early_query_lists_only_keys_it_sees_and_its_mask_table_is_short():
    """Query 2 of a 110-token causal text sees keys 0 to 2: Projections lists those (no masked key
    among "the keys it weighs most"), the mask table the first keys, those around the query and the
    last two, with the rest counted."""
    text = " ".join(["the quick brown fox jumps over the lazy dog"] * 12)
    tokens = payload("--model", "smollm2", "--text", text).tokens
    n = len(tokens)
    labels = [t.replace("Ġ", "␣") for t in tokens]
    out = ok("--model", "smollm2", "--text", text, "--head", "0", "--query", "2", "--stage", "projections")
    listed = [row[0] for row in cells(out) if len(row) == 5 and row[1].startswith("[")]
    seen = [f"{labels[j]} @{j}" for j in range(3)]  # a long text's keys, each with its position
    assert listed[0] == seen[2] and sorted(listed) == sorted(seen), listed  # the query, then the keys it weighs most
    assert f"… {n - 3} other tokens" in out
    out = ok("--model", "smollm2", "--text", text, "--head", "0", "--query", "2", "--stage", "mask")
    positions = [int(row[1]) for row in cells(out) if len(row) == 4 and row[1].isdigit()]
    assert positions == [0, 1, 2, 3, 4, n - 2, n - 1]
    assert f"… {n - 7} other keys, {n - 7} of them masked" in " ".join(out.split())


@needs["smollm2"]
@pytest.mark.parametrize("width", [80, 100, 110, 160])
def test_the_rotary_pairs_and_headers_are_whole_at_every_width(width):
    """The pairs turned by hand keep every number whole: where the layer's own column does not
    fit beside the one worked by hand, it is left out and the caption says they are the same."""
    out = ok("--model", "smollm2", "--text", FOX, "--layer", "3", "--head", "2", "--stage", "rope", width=width)
    assert broken_vectors(out) == [] and max(map(cell_len, out.splitlines())) <= width
    rows = [row for row in cells(out) if row and re.fullmatch(r"\(\d+, \d+\)", row[0])]
    assert [row[0] for row in rows] == ["(0, 32)", "(1, 33)", "(31, 63)"]
    for row in rows:
        assert re.fullmatch(r"\d+(\.\d+)?(e-\d+)?", row[1]) and len(row[1].replace(".", "").lstrip("0").split("e")[0]) <= 4, row
        assert re.fullmatch(r"-?\d\.\d{4}, -?\d\.\d{4}", row[2]), row
        assert all(re.fullmatch(r"-?\d+\.\d\d, -?\d+\.\d\d", cell) for cell in row[3:]), row
    with_layer = len(rows[0]) == 6
    assert with_layer == (width >= 100)
    assert ("the same as q rotated above" in " ".join(out.replace("│", " ").split())) != with_layer


@needs["smollm2"]
def test_on_60_columns_the_rotary_pairs_stack_under_a_title_of_one_line():
    out = ok("--model", "smollm2", "--text", FOX, "--layer", "3", "--head", "2", "--stage", "rope", width=60)
    assert max(map(cell_len, out.splitlines())) <= 60
    assert re.search(r"│ +head 2: q's pairs turned by hand at position \d+ +│", out)  # the narrow title, whole on its line
    # a pair's second line, with no pair of its own, is set apart from the next pair's first
    assert re.search(r"│ \(0, 32\) .*│\n│ +-?\d.*│\n│ +│\n│ \(1, 33\) ", out), out
    for m in (0, 1, 31):  # each pair's numbers on two lines: cos, then sin below it
        assert re.search(rf"│ \({m}, {m + 32}\) +\S+ +-?\d\.\d{{4}} +-?\d\.\d\d +-?\d\.\d\d +│\n│ +-?\d\.\d{{4}}", out), m


def test_a_bad_layer_head_or_text_is_refused_before_the_model_loads(monkeypatch):
    import mha_explorer.models as models

    monkeypatch.setattr(models, "load_model", lambda *a, **k: pytest.fail("the model was loaded"))
    for args, said in (
        (("--layer", "abc"), "--layer 'abc' is not a whole number"),
        (("--head", "x"), "--head 'x' is not a whole number"),
        (("--layer", "-1"), "--layer -1 is out of range; choose a layer from 0 to 17 (layers are numbered from 0)"),
        (("--layer", "18"), "--layer 18 is out of range; choose a layer from 0 to 17 (layers are numbered from 0)"),
        (("--head", "-2"), "--head -2 is out of range; choose a head from 0 to 3 (heads are numbered from 0)"),
        (("--head", "4"), "--head 4 is out of range; choose a head from 0 to 3 (heads are numbered from 0)"),
        (("--text", ""), "the text is empty: give a sentence to run through the model"),
        (("--text", " "), "the text holds only spaces or line breaks: give a sentence to run through the model"),
    ):
        result = trace("--model", "gemma3", *args)
        assert result.exit_code == 2 and said in result.stderr, result.stderr
    # so does export-site, for each layer asked
    result = CliRunner().invoke(main, ["export-site", "site", "--model", "smollm2", "--layer", "3", "--layer", "30"])
    assert result.exit_code == 2 and "--layer 30 is out of range; choose a layer from 0 to 29" in result.stderr, result.stderr
    # a checkpoint of one's own: its layers are known once it is read
    result = trace("--model", "some/checkpoint", "--layer", "-1")
    assert result.exit_code == 2 and "--layer -1 is out of range: layers are numbered from 0; give 0 or more" in result.stderr
    result = trace("--model", "some/checkpoint", "--head", "-1")
    assert result.exit_code == 2 and "--head -1 is out of range; choose a head of the layer, numbered from 0" in result.stderr


@needs["minilm"]
def test_a_text_with_bytes_that_are_not_utf8_is_refused_saying_so(tmp_path):
    """A shell passes bytes that are not UTF-8 (a Latin-1 file's é) as a lone surrogate: said, not
    a traceback; so in Python, and for a checkpoint folder whose name holds such a byte."""
    from mha_explorer.models import ModelError

    result = trace("--model", "minilm", "--text", "caf\udce9 au lait")
    assert result.exit_code == 2, result.output
    assert "the text is not valid Unicode: character 3 is '\\udce9', a byte that was not UTF-8 (a file in another encoding?); give UTF-8 text" in result.stderr
    with pytest.raises(ModelError, match="the text is not valid Unicode: character 1 is"):
        load_model("minilm").trace("a\ud800b", 0)
    folder = Path(INSTALLED["minilm"].location)
    folder = folder if folder.is_dir() else folder.parent
    latin = tmp_path / "lat\udce9"  # b"lat\xe9" on disk
    latin.mkdir()
    for file in folder.iterdir():
        (latin / file.name).symlink_to(file)
    with pytest.raises(ModelError, match=r"the path .*lat\\xe9 holds a byte that is not UTF-8: rename it with UTF-8 characters"):
        load_model(latin)
    result = CliRunner().invoke(main, ["serve", "--port", "1", "--model", str(latin)])
    assert result.exit_code == 2 and "holds a byte that is not UTF-8" in result.stderr, result.output


@needs["minilm"]
def test_an_unknown_token_is_labelled_and_named_by_the_text_it_stands_for():
    """MiniLM's vocabulary lacks most CJK characters and every emoji: each becomes [UNK], which
    the labels tell apart by the text it stands for, in the terminal and in the server's answer,
    and which --query finds by that text."""
    text = "我爱机器学习 🐱🚀"
    p = payload("--model", "minilm", "--text", text, "--query", "爱")
    assert p.model.labels == ["[CLS]", "我", "[UNK] 爱", "[UNK] 机", "[UNK] 器", "学", "[UNK] 习", "[UNK] 🐱🚀", "[SEP]"]
    assert p.query == 2
    out = ok("--model", "minilm", "--text", text, "--query", "🐱🚀", "--stage", "weights", "--head", "0")
    assert "query [UNK] 🐱🚀 (position 7)" in out and "[UNK] 机" in out


@needs["minilm"]
def test_a_query_with_accents_finds_the_token_an_accent_stripping_tokenizer_made():
    """MiniLM lowercases and strips accents: "Zürich" is the token "zurich", and --query Zürich
    (or café, for "cafe") finds it as the text reads."""
    text = "Le café à Zürich"
    assert payload("--model", "minilm", "--text", text, "--query", "Zürich").query == 4
    assert payload("--model", "minilm", "--text", text, "--query", "café").query == 2


@needs["smollm2"]
def test_a_query_in_another_case_finds_every_spelling_of_its_word():
    """SmolLM2 keeps case: "The" (position 0) and "␣the" (4) are two tokens. A query in its own
    case names its own; one in another case, or at a position where its own case is not, names
    either: "the@0" said "'the' is at position 4 only", and "THE" quietly took position 4."""
    text = "The cat sat on the mat."
    assert payload("--model", "smollm2", "--text", text, "--query", "The").query == 0
    assert payload("--model", "smollm2", "--text", text, "--query", "the").query == 4  # its own case first
    assert payload("--model", "smollm2", "--text", text, "--query", "THE").query == 0  # the first in any case
    assert payload("--model", "smollm2", "--text", text, "--query", "the@0").query == 0
    assert payload("--model", "smollm2", "--text", text, "--query", "THE@4").query == 4
    assert payload("--model", "smollm2", "--text", "the cat sat", "--query", "The").query == 0  # only in another case
    result = trace("--model", "smollm2", "--text", text, "--query", "the@2")
    assert result.exit_code == 2 and result.stderr.splitlines()[-1] == "Error: --query the@2: 'the' is at positions 0, 4, not 2; name one, as the@0"


@needs["smollm2"]
def test_json_of_every_head_holds_each_heads_arrays_as_its_own_json_does():
    """--head all --json writes every head's arrays (GQA: 9 query heads, 3 K/V heads), each equal
    to what --head N --json writes; --head all in the walkthrough is its default, every head."""
    whole = payload("--model", "smollm2", "--text", FOX, "--layer", "2", "--head", "all")
    weights, k = to_numpy(whole.stages["weights"]), to_numpy(whole.stages["k"])
    assert weights.shape[0] == 9 and k.shape[0] == 3
    for head in (0, 4, 8):
        one = payload("--model", "smollm2", "--text", FOX, "--layer", "2", "--head", str(head))
        assert one.stages["weights"].heads == [head] and one.stages["k"].heads == [head // 3]  # the slices it holds
        assert np.array_equal(to_numpy(one.stages["weights"])[0], weights[head])
        assert np.array_equal(to_numpy(one.stages["k"])[0], k[head // 3])
    assert ok("--model", "smollm2", "--text", FOX, "--head", "ALL", "--stage", "weights") == ok("--model", "smollm2", "--text", FOX, "--stage", "weights")


@needs["minilm"]
def test_no_line_ends_in_a_space_a_copied_line_would_keep():
    """Rich left a space at each line break of the notes above and below the tables."""
    for out in (ok("--model", "minilm", "--text", FOX, width=80), ok(width=80)):
        assert not [line for line in out.splitlines() if line.endswith(" ")]


@needs["smollm2"]
@needs["minilm"]
def test_a_query_word_the_tokenizer_cut_says_into_which_tokens():
    """A word that is no token of its own ("Engineers" is "Engine" + "ers" to SmolLM2, "hyperparameters"
    four WordPiece tokens to MiniLM) is named as cut, with its pieces and their places, not just unknown."""
    for model, text, word, said in (
        ("smollm2", "Engineers rarely trust attention maps.", "Engineers", "'Engineers' is cut into 2 tokens here, 'Engine' + 'ers' at positions 0 to 1; name one of them"),
        ("minilm", "tokenization of hyperparameters", "hyperparameters", "'hyperparameters' is cut into 4 tokens here, 'hyper' + '##para' + '##meter' + '##s' at positions 4 to 7; name one of them"),
        # characters cut into byte pieces, a byte-level tokenizer's: each run read as its character (it was "unknown query token")
        ("smollm2", "café 東京", "東京", "'東京' is cut into 5 tokens here, '␣東 1/3' + '␣東 2/3' + '␣東 3/3' + '京 1/2' + '京 2/2' at positions 3 to 7; name one of them"),
    ):
        result = trace("--model", model, "--text", text, "--query", word)
        assert result.exit_code == 2 and result.stdout == ""
        assert result.stderr.splitlines()[-1] == f"Error: --query {word}: {said}"
    # a word at the start of a line: its pieces, not the line break before it; two words are no cut word
    after_a_break = trace("--model", "smollm2", "--text", "Hello\nEngineers rarely trust.", "--query", "Engineers")
    assert after_a_break.stderr.splitlines()[-1] == "Error: --query Engineers: 'Engineers' is cut into 2 tokens here, 'Engine' + 'ers' at positions 2 to 3; name one of them"
    # at a position, as a repeated token is named: the same pieces
    at = trace("--model", "smollm2", "--text", "Engineers rarely trust attention maps.", "--query", "Engineers@0")
    assert at.stderr.splitlines()[-1] == "Error: --query Engineers@0: 'Engineers' is cut into 2 tokens here, 'Engine' + 'ers' at positions 0 to 1; name one of them"
    # the word as typed is cut, the same word in lower case stands elsewhere: the cut is said, not
    # the other word taken (a cased tokenizer's "Engineers" is not its "engineers")
    cased = trace("--model", "smollm2", "--text", "Engineers build bridges and engineers build roads.", "--query", "Engineers")
    assert cased.stderr.splitlines()[-1] == "Error: --query Engineers: 'Engineers' is cut into 2 tokens here, 'Engine' + 'ers' at positions 0 to 1; name one of them"
    assert "query ␣engineers (position 1)" in ok("--model", "smollm2", "--text", "the engineers build roads.", "--query", "Engineers", "--stage", "scores")
    phrase = trace("--model", "smollm2", "--text", "the cat sat", "--query", "the cat")
    assert phrase.stderr.splitlines()[-1].startswith("Error: unknown query token 'the cat'")
    # a number past the last position that is a word of the text, cut ("10" is "1" + "0"): both are said
    number = trace("--model", "smollm2", "--text", "I have 10 dogs", "--query", "10")
    assert number.stderr.splitlines()[-1] == (
        "Error: --query 10 is out of range: the text has 6 tokens, at positions 0 to 5. As a word, '10' is cut into 2 tokens here, '1' + '0' at positions 3 to 4; name one of them"
    )
    # a piece itself is a query
    assert "query Engine (position 0)" in ok("--model", "smollm2", "--text", "Engineers rarely trust attention maps.", "--query", "Engine", "--stage", "scores")


@needs["minilm"]
def test_a_token_asked_for_where_it_is_not_is_offered_at_its_nearest_place():
    result = trace("--model", "minilm", "--text", "the cat saw the dog and the bird", "--query", "the@6")
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == "Error: --query the@6: 'the' is at positions 1, 4, 7, not 6; name one, as the@7"


@needs["smollm2"]
def test_a_causal_layers_first_query_sees_one_key_and_is_told_so_in_the_singular():
    text = " ".join(["word"] * 40)  # past the length where every key is listed
    weights = ok("--model", "smollm2", "--text", text, "--query", "0", "--stage", "weights", "--head", "0")
    assert "the largest weight" in weights and "the 1 largest" not in weights
    mixing = " ".join(ok("--model", "smollm2", "--text", text, "--query", "0", "--stage", "mixing", "--head", "0").replace("│", " ").split())
    # its sum is whole: no "+ …" term
    assert "z_0 = 1.00×v(word @0)" in mixing and "+ …" not in mixing and "(the other 39 keys are masked: their weights are 0)" in mixing
    scores = ok("--model", "smollm2", "--text", text, "--query", "0", "--stage", "scores", "--head", "0")
    assert "÷√64: the highest the query sees" in scores


@needs["smollm2"]
def test_a_causal_layers_early_query_is_said_to_see_as_many_keys_as_it_does():
    """Query 2 sees 3 keys: its tables say 3, not the 8 (or 3 a head) a later query's show."""
    text = " ".join(["word"] * 40)
    scores = ok("--model", "smollm2", "--text", text, "--query", "2", "--stage", "scores", "--head", "0")
    assert "÷√64: the 3 highest the query sees" in scores and "8 highest" not in scores
    weights = " ".join(ok("--model", "smollm2", "--text", text, "--query", "2", "--stage", "weights").replace("│", " ").split())
    assert "each head's 3 largest weights" in weights
    mixing = " ".join(ok("--model", "smollm2", "--text", text, "--query", "2", "--stage", "mixing", "--head", "0").replace("│", " ").split())
    assert "+ …" not in mixing and "(the other 37 keys are masked: their weights are 0)" in mixing
    later = " ".join(ok("--model", "smollm2", "--text", text, "--query", "20", "--stage", "mixing", "--head", "0").replace("│", " ").split())
    assert "+ … (21 visible keys of 40; the 3 largest weights shown)" in later and "masked: their weights" not in later


@needs["smollm2"]
def test_a_query_past_a_one_token_text_is_said_in_the_singular():
    result = trace("--model", "smollm2", "--text", "a", "--query", "3")
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == "Error: --query 3 is out of range: the text has 1 token, at position 0; choose 0, or a token: a"


@needs["smollm2"]
@pytest.mark.parametrize("width", [60, 80])
def test_a_real_models_tables_under_ascii_keep_their_columns_in_line(width):
    """Under ASCII, "…" is written "..." and "θ" "theta": spelled before the tables are laid out,
    every row of a table has its rules where its header has them, within the width."""
    import os
    import subprocess
    import sys

    env = os.environ | {"PYTHONIOENCODING": "ascii", "COLUMNS": str(width)}
    args = ["trace", "--model", "smollm2", "--text", "The cat sat on the mat.", "--layer", "2", "--head", "0"]
    done = subprocess.run([sys.executable, "-m", "mha_explorer.cli", *args], env=env, capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    lines = done.stdout.decode("ascii").splitlines()
    assert max(len(line) for line in lines) == width
    assert any("..." in line for line in lines) and any("theta" in line for line in lines)
    if width < 80:  # (tables without vertical rules: the width is what there is to check)
        return
    # each table's rows under its header's rule: their bars where the rule has its crossings
    checked = 0
    for i, rule in enumerate(lines):
        if not re.fullmatch(r"\| \|[-+]+\| *\|", rule):
            continue
        crossings = [k for k, c in enumerate(rule) if c in "+|"]
        for line in lines[i + 1 :]:
            if not line.startswith("| |"):
                break
            assert [k for k, c in enumerate(line) if c == "|"] == crossings, (rule, line)
            checked += 1
    assert checked > 20, checked


@needs["minilm"]
def test_a_query_not_in_the_default_text_says_the_text_was_the_default():
    """--query fox with --text forgotten: the error says which text it looked in, and how to give one."""
    result = trace("--model", "minilm", "--query", "fox")
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1].endswith("(of the default text, 'The cat sat on the mat because it was warm.'; give your own with --text)")
    given = trace("--model", "minilm", "--text", "a fox ran", "--query", "cat")
    assert given.exit_code == 2 and "default text" not in given.stderr


@needs["minilm"]
def test_a_folder_named_as_a_model_is_said_not_to_be_the_one_traced(tmp_path, monkeypatch):
    """--model minilm is the explorer's MiniLM even where a folder minilm lies here: said, with the
    way to the folder."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "minilm").mkdir()
    result = trace("--model", "minilm", "--stage", "weights")
    assert result.exit_code == 0
    assert result.stderr.splitlines()[0] == "Note: minilm is the explorer's all-MiniLM-L6-v2; for the folder minilm here, give --model ./minilm"
    assert "all-MiniLM-L6-v2" in result.stdout


@needs["smollm2"]
def test_a_gguf_file_named_without_its_ending_is_told_to_take_it(tmp_path):
    """The explorer knows a GGUF file by its .gguf ending: one named otherwise is told so, not
    called no checkpoint at all."""
    copy = tmp_path / "smol"
    copy.symlink_to(INSTALLED["smollm2"].location)
    result = trace("--model", str(copy))
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == "Error: smol begins as a GGUF file does, but its name does not end in .gguf, by which the explorer knows one: name it smol.gguf"


@needs["minilm"]
@needs["smollm2"]
def test_a_short_texts_value_mixing_lists_every_key_and_says_where_its_shown_z_misses_the_shown_terms():
    """Nine tokens: every weighted value row is listed, as the other stages list every key (it listed
    the 3 largest weights, which added up to 0.90, and z could not be checked). Where z's numbers
    shown, worked from the weights and v's numbers shown, land off (a long v shows its first 3),
    the note says so."""
    text = "The cat sat on the mat."
    for model in ("minilm", "smollm2"):
        out = ok("--model", model, "--text", text, "--layer", "3", "--head", "2", "--query", "cat", "--stage", "mixing", width=80)
        run = load_model(model).run(text, 3)
        t, n, i = run.trace, len(run.tokens), run.tokens.index("cat" if model == "minilm" else "Ġcat")
        g = t.config.kv_group[2]
        said = " ".join(out.replace("│", " ").split())
        assert said.count("×v(") == n and "largest weights shown" not in said, said
        shown = lambda x: Decimal(two(float(x)))  # noqa: E731
        misses = []
        for e in range(3):
            hand = sum((shown(t["weights"][2, i, j]) * shown(t["v"][g, j, e]) for j in range(n)), Decimal(0)).quantize(Decimal("0.01"), ROUND_HALF_UP)
            if hand != shown(t["z"][2, i, e]):
                misses.append(f"z_2[{e}] comes to {hand} (shown: {two(float(t['z'][2, i, e]))})")
        if misses:
            assert "from the rounded numbers shown, " + "; ".join(misses) + "." in said, (misses, said)
        else:
            assert "from the rounded numbers shown" not in said, said
        if model == "smollm2":
            assert misses  # (here z_2[1] and z_2[2] land off)


@needs["smollm2"]
def test_a_real_models_output_says_which_components_its_rounded_parts_do_not_add_up_to():
    """Nine heads' parts of y, each rounded: their sum lands off the y shown in some components, by
    up to 9 × 0.005. One line says which, and why, rather than a note for each."""
    text = "The cat sat on the mat."
    out = ok("--model", "smollm2", "--text", text, "--layer", "3", "--head", "2", "--query", "cat", "--stage", "output", width=80)
    run = load_model("smollm2").run(text, 3)
    t, i = run.trace, run.tokens.index("Ġcat")
    shown_m = [int(m) for m in re.findall(r"y\[(\d+)\]", out.split("Output projection")[1].split("head 0")[0])]
    assert shown_m == list(range(len(shown_m))) and shown_m, out
    part = lambda x: Decimal(two(float(x)))  # noqa: E731
    off = [f"y[{m}]" for m in shown_m if sum((part(c) for c in t["contributions"][:, i, m]), Decimal(0)) != part(t["output"][i, m])]
    said = " ".join(out.replace("│", " ").split())
    assert off, "this query was picked for parts that land off"
    assert f"the heads' parts of {', '.join(off)}, added up, land off the y shown (a sum of 9 numbers rounded to two decimals may land up to 0.045 off)" in said, said


@needs["minilm"]
@needs["gemma3"]
def test_in_ascii_a_real_layers_scores_and_notes_keep_within_the_width():
    """Output in ASCII (PYTHONIOENCODING=ascii): the Scores table's two-line header "q·k_j as a
    sum of products / (32 products)" was measured as one line, spelled: its column took 40
    characters, the table ran past its panel and cut "scaled s" off, and q·k lost its decimals
    without a sign. Gemma 3's note (θ, spelled "theta" after it was wrapped) ran 2 past 80."""
    import os
    import subprocess
    import sys

    def run(width, *args):
        env = os.environ | {"PYTHONIOENCODING": "ascii", "COLUMNS": str(width)}
        done = subprocess.run([sys.executable, "-m", "mha_explorer.cli", "trace", *args], env=env, capture_output=True, timeout=300)
        assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr.decode(errors="replace")
        return done.stdout.decode("ascii").splitlines()

    for width in (60, 80):
        lines = run(width, "--model", "minilm", "--stage", "scores", "--head", "0")
        assert max(map(len, lines)) <= width, [line for line in lines if len(line) > width]
        header = next(i for i, line in enumerate(lines) if "scaled s" in line)
        rows = [line for line in lines[header + 2 :] if line.count("|") >= 4][:13]
        assert len(rows) == 13 and all(re.search(r"\|\s+-?\d+\.\d\d \|\s+-?\d+\.\d\d \|", row) for row in rows), rows  # q.k_j and s, two decimals each
    lines = run(80, "--model", "gemma3", "--stage", "concat")
    assert any("theta" in line for line in lines) and max(map(len, lines)) <= 80, [line for line in lines if len(line) > 80]
