"""`mha-explorer export-site`: the files it writes."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from mha_explorer.cli import main

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
    data = json.loads((site / "static/data.js").read_text().removeprefix("globalThis.MHA_DATA = ").rstrip(";\n"))
    assert set(data["presets"]) == {"mha", "causal", "gqa", "mqa"}
    assert [data["presets"][p]["config"]["kind"] for p in ("mha", "causal", "gqa", "mqa")] == ["MHA", "MHA", "GQA", "MQA"]
    assert data["teaching"]["tokens"] == ["cats", "like", "warm", "milk"]


def test_export_site_to_an_unwritable_place_says_so(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = CliRunner().invoke(main, ["export-site", str(blocker / "site")])
    assert result.exit_code == 2
    assert "Traceback" not in result.output
