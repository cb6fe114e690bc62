"""`mha-explorer export-site`: the files it writes."""

from __future__ import annotations

import errno
import hashlib
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from mha_explorer.cli import main
from mha_explorer.models import available_models

pytestmark = pytest.mark.cli


def test_export_site_writes_a_self_contained_site(tmp_path):
    result = CliRunner().invoke(main, ["export-site", str(tmp_path / "site")])
    assert result.exit_code == 0, result.output
    site = tmp_path / "site"
    assert sorted(p.relative_to(site).as_posix() for p in site.rglob("*") if p.is_file()) == [
        "index.html",
        "static/app.js",
        "static/data.js",
        "static/explorer.css",
        "static/page.css",
    ]
    html = (site / "index.html").read_text()
    assert 'type="module"' not in html and "static/app.js" in html and "static/data.js" in html
    app = (site / "static/app.js").read_text()
    assert not re.search(r"^\s*(import|export)\b", app, flags=re.M)
    for text in (html, app, (site / "static/page.css").read_text(), (site / "static/explorer.css").read_text()):
        assert "http://" not in text.replace("http://www.w3.org/", "") and "https://" not in text
    data = json.loads((site / "static/data.js").read_text().splitlines()[0].removeprefix("globalThis.MHA_DATA = ").removesuffix(";"))
    assert set(data["presets"]) == {"mha", "causal", "gqa", "mqa"}
    assert [data["presets"][p]["config"]["kind"] for p in ("mha", "causal", "gqa", "mqa")] == ["MHA", "MHA", "GQA", "MQA"]
    assert data["teaching"]["tokens"] == ["cats", "like", "warm", "milk"]


def test_export_site_to_an_unwritable_place_says_so(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = CliRunner().invoke(main, ["export-site", str(blocker / "site" / "sub")])
    assert result.exit_code == 2
    # the file in the way named, not "cannot write to .../site/sub/static: Not a directory", a path never typed
    assert result.output.strip() == f"Error: {blocker} is a file, not a folder: name a directory to write the copy into whose parents are folders"
    (tmp_path / "link").symlink_to(tmp_path / "nowhere")
    result = CliRunner().invoke(main, ["export-site", str(tmp_path / "link")])
    assert result.exit_code == 2  # not "File exists; a file of that name is in the way of a folder"
    assert result.output.strip() == f"Error: {tmp_path / 'link'} is a link to {tmp_path / 'nowhere'}, which is not there: make that folder, or name another directory"
    for through in (f"{tmp_path / 'link'}/", str(tmp_path / "link" / "site")):  # (with a slash, readlink followed the link: a stack trace)
        result = CliRunner().invoke(main, ["export-site", through])
        assert result.output.strip() == f"Error: {tmp_path / 'link'} is a link to {tmp_path / 'nowhere'}, which is not there: make that folder, or name another directory", through


def test_export_site_names_what_is_in_the_way(tmp_path):
    """DIRECTORY a file, or a file where static/ goes: the message says which, and what to change."""
    (tmp_path / "afile").write_text("")
    result = CliRunner().invoke(main, ["export-site", str(tmp_path / "afile")])
    assert result.exit_code == 2 and "Usage:" not in result.output
    assert result.output.strip() == f"Error: {tmp_path / 'afile'} is a file: name a directory to write the copy into (a new one is made)"
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "static").write_text("")
    result = CliRunner().invoke(main, ["export-site", str(tmp_path / "site")])
    assert result.exit_code == 2
    assert f"cannot write to {tmp_path / 'site' / 'static'}: File exists; a file of that name is in the way of a folder" in result.output
    assert sorted(p.name for p in (tmp_path / "site").iterdir()) == ["static"]  # nothing written


