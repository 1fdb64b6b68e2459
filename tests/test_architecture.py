"""The import rules of pyproject.toml's [tool.importlinter] hold (layers, independence).

They are written down there; this test makes a broken rule fail the suite with
import-linter's report, which names every offending import and its line.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINT = "from importlinter.cli import lint_imports_command; lint_imports_command()"


def test_import_contracts_are_kept() -> None:
    assert importlib.util.find_spec("importlinter"), "needs the dev extra: pip install -e '.[dev]'"
    # the source tree under test, not whatever trishield the interpreter has installed
    path = os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH")) if p)
    result = subprocess.run(
        [sys.executable, "-c", LINT, "--no-cache", "--no-logo", str(ROOT / "pyproject.toml")],
        cwd=ROOT, env=os.environ | {"PYTHONPATH": path, "COLUMNS": "120"},
        capture_output=True, text=True, timeout=300, check=False)
    report = result.stdout + result.stderr
    assert result.returncode == 0, f"import contracts broken (see pyproject.toml):\n{report}"
    assert "0 broken" in report, report
