"""Importing TriShield changes nothing in its host process; the offline flags are set on demand."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trishield import config

SOURCE = Path(__file__).parents[1] / "src"

PROBE = """
import json, os, sys
before = dict(os.environ)
import trishield, trishield.settings
import trishield.cli, trishield.pipeline, trishield.settings_toml
print(json.dumps({"unchanged": dict(os.environ) == before,
                  "added": sorted(set(os.environ) - set(before))}))
"""


def test_import_leaves_the_environment_alone() -> None:
    clean = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(SOURCE)}
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          env=clean, timeout=120, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["unchanged"], f"import added {result['added']}"
    # which module may import which (settings and pipeline are independent) is checked by
    # the import contracts in tests/test_architecture.py


def test_enforce_offline_sets_only_what_the_user_left_unset(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for name in config.OFFLINE_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "true")
    config.enforce_offline()
    assert os.environ["HF_HUB_OFFLINE"] == "1" and os.environ["TRANSFORMERS_OFFLINE"] == "1"
    assert os.environ["TOKENIZERS_PARALLELISM"] == "true"


def test_loading_the_embedder_keeps_the_hub_libraries_offline() -> None:
    probe = ("from trishield.models.embedders import load_embedder\n"
             "load_embedder('all-MiniLM-L6-v2')\n"
             "import huggingface_hub.constants as hub\n"
             "print(hub.HF_HUB_OFFLINE)\n")
    clean = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(SOURCE),
             "HOME": os.environ.get("HOME", "/tmp")}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env=clean, timeout=300, check=True)
    assert done.stdout.strip().splitlines()[-1] == "True"
