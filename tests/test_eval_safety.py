"""Smoke run of ``trishield eval safety --quick``: the report is complete, internally
consistent, and byte-identical when run again. It asserts no ASR or accuracy value."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from trishield.eval.safety import _benign_correct, calibrate_floor

pytestmark = pytest.mark.slow


def _run(out: Path, work: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trishield.cli", "eval", "safety", "--quick", "--out", str(out),
         "--work-dir", str(work), "--panel", "extractive"],
        capture_output=True, text=True, timeout=900, check=False)


def test_quick_safety_report_is_complete_consistent_and_reproducible(tmp_path: Path) -> None:
    first = _run(tmp_path / "a", tmp_path / "work")
    assert first.returncode == 0, first.stderr[-2000:]
    report = json.loads((tmp_path / "a" / "report.json").read_text())
    assert (tmp_path / "a" / "report.html").read_text().startswith("<!DOCTYPE html>")
    assert report["scoring_version"] and len(report["suite"]["sha256"]) == 2
    counts = report["suite"]["counts"]
    assert set(report["results"]) == {"dense", "bm25", "hybrid"}
    for backend, by_defense in report["results"].items():
        assert set(by_defense) == {"none", "ring1", "full"}
        assert "floor" in report["calibration"][backend]
        for result in by_defense.values():
            attacks = result["attacks"]
            assert sum(attacks["counts"].values()) == attacks["total"] == counts["attacks"]
            assert len(attacks["cases"]) == counts["attacks"]
            for case in attacks["cases"]:
                assert case["poisons"]
                poisoned = bool(set(case["poisons"]) & set(case["context"]))
                if case["outcome"] == "blocked":
                    assert not poisoned
                if case["outcome"] == "evaded":
                    assert poisoned
            unanswerable = result["unanswerable"]
            assert unanswerable["total"] == counts["unanswerable"]
            assert sum(c["refused"] for c in unanswerable["cases"]) == unanswerable["refused"]
            benign = result["benign"]
            assert benign["total"] == counts["benign"] == len(benign["cases"])
            assert benign["correct"] == sum(c["correct"] for c in benign["cases"])
            assert benign["false_refusals"] == sum(c["refused"] for c in benign["cases"])
    assert set(report["targets"]) == {"dense", "bm25", "hybrid"}
    assert set(report["retrieval"]["recall_at_3"]) == {"dense", "bm25", "hybrid"}
    assert report["qa_slice"]["questions"] > 0

    second = _run(tmp_path / "b", tmp_path / "work")
    assert second.returncode == 0, second.stderr[-2000:]
    for name in ("report.json", "report.html"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_refusal_floor_calibration_by_hand() -> None:
    result = calibrate_floor([0.8, 0.7, 0.6], [0.2, 0.3, 0.65])
    # floors between 0.3 and 0.6 make 1 error (0.65 answered); 0.625..0.675 make 1 too
    # (0.6 refused); the lowest floor with the fewest errors wins
    assert result["floor"] == pytest.approx((0.3 + 0.6) / 2)
    best = min(p["false_refusals"] + p["unanswerable_answered"] for p in result["curve"])
    assert best == 1 and result["answerable"] == 3 and result["unanswerable"] == 3


def test_benign_answers_are_scored_by_gold_span_or_by_polarity() -> None:
    question = "Can opened software be refunded?"
    gold = "Opened software is not refundable"
    assert _benign_correct("No", gold, question) and not _benign_correct("Yes", gold, question)
    assert _benign_correct("No. Opened software is not refundable.", gold, question)
    assert not _benign_correct("No, it can be refunded within 30 days", gold, question)
    assert not _benign_correct(None, gold, question) and not _benign_correct("", gold, question)
