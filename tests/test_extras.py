"""The package's extras: what answering needs is a runtime dependency, the rest (baselines,
benchmarks, search engines, RAG libraries, telemetry) an extra, imported only where it is
used and, when missing, named in the error (``pip install 'trishield[EXTRA]'``).
tests/test_wheel_install.py checks it on an installed wheel without the extras."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from trishield.errors import MissingExtraError, ModelError, require_extra

ROOT = Path(__file__).resolve().parents[1]


def test_require_extra_names_the_extra_and_what_is_missing() -> None:
    require_extra("the test", "eval", ["json", "ast"])  # present: nothing happens
    with pytest.raises(MissingExtraError) as raised:
        require_extra("the RAGDefender baseline", "eval",
                      ["json", "trishield_no_such_module"])
    assert str(raised.value) == (
        "the RAGDefender baseline needs trishield_no_such_module, which TriShield's runtime "
        "does not install: pip install 'trishield[eval]'")
    assert raised.value.missing == ("trishield_no_such_module",)
    assert isinstance(raised.value, ModelError)  # the CLI prints it as one line, exit 4


def test_pyproject_keeps_baselines_out_of_the_runtime() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    runtime = " ".join(project["dependencies"]).lower()
    extras = project["optional-dependencies"]
    for name in ("ragdefender", "accelerate", "gguf"):
        assert name not in runtime
        assert any(spec.startswith(name) for spec in extras["eval"])
    assert "trishield[eval,milvus,llamaindex,langchain,haystack]" in extras["bench"]
    dev = " ".join(extras["dev"])  # `make install` installs the dev extra for the tests
    for extra in ("eval", "milvus", "llamaindex", "otel", "build"):
        assert extra in dev

