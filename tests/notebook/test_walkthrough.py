"""examples/walkthrough.ipynb runs headless, top to bottom, without an error."""

from __future__ import annotations

import shutil

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.notebook

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def code_cell(nb, snippet: str):
    (cell,) = [c for c in nb.cells if c.cell_type == "code" and snippet in c.source]
    return cell


def text_of(cell) -> str:
    parts = []
    for out in cell.outputs:
        parts.append(out.get("text", "") if out.output_type == "stream" else out.get("data", {}).get("text/plain", ""))
    return "".join(parts)


def test_the_notebook_is_stored_without_outputs(walkthrough):
    nb = nbformat.read(walkthrough, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata.kernelspec.name == "python3"
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, cell.source[:40]
    assert "widgets" not in nb.metadata  # no saved widget state


@pytest.mark.timeout(180)
def test_the_walkthrough_runs_headless(tmp_path, walkthrough, minilm_available):
    shutil.copy(walkthrough, tmp_path)
    nb = nbformat.read(tmp_path / walkthrough.name, as_version=4)
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()

    errors = [out for cell in nb.cells for out in cell.get("outputs", []) if out.output_type == "error"]
    assert errors == []
    for snippet in ("w = Explorer()", 'w.stage = "weights"', "gqa = Explorer.from_config"):
        (out,) = code_cell(nb, snippet).outputs
        assert WIDGET_VIEW in out.data, snippet  # a widget, not a text repr
    assert text_of(code_cell(nb, "w.stage, w.head")) == "('weights', 1, 3, 'milk')"
    assert "sum = 1.0" in text_of(code_cell(nb, "scores = K @ q"))
    real = code_cell(nb, "Explorer.from_model")
    if minilm_available:
        assert [WIDGET_VIEW in out.get("data", {}) for out in real.outputs] == [True]
    else:
        assert "The real model is not available here" in text_of(real)
