"""The registry's own steps: progress of a step that cannot count, local names, joining parts."""

from __future__ import annotations

import hashlib
import re
import time

import pytest

from mha_explorer.models import CheckpointError, registry
from mha_explorer.models.registry import _ticking, local_models, local_titles
from mha_explorer.modelview import ModelService


def test_a_long_step_is_said_again_with_the_time_so_far():
    said = []
    with _ticking(lambda fraction, message: said.append((fraction, message)), 0.02, "reading", every=0.05):
        time.sleep(0.18)
    assert said[0] == (0.02, "reading") and len(said) >= 3
    assert all(f == 0.02 and m.startswith("reading (") and m.endswith("s so far; a large vocabulary takes a while)") for f, m in said[1:])
    count = len(said)
    time.sleep(0.12)
    assert len(said) == count  # nothing after the step


def checkpoint_files(folder):
    """A folder that passes serve --model's checks at its start (its files are read when it loads)."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"model_type": "bert"}')
    (folder / "tokenizer.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"")


def test_local_names_stay_within_what_a_request_allows(tmp_path):
    long = "a-checkpoint-with-a-name-far-longer-than-any-model-name-should-be-at-all"
    folders = [tmp_path / "one" / long, tmp_path / "two" / long, tmp_path / "three" / long]
    for folder in folders:
        checkpoint_files(folder)
    names = list(local_models([str(f) for f in folders]))
    assert len(set(names)) == 3 and all(len(name) <= 64 for name in names), names
    assert names[1].endswith("-2") and names[2].endswith("-3")


def test_local_checkpoints_of_the_same_name_are_told_apart_in_the_menu(tmp_path):
    """Two folders named my-checkpoint are listed as a/my-checkpoint and b/my-checkpoint (with the
    short names my-checkpoint and my-checkpoint-2); a name no other shares stays as it is."""
    folders = [tmp_path / "a" / "my-checkpoint", tmp_path / "b" / "my-checkpoint", tmp_path / "b" / "other"]
    for folder in folders:
        checkpoint_files(folder)
    local = local_models([str(f) for f in folders])
    assert local_titles(local) == {"my-checkpoint": "a/my-checkpoint", "my-checkpoint-2": "b/my-checkpoint", "other": "other"}
    service = ModelService(local=local)
    listed = [(m.name, m.title) for m in service.infos() if m.family == "local"]
    assert listed == [("my-checkpoint", "a/my-checkpoint"), ("my-checkpoint-2", "b/my-checkpoint"), ("other", "other")]
    # sharing their parent's name too, they are given whole
    deeper = [tmp_path / "x" / "a" / "m", tmp_path / "y" / "a" / "m"]
    for folder in deeper:
        checkpoint_files(folder)
    assert sorted(local_titles(local_models([str(f) for f in deeper])).values()) == [str(f) for f in deeper]


@pytest.mark.parametrize("cache", ["a file", "under a file"])
def test_a_cache_that_is_no_folder_is_said_in_one_line(tmp_path, monkeypatch, cache):
    """MHA_EXPLORER_CACHE at a file, or under one (/dev/null/x): the message was built, then lost
    under a NotADirectoryError from removing the partial file, a stack trace."""
    files = {("p1", "a.part"): tmp_path / "a.part", ("main", "SHA256SUMS"): tmp_path / "SHA256SUMS"}
    files[("p1", "a.part")].write_bytes(b"whole")
    files[("main", "SHA256SUMS")].write_text(f"{hashlib.sha256(b'whole').hexdigest()}  joined.gguf\n")
    monkeypatch.setattr(registry, "_installed_file", lambda package, name: files[(package, name)])
    (tmp_path / "afile").write_text("not a folder")
    monkeypatch.setenv("MHA_EXPLORER_CACHE", str(tmp_path / "afile" / ("" if cache == "a file" else "x")))
    spec = registry.ModelSpec("x", "X", "llama", "main", ("SHA256SUMS",), "", 1, 1, parts=(("p1", "a.part"),), joined_name="joined.gguf")
    with pytest.raises(CheckpointError, match=re.escape(f"({tmp_path / 'afile'} is a file, not a folder); set MHA_EXPLORER_CACHE to a writable directory")):
        registry._join_parts(spec, lambda f, m: None)


@pytest.mark.parametrize("case", ["right", "checksum differs", "a part fails to read"])
def test_joining_parts_leaves_no_partial_file(tmp_path, monkeypatch, case):
    right = case == "right"
    pieces = {("p1", "a.part"): b"first half, ", ("p2", "b.part"): b"second half"}
    files = {}
    for (package, name), data in pieces.items():
        files[(package, name)] = tmp_path / name
        files[(package, name)].write_bytes(data)
    if case == "a part fails to read":  # after the first part is written: an OSError mid-join
        real_open = type(tmp_path).open

        def failing_open(path, *args, **kwargs):
            if path.name == "b.part":
                raise OSError(5, "I/O error")
            return real_open(path, *args, **kwargs)

        monkeypatch.setattr(type(tmp_path), "open", failing_open)
    digest = hashlib.sha256(b"".join(pieces.values())).hexdigest() if case != "checksum differs" else "0" * 64
    files[("main", "SHA256SUMS")] = tmp_path / "SHA256SUMS"
    files[("main", "SHA256SUMS")].write_text(f"{digest}  joined.gguf\n")
    monkeypatch.setattr(registry, "_installed_file", lambda package, name: files[(package, name)])
    monkeypatch.setenv("MHA_EXPLORER_CACHE", str(tmp_path / "cache"))
    spec = registry.ModelSpec("x", "X", "llama", "main", ("SHA256SUMS",), "", 1, 1, parts=tuple(pieces), joined_name="joined.gguf")
    if right:
        assert registry._join_parts(spec, lambda f, m: None).read_bytes() == b"first half, second half"
    else:
        with pytest.raises(CheckpointError, match="does not match its SHA-256" if case == "checksum differs" else "I/O error"):
            registry._join_parts(spec, lambda f, m: None)
    assert [p.name for p in (tmp_path / "cache").iterdir()] == (["joined.gguf"] if right else [])
