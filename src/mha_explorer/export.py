"""`export-site`: a static copy of the explorer that works from file:// and on any static host.

Browsers refuse ES modules from file://, so the page's modules are joined into one classic
script; the traces are precomputed into a data script. Nothing is fetched at run time.
"""

from __future__ import annotations

import json
import re
from importlib.resources import files
from pathlib import Path

from .config import PRESETS
from .lab import lab_payload
from .schema import TraceRequest
from .server import teaching_payload

WEB = files(__package__).joinpath("web")
MODULES = ("explorer.js", "lab.js", "models.js", "page.js")  # in dependency order
PRESET_TOKENS = ["the", "cat", "sat", "on", "the", "mat"]  # as in lab.js
LAB_PRESETS = ("mha", "causal", "gqa", "mqa")


def bundle() -> str:
    """The page's ES modules as one classic script: imports dropped, exports made plain."""
    parts = []
    for name in MODULES:
        source = WEB.joinpath(name).read_text(encoding="utf-8")
        source = re.sub(r"^import .*?;\n", "", source, flags=re.M)
        source = source.replace("export default { render };", "const explorer = { render };")
        source = re.sub(r"^export (async function|function|class|const) ", r"\1 ", source, flags=re.M)
        if re.search(r"^\s*(import|export)\b", source, flags=re.M):
            raise RuntimeError(f"{name} has an import or export the static bundle cannot rewrite")
        parts.append(f"// ---- {name} ----\n{source}")
    return '"use strict";\n(() => {\n' + "\n".join(parts) + "\n})();\n"


def site_data() -> dict:
    presets = {}
    for name in LAB_PRESETS:
        request = TraceRequest(config=PRESETS[name].to_dict(), tokens=PRESET_TOKENS, seed=0, encoding="base64")
        presets[name] = json.loads(lab_payload(request).model_dump_json())
    return {"teaching": json.loads(teaching_payload("base64").model_dump_json()), "presets": presets}


def export_site(directory: Path) -> list[Path]:
    """Write index.html and static/ into `directory`; return the files written."""
    static = Path(directory) / "static"
    static.mkdir(parents=True, exist_ok=True)
    page = WEB.joinpath("index.html").read_text(encoding="utf-8")
    module_tag = '<script type="module" src="static/page.js"></script>'
    if module_tag not in page:
        raise RuntimeError("index.html no longer loads static/page.js as expected")
    page = page.replace(module_tag, '<script src="static/data.js"></script>\n<script src="static/app.js" defer></script>')
    written = {
        Path(directory) / "index.html": page,
        static / "page.css": WEB.joinpath("page.css").read_text(encoding="utf-8"),
        static / "explorer.css": WEB.joinpath("explorer.css").read_text(encoding="utf-8"),
        static / "app.js": bundle(),
        static / "data.js": "globalThis.MHA_DATA = " + json.dumps(site_data(), separators=(",", ":")) + ";\n",
    }
    for path, text in written.items():
        path.write_text(text, encoding="utf-8")
    return list(written)