def test_export_site_lists_what_it_wrote_and_what_to_upload(tmp_path):
    site = tmp_path / "site"
    result = CliRunner().invoke(main, ["export-site", str(site)])
    lines = result.output.splitlines()
    total = sum(p.stat().st_size for p in site.rglob("*") if p.is_file())
    assert lines[0] == f"wrote a copy of the explorer to {site}, {total / 1000:.0f} KB in all:"
    last = next(i for i, line in enumerate(lines) if line.split()[0] == "open")  # the advice, wrapped to the terminal
    listed = {line.split()[0]: line.split()[1:] for line in lines[1:last]}
    assert set(listed) == {"index.html", "static/page.css", "static/explorer.css", "static/app.js", "static/data.js"}
    assert listed["static/data.js"] == [f"{(site / 'static/data.js').stat().st_size / 1000:.0f}", "KB"]
    assert " ".join(lines[last:]).endswith("put index.html and the static folder, side by side, on any static host (the page needs both)")
    assert len(lines) - last > 1 and all(len(line) <= 80 or " " not in line for line in lines[last:])  # (a path keeps a line of its own, whole)


def read_data(site):
    """static/data.js, each layer a copy holds replaced by its file's payload, static/layer-N.js."""
    data = json.loads((site / "static/data.js").read_text().splitlines()[0].removeprefix("globalThis.MHA_DATA = ").removesuffix(";"))
    for held in data.get("models", []):
        layers = {}
        for layer in held["layers"]:
            start = f'(globalThis.MHA_LAYERS ||= {{}})["{held["name"]}/{layer}"] = '  # the key the page reads
            layers[str(layer)] = json.loads((site / f"static/layer-{layer}.js").read_text().removeprefix(start).rstrip(";\n"))
        held["layers"] = layers
    return data


@pytest.mark.skipif("minilm" not in {m.name for m in available_models() if m.installed}, reason="minilm is not installed: run make models")
def test_export_site_with_layers_of_a_real_model(tmp_path):
    text = "The cat sat on the mat because it was warm."
    site = tmp_path / "site"
    result = CliRunner().invoke(main, ["export-site", str(site), "--model", "minilm", "--text", text, "--layer", "2", "--layer", "0", "--layer", "2"])
    assert result.exit_code == 0, result.output
    data = read_data(site)
    (held,) = data["models"]
    assert held["name"] == "minilm" and held["text"] == text and list(held["layers"]) == ["0", "2"]
    assert "family" not in held  # a named model: the page offers its Python
    layer = held["layers"]["2"]
    assert layer["model"]["layer"] == 2 and len(layer["tokens"]) == 13
    # every head is written (a static copy cannot ask for another): no slice of heads, the full shape
    for name in ("q", "weights", "contributions"):
        assert layer["stages"][name]["heads"] is None and layer["stages"][name]["shape"][0] == 12
    assert layer["weights"]["W_Q"]["heads"] is None and layer["weights"]["W_Q"]["shape"] == [12, 384, 32]
    # the scaled scores are the scores times the scale, each head's z a block of concat: the page
    # makes them (a mask too, where the layer masks)
    assert layer["derived"] == ["scaled", "z"] and not {"scaled", "z", "mask"} & set(layer["stages"])
    # each layer is a file of its own, which the page reads when the layer is traced: data.js,
    # which the page waits for, holds what the layers are, not their megabytes
    layer_files = sorted(p.name for p in (site / "static").glob("layer-*.js"))
    assert layer_files == ["layer-0.js", "layer-2.js"]
    # the page asks for each by the digest of what was written (layer-2.js?v=…), so that no earlier export's file is read from a cache
    versions = json.loads((site / "static/data.js").read_text().splitlines()[0].removeprefix("globalThis.MHA_DATA = ").removesuffix(";"))["models"][0]["versions"]
    assert versions == {layer: hashlib.sha256((site / f"static/layer-{layer}.js").read_bytes()).hexdigest()[:16] for layer in ("0", "2")}
    assert (site / "static/data.js").stat().st_size < min((site / "static" / name).stat().st_size for name in layer_files)
    assert "layer-" not in (site / "index.html").read_text()
    # nothing of the machine that wrote it: no file paths of the model
    for name in ("data.js", *layer_files):
        written = (site / "static" / name).read_text()
        assert "site-packages" not in written and "model.safetensors" not in written
    # written again with other layers, the copy drops the layers it no longer holds; without a model, all
    assert CliRunner().invoke(main, ["export-site", str(site), "--model", "minilm", "--text", text, "--layer", "1"]).exit_code == 0
    assert sorted(p.name for p in (site / "static").glob("layer-*.js")) == ["layer-1.js"]
    assert list(read_data(site)["models"][0]["layers"]) == ["1"]
    (site / "static/layers.js").write_text("globalThis.MHA_DATA.models = [];\n")  # every layer in one file, as copies were once written
    assert CliRunner().invoke(main, ["export-site", str(site)]).exit_code == 0
    assert "models" not in read_data(site) and not list((site / "static").glob("layer*.js"))


