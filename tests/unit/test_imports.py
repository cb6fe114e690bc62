"""DESIGN.md: no torch at run time. The core and its ways out import without torch or transformers."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.unit

MODULES = ["config", "weights", "trace", "costs", "examples", "narrative", "schema", "walkthrough", "cli"]


def test_core_imports_no_torch():
    code = (
        "import sys\n"
        + "".join(f"import mha_explorer.{m}\n" for m in MODULES)
        + "print(','.join(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'transformers'})))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"imported: {done.stdout.strip()}"


def test_the_package_says_its_version_as_the_command_line_does():
    import importlib.metadata

    import mha_explorer

    done = subprocess.run([sys.executable, "-m", "mha_explorer", "--version"], capture_output=True, text=True, timeout=120)
    assert mha_explorer.__version__ == importlib.metadata.version("mha-explorer")
    assert done.stdout.split()[-1] == mha_explorer.__version__
