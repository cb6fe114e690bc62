"""`export-site`: a static copy of the explorer that works from file:// and on any static host.

Browsers refuse ES modules from file://, so the page's modules are joined into one classic
script; the traces are precomputed into a data script, and each real-model layer into a script
of its own, which the page adds when the layer is traced. Nothing is fetched: scripts load from
file:// where fetch is refused.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from contextlib import suppress
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from .config import PRESETS
from .lab import PRESET_TOKENS, lab_payload
from .models.registry import NAMES, short_name
from .modelview import MAX_TEXT, STATIC_MAX_TOKENS, model_payload
from .schema import DERIVED, TraceRequest, teaching_payload

WEB = files(__package__).joinpath("web")
MODULES = ("explorer.js", "heads.js", "lab.js", "models.js", "page.js")  # in dependency order
LAB_PRESETS = ("mha", "causal", "gqa", "mqa")


def bundle() -> str:
    """The page's ES modules as one classic script: imports dropped, exports made plain."""
    parts = []
    for name in MODULES:
        source = WEB.joinpath(name).read_text(encoding="utf-8")
        source = re.sub(r"^import .*?;\n", "", source, flags=re.M)
        source = source.replace("export default { render };", "const explorer = { render };")
        source = re.sub(r"^export (async function|function\*?|class|const) ", r"\1 ", source, flags=re.M)
        if re.search(r"^\s*(import|export)\b", source, flags=re.M):
            raise RuntimeError(f"{name} has an import or export the static bundle cannot rewrite")
        parts.append(f"// ---- {name} ----\n{source}")
    # MHA_COPY: the page is a copy, with no server behind it, even when its data did not load
    return '"use strict";\nglobalThis.MHA_COPY = true;\n(() => {\n' + "\n".join(parts) + "\n})();\n"


@dataclass(frozen=True)
class ModelLayers:
    """Some layers of a real model on one text, for a static copy."""

    model: object  # a loaded model (models.LoadedModel)
    text: str
    layers: tuple[int, ...]


def model_data(spec: ModelLayers) -> tuple[dict, dict[int, dict]]:
    """What the static page's real-model panel reads in place of the server: the model, its text
    and the layers it holds; and the payload of each layer, every head in float32, to be written
    into a file of its own (the page reads a layer's file when that layer is traced)."""
    from .models import ModelError

    model = spec.model
    if len(spec.text) > MAX_TEXT:
        raise ModelError(f"the text is {len(spec.text)} characters long; give at most {MAX_TEXT}")
    n = len(model.tokenizer.encode(spec.text).ids)  # counted, not yet checked against the model's own longer limit
    if n > STATIC_MAX_TOKENS:
        raise ModelError(
            f"the text is {n} tokens long; a static copy holds every head of each layer, so it takes "
            f"at most {STATIC_MAX_TOKENS} tokens: shorten the text (the server, mha-explorer serve, takes up to {model.max_tokens})"
        )
    # a local checkpoint's name is its path on this machine: the copy calls it by a short name (a
    # registry name is its own short name)
    name = short_name(model.name)
    layers = {}
    for layer in sorted(set(spec.layers)):
        payload = json.loads(model_payload(model, spec.text, layer, head=None).model_dump_json())
        payload["model"]["name"] = name
        # the scaled and masked scores are the scores times the scale, and each head's z a block of
        # concat: the page makes them again
        payload["derived"] = [stage for stage in DERIVED if stage in payload["stages"]]
        for stage in payload["derived"]:
            del payload["stages"][stage]
        layers[layer] = payload
    config = model.shared_summary(name)
    held = {"name": name, "title": model.title, "config": config, "text": spec.text, "layers": list(layers)}
    # a checkpoint's short name is no name load_model() knows: the page offers no Python for it, as the server's does not
    local = {} if model.name in NAMES else {"family": "local"}
    return held | local, layers


def site_data(model: ModelLayers | None = None) -> tuple[dict, dict[str, str]]:
    """The teaching example, the lab's presets and what a real model's layers are, if given (the
    page's data script); and the layer files, by name under static/: each layer is read when it
    is traced, so that a copy of many layers shows its first without waiting for the others."""
    presets = {}
    for name in LAB_PRESETS:
        request = TraceRequest(config=PRESETS[name].to_dict(), tokens=list(PRESET_TOKENS), seed=0, encoding="base64")
        presets[name] = json.loads(lab_payload(request).model_dump_json())
    data = {"teaching": json.loads(teaching_payload("base64").model_dump_json()), "presets": presets}
    if model is None:
        return data, {}
    held, layers = model_data(model)
    files, versions = {}, {}
    for layer, payload in layers.items():
        key = json.dumps(f"{held['name']}/{layer}")
        files[f"layer-{layer}.js"] = text = f"{LAYER_START}{key}] = {json.dumps(payload, separators=(',', ':'))};\n"
        # asked for as layer-N.js?v=<its digest>: a browser or host that kept an earlier copy's file reads this one
        versions[str(layer)] = hashlib.sha256(text.encode()).hexdigest()[:16]
    data["models"] = [held | {"versions": versions}]  # a list: the page's model panel lists models
    return data, files


