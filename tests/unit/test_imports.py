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
