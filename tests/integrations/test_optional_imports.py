"""The integrations are optional: ``import trishield`` loads none of the RAG libraries, and
importing an integration without its library says which extra to install."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SOURCE = Path(__file__).parents[2] / "src"
LIBRARIES = ("llama_index", "langchain_core", "haystack")


def python(code: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(SOURCE),
           "HOME": os.environ.get("HOME", "/tmp")}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=300, check=False)


def test_import_trishield_loads_no_rag_library() -> None:
    done = python("import sys, trishield, trishield.integrations.metadata, "
                  "trishield.integrations.source\n"
                  f"print(sorted(m for m in {LIBRARIES!r} if m in sys.modules))")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(("module", "library", "extra"), [
    ("llamaindex", "llama_index", "llamaindex"),
    ("langchain", "langchain_core", "langchain"),
    ("haystack", "haystack", "haystack"),
])
def test_a_missing_library_names_its_extra(module: str, library: str, extra: str) -> None:
    # a None entry in sys.modules makes every import of the library fail, as if absent
    done = python(f"import sys\nsys.modules[{library!r}] = None\n"
                  f"import trishield.integrations.{module}")
    assert done.returncode != 0
    assert f"ImportError: trishield.integrations.{module} needs" in done.stderr
    assert f"pip install 'trishield[{extra}]'" in done.stderr