@pytest.mark.parametrize(
    "args, message",
    [
        (["--model", "minilm"], "--model needs at least one --layer"),
        (["--layer", "1"], "--layer needs --model"),
        (["--text", "hello"], "--text needs --model"),
        (["--text", "hello", "--layer", "1"], "--text and --layer need --model"),
        (["--model", "nope", "--layer", "0"], "unknown model 'nope': choose one of minilm"),
        (["--model", "minilm", "--layer", "x"], "--layer 'x' is not a whole number"),  # before the model loads
    ],
)
def test_export_site_model_options_that_cannot_work_say_why(tmp_path, args, message):
    result = CliRunner().invoke(main, ["export-site", str(tmp_path / "site"), *args])
    assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "site").exists()  # nothing half written


@pytest.mark.skipif("minilm" not in {m.name for m in available_models() if m.installed}, reason="minilm is not installed: run make models")
@pytest.mark.parametrize(
    "args, message",
    [
        (["--layer", "6"], "--layer 6 is out of range; choose a layer from 0 to 5"),
        (["--layer", "0", "--text", "word " * 200], "the text is 202 tokens long; a static copy"),
        (["--layer", "0", "--text", "word " * 600], "the text is 602 tokens long; a static copy"),  # past MiniLM's own 512 too: the copy's limit is the one to meet
    ],
)
def test_export_site_model_layers_that_cannot_be_written_say_why(tmp_path, args, message):
    result = CliRunner().invoke(main, ["export-site", str(tmp_path / "site"), "--model", "minilm", *args])
    assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "site").exists()


@pytest.mark.skipif("minilm" not in {m.name for m in available_models() if m.installed}, reason="minilm is not installed: run make models")
def test_a_local_checkpoint_is_written_under_a_short_name_not_its_path(tmp_path):
    from mha_explorer.models import load_model

    directory = load_model("minilm").source  # the installed Hugging Face directory, loaded by its path
    result = CliRunner().invoke(main, ["export-site", str(tmp_path / "site"), "--model", directory, "--layer", "1"])
    assert result.exit_code == 0, result.output
    data = read_data(tmp_path / "site")
    (held,) = data["models"]
    assert held["name"] == Path(directory).name.lower() == held["config"]["name"] == held["layers"]["1"]["model"]["name"]
    assert re.fullmatch(r"[a-z0-9_-]{1,64}", held["name"])  # one the page's links take
    # no name load_model() knows: the page offers no Python for it (it offered load_model("all-minilm-l6-v2"))
    assert held["family"] == "local"
    assert directory not in (tmp_path / "site/static/layer-1.js").read_text() + (tmp_path / "site/static/data.js").read_text()


def test_a_copy_that_cannot_be_written_whole_leaves_no_file(tmp_path, monkeypatch):
    real_write = Path.write_text

    def full_disk(path, text, *args, **kwargs):
        if "data.js" in path.name:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(path, text, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full_disk)
    result = CliRunner().invoke(main, ["export-site", str(tmp_path / "site")])
    assert result.exit_code == 2 and "No space left on device; free some space" in result.output
    assert not (tmp_path / "site").exists()  # nor the folders made for it (an empty static/ was left)


