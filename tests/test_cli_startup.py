"""Commands that need no model start without importing one (docs/speed.md).

Each command runs in a fresh interpreter, which then reports the libraries it imported: a
timing would depend on the machine's load, the set of imported modules does not. How long
the commands take is measured by benchmarks/speed.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trishield.kb import KnowledgeBase

SOURCE = Path(__file__).parents[1] / "src"

MODEL_LIBRARIES = ("torch", "transformers", "sentence_transformers", "tokenizers",
                   "huggingface_hub", "onnxruntime", "xllamacpp", "llama_cpp", "sklearn",
                   "scipy", "faiss", "bm25s", "ragdefender", "accelerate", "fastapi")
"""What loads a model or an index: seconds of imports that a listing never needs."""

NOT_FOR_HELP = ("numpy", "pydantic")
"""Commands that open nothing need not even these."""

PROBE = """
import json, runpy, sys
sys.argv = ["trishield", *json.loads(sys.argv[1])]
code = 0
try:
    runpy.run_module("trishield.cli", run_name="__main__")
except SystemExit as stop:
    code = stop.code or 0
libraries = sorted({name.split(".")[0] for name in sys.modules})
print(json.dumps({"code": code, "libraries": libraries}), file=sys.stderr)
"""


def _imported(arguments: list[str]) -> set[str]:
    environment = {**os.environ, "PYTHONPATH": str(SOURCE), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(arguments)],
                          capture_output=True, text=True, env=environment, timeout=120,
                          check=False)
    report = json.loads(done.stderr.strip().splitlines()[-1])
    assert report["code"] == 0, done.stdout + done.stderr
    return set(report["libraries"])


@pytest.mark.parametrize("arguments", [
    ["--help"], ["--version"], ["documents", "--help"], ["quarantine", "--help"],
    ["keys", "--help"], ["config", "--help"], ["ingest", "--help"], ["serve", "--help"],
])
def test_help_and_version_import_no_model_library(arguments: list[str]) -> None:
    loaded = _imported(arguments)
    assert not loaded & {*MODEL_LIBRARIES, *NOT_FOR_HELP}, sorted(
        loaded & {*MODEL_LIBRARIES, *NOT_FOR_HELP})


@pytest.fixture(scope="module")
def kb_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("startup") / "kb"
    KnowledgeBase.open(directory, create=True).close()  # opening and listing embed nothing
    return directory


@pytest.mark.parametrize("command", [
    ["documents", "list"], ["quarantine", "list"], ["keys", "list"], ["info"],
])
def test_listing_a_kb_imports_no_model_library(kb_dir: Path, command: list[str]) -> None:
    loaded = _imported([*command, "--kb", str(kb_dir)])
    assert not loaded & set(MODEL_LIBRARIES), sorted(loaded & set(MODEL_LIBRARIES))


@pytest.mark.parametrize("command", [["config", "show"], ["config", "show", "--json"]])
def test_config_imports_no_model_library(command: list[str]) -> None:
    loaded = _imported(command)
    assert not loaded & set(MODEL_LIBRARIES), sorted(loaded & set(MODEL_LIBRARIES))