DATA_START = "globalThis.MHA_DATA = "  # how static/data.js begins: the mark of a copy written here
NO_SCRIPT = "This copy of the explorer could not read its script, static/app.js: put the whole static folder beside index.html, as mha-explorer export-site wrote it."
# static/data.js's end: static/app.js missing (a copy half uploaded) is said where the page would be
SAY_NO_SCRIPT = (
    'addEventListener("error", (event) => { if (event.target instanceof HTMLScriptElement && event.target.src.endsWith("/static/app.js")) '
    f'document.getElementById("app").replaceChildren(Object.assign(document.createElement("p"), {{ className: "error", textContent: {json.dumps(NO_SCRIPT)} }})); }}, true);\n'
)
LAYER_START = "(globalThis.MHA_LAYERS ||= {})["  # and static/layer-N.js, each layer a copy holds
OLD_LAYERS_START = "globalThis.MHA_DATA.models = "  # static/layers.js: every layer in one file, as copies were once written


class WouldReplace(Exception):
    """The directory holds files of the same names that are not an earlier copy of the explorer."""

    def __init__(self, paths: list[Path]):
        super().__init__(", ".join(str(p) for p in paths))
        self.paths = paths


COPY_SCRIPTS = '<script src="static/data.js"></script>\n<script src="static/app.js" defer></script>'  # a copy's index.html loads these


def _earlier_copy(static: Path) -> bool:
    """Whether static's folder holds a copy written here: its data, or its page alone (a copy half
    uploaded, or its static folder lost)."""
    if _written_here(static / "data.js", DATA_START):
        return True
    try:
        page = (static.parent / "index.html").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return 'src="static/data.js"' in page and "<title>mha-explorer" in page


def _written_here(path: Path, start: str) -> bool:
    """Whether path is a file this module wrote (it begins with start)."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read(len(start)) == start
    except (OSError, UnicodeDecodeError):
        return False


def export_site(directory: Path, model: ModelLayers | None = None, replace: bool = False) -> list[Path]:
    """Write index.html and static/ into `directory`, with the layers of a real model if given;
    return the files written. An earlier copy there is replaced; other files of the same names
    only with replace=True (else WouldReplace, and nothing is written)."""
    static = Path(directory) / "static"
    data, layer_files = site_data(model)  # before any write: a text too long leaves nothing half written
    files = ("page.css", "explorer.css", "app.js", "data.js", *layer_files)
    names = [Path(directory) / "index.html", *(static / name for name in files)]
    taken = [path for path in names if path.exists()]
    if taken and not replace and not _earlier_copy(static):
        raise WouldReplace(taken)
    made = [folder for folder in (static, *static.parents) if not folder.exists()]  # (taken away again if the copy is not written)
    static.mkdir(parents=True, exist_ok=True)
    page = WEB.joinpath("index.html").read_text(encoding="utf-8")
    module_tag = '<script type="module" src="static/page.js"></script>'
    if module_tag not in page:
        raise RuntimeError("index.html no longer loads static/page.js as expected")
    page = page.replace(module_tag, COPY_SCRIPTS)
    # the page alone, without its static folder (copied by itself, or sent as one file), says so:
    # its script, which would say it, is the file missing. Said by the page itself, which the
    # folder's stylesheet hides, not by a handler in the page (a host's Content-Security-Policy
    # refuses those, as the server's does); static/app.js alone missing, data.js says it.
    loading = '<div id="app"><p class="loading">Loading the teaching example…</p></div>'
    if loading not in page:
        raise RuntimeError("index.html no longer holds the app's box as expected")
    # (the line of the page being loaded shows where the stylesheet is: hidden by the page alone)
    page = page.replace(loading, f'<div id="app"><p class="loading" hidden>Loading the teaching example…</p><p class="error no-static">{NO_SCRIPT}</p></div>')
    texts = (
        page,
        WEB.joinpath("page.css").read_text(encoding="utf-8"),
        WEB.joinpath("explorer.css").read_text(encoding="utf-8"),
        bundle(),
        DATA_START + json.dumps(data, separators=(",", ":")) + ";\n" + SAY_NO_SCRIPT,
        *layer_files.values(),
    )
    written = dict(zip(names, texts))
    # each file is written beside its place and moved there once all are written (index.html
    # last): a full disk leaves the directory as it was, not a copy that half works
    temporary = {path: path.with_name(f".{path.name}.part") for path in written}
    done = False
    try:
        for path, text in written.items():
            temporary[path].write_text(text, encoding="utf-8")
        for path in sorted(written, key=lambda p: p.name == "index.html"):
            os.replace(temporary[path], path)
        done = True
    finally:
        for part in temporary.values():
            part.unlink(missing_ok=True)
        for folder in [] if done else made:  # the folders made for it, innermost first: nothing is left
            with suppress(OSError):
                folder.rmdir()
    # an earlier copy's layers that this one does not hold
    for path in [*static.glob("layer-*.js"), static / "layers.js"]:
        if path not in written and (_written_here(path, LAYER_START) or _written_here(path, OLD_LAYERS_START)):
            path.unlink()
    return list(written)