def test_a_directory_holding_other_files_of_the_same_names_is_left_alone(tmp_path):
    site = tmp_path / "site"
    (site / "static").mkdir(parents=True)
    (site / "index.html").write_text("<h1>my own page</h1>")
    (site / "static" / "page.css").write_text("my css")
    result = CliRunner().invoke(main, ["export-site", str(site)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "not an earlier copy" in result.output and "--replace to write over them" in result.output and "index.html" in result.output
    assert (site / "index.html").read_text() == "<h1>my own page</h1>" and (site / "static" / "page.css").read_text() == "my css"
    assert sorted(p.name for p in site.rglob("*") if p.is_file()) == ["index.html", "page.css"]

    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "index.html").write_text("<h1>my own page</h1>")
    one = CliRunner().invoke(main, ["export-site", str(alone)])
    assert one.exit_code == 2 and "already holds" in one.output and "--replace to write over it (nothing" in one.output

    replaced = CliRunner().invoke(main, ["export-site", str(site), "--replace"])
    assert replaced.exit_code == 0, replaced.output
    assert "static/data.js" in (site / "index.html").read_text()


def test_an_earlier_copy_is_replaced_without_asking(tmp_path):
    site = tmp_path / "site"
    assert CliRunner().invoke(main, ["export-site", str(site)]).exit_code == 0
    (site / "static" / "notes.txt").write_text("kept")
    again = CliRunner().invoke(main, ["export-site", str(site)])
    assert again.exit_code == 0, again.output
    assert (site / "static" / "notes.txt").read_text() == "kept"
    # its page alone (a copy half uploaded, its folder not yet there): still the explorer's copy, not
    # "already holds index.html, not an earlier copy of the explorer"
    half = tmp_path / "half"
    half.mkdir()
    (half / "index.html").write_text((site / "index.html").read_text())
    again = CliRunner().invoke(main, ["export-site", str(half)])
    assert again.exit_code == 0 and (half / "static" / "app.js").is_file(), again.output


def test_an_empty_directory_name_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["export-site", ""])
    assert result.exit_code == 2 and "DIRECTORY is empty" in result.output
    assert list(tmp_path.iterdir()) == []


def test_the_presets_and_limits_of_the_lab_are_the_packages():
    """A static copy holds the lab's presets, computed in Python; the page finds them by the config
    and tokens lab.js gives them. The page checks the server's limits before it asks. Both are
    written in both languages: they must agree."""
    from mha_explorer.config import PRESETS
    from mha_explorer.export import LAB_PRESETS, WEB
    from mha_explorer.lab import PRESET_TOKENS
    from mha_explorer.schema import LAB_MAX_HEADS, LAB_MAX_TOKENS, LAB_MAX_WIDTH, MAX_TOKEN_CHARS

    source = WEB.joinpath("lab.js").read_text(encoding="utf-8")
    offered = dict(re.findall(r"^  (\w+): \{ title: \"[^\"]+\", config: (\{[^}]+\}) \},$", source, flags=re.M))
    assert sorted(offered) == sorted(LAB_PRESETS)
    for name, config in offered.items():
        assert json.loads(re.sub(r"(\w+):", r'"\1":', config)) == PRESETS[name].to_dict(), name
    assert json.loads(re.search(r"PRESET_TOKENS = (\[[^\]]+\]);", source)[1]) == list(PRESET_TOKENS)
    limits = json.loads(re.sub(r"(\w+):", r'"\1":', re.search(r"LAB_LIMITS = (\{[^}]+\});", source)[1]))
    assert limits == {"tokens": LAB_MAX_TOKENS, "width": LAB_MAX_WIDTH, "heads": LAB_MAX_HEADS, "tokenChars": MAX_TOKEN_CHARS}
