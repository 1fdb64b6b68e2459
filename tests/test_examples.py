"""examples/: every file runs as written (in this process, as ``__main__``, from a scratch
directory) and prints what its docstring promises: the poison removed, the true answer kept.

They use the extractive reader or Rings 1-2 alone, so no LLM is loaded; the integrations'
examples need their extras, which `make install` installs (the ``dev`` extra)."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run_example(name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                capsys: pytest.CaptureFixture[str]) -> list[str]:
    monkeypatch.chdir(tmp_path)  # an example must not depend on, or write to, the checkout
    runpy.run_path(str(EXAMPLES / name), run_name="__main__")
    assert not list(tmp_path.iterdir()), "an example leaves nothing behind"
    return capsys.readouterr().out.splitlines()


def test_every_example_is_tested() -> None:
    tested = {"python_api.py", "langchain_retriever.py", "llamaindex_postprocessor.py",
              "haystack_ranker.py"}
    assert {p.name for p in EXAMPLES.glob("*.py")} == tested


@pytest.mark.slow
def test_python_api(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                    capsys: pytest.CaptureFixture[str]) -> None:
    out = run_example("python_api.py", monkeypatch, tmp_path, capsys)
    assert out[0] == "stored ['refunds', 'shipping']; quarantined ['forum/refunds']"
    assert "30 days" in out[1] and "90" not in out[1]
    assert out[2] == "citations: ['refunds']"
    assert "forum/refunds" not in out[3]
    assert out[4:] == ["kept: ['policy']", "removed: ['forum-post']"]


def _kept_and_removed(out: list[str]) -> tuple[list[str], str]:
    kept = [line.split()[1].rstrip(":") for line in out if line.startswith("kept ")]
    removed = next(line for line in out if line.startswith("removed:"))
    return kept, removed


@pytest.mark.slow
@pytest.mark.parametrize("name", ["langchain_retriever.py", "llamaindex_postprocessor.py",
                                  "haystack_ranker.py"])
def test_integration_drops_the_poison(name: str, monkeypatch: pytest.MonkeyPatch,
                                      tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = run_example(name, monkeypatch, tmp_path, capsys)
    kept, removed = _kept_and_removed(out)
    assert removed == "removed: ['poison']"
    assert "poison" not in kept
    # the trusted article and the guide stand above the passage about another subject
    assert set(kept[:3]) == {"wiki-1", "wiki-2", "guide-1"}
    if name == "langchain_retriever.py":  # the Runnable answers with all three rings
        assert "15 May 1889" in out[-2] and "1925" not in out[-2]
        assert out[-1] == "citations: ['eiffel-article']"
