"""Ring 1's S_out at ingest: measured against the KB's documents by other writers, never
against the batch, and calibrated so that one writer cannot move the baseline."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from screening_support import RecordingGuard
from trishield.demo import corpus_dir
from trishield.kb import Document, KnowledgeBase
from trishield.kb.screening import Neighbourhood, ReferenceSample, StoredNeighbour
from trishield.rings.ingest_guard import GuardVerdict, IngestGuard
from trishield.rings.outlier import stored_outlier_scores, writer_balanced_baseline

WRITERS = ("team-0", "team-1", "team-2")
ODD = [Document(id=f"odd-{i}", text="The mitochondrion is the powerhouse of the cell and makes "
                                     f"ATP by oxidative phosphorylation, step {i}.")
       for i in range(4)]
GIFT = Document(id="gift", text=(
    "Northwind gift cards never expire. Customers can spend them online or in any store, and "
    "support agents can check a card's balance after verifying the customer's email address."))


def _paragraphs() -> list[str]:
    return [p.strip() for f in sorted(corpus_dir().glob("*.md"))
            for p in f.read_text().split("\n\n")
            if len(p.split()) >= 12 and not p.startswith("#")]


@pytest.fixture(scope="module")
def base_kb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo corpus's paragraphs (about 67) as documents of three writers."""
    directory = tmp_path_factory.mktemp("outlier") / "base"
    documents = [Document(id=f"p{i}", text=text) for i, text in enumerate(_paragraphs())]
    with KnowledgeBase.open(directory, create=True) as kb:
        for number, writer in enumerate(WRITERS):
            kb.ingest(documents[number::3], writer=writer)
    return directory


@pytest.fixture
def kb_copy(base_kb: Path, tmp_path: Path):
    def copy(name: str) -> Path:
        return Path(shutil.copytree(base_kb, tmp_path / name))
    return copy


def _screen(directory: Path, batches: Sequence[Sequence[Document]],
            writer: str = "mallory") -> dict[str, GuardVerdict]:
    recording = RecordingGuard()
    with KnowledgeBase.open(directory) as kb:
        for batch in batches:
            kb.ingest(list(batch), writer=writer, guard=recording)
    return recording.verdicts


def test_the_same_documents_get_the_same_verdicts_however_the_batch_is_cut(kb_copy) -> None:
    documents = [*ODD[:3], GIFT]
    whole = _screen(kb_copy("whole"), [documents])
    single = _screen(kb_copy("single"), [[d] for d in documents])
    assert whole.keys() == single.keys() == {d.id for d in documents}
    for doc_id, verdict in whole.items():
        assert verdict.blocked == single[doc_id].blocked
        assert verdict.s_out == pytest.approx(single[doc_id].s_out, abs=1e-5)
    assert all(whole[d.id].s_out > 0.5 for d in ODD[:3]) and whole["gift"].s_out < 0.2


def test_a_document_is_not_its_own_its_batchs_or_its_writers_neighbour(kb_copy) -> None:
    # three near-copies in one batch: were they each other's neighbours, none would stand out
    together = _screen(kb_copy("together"), [ODD[:3]])
    assert all(v.s_out > 0.5 for v in together.values())
    # the writer's earlier near-copies are no neighbours either; another writer's are
    s_out = {}
    for writer in ("mallory", "eve"):
        directory = kb_copy(f"earlier-{writer}")
        with KnowledgeBase.open(directory) as kb:
            kb.ingest(ODD[:3], writer="mallory")  # unscreened: stored
        s_out[writer] = _screen(directory, [[ODD[3]]], writer=writer)["odd-3"].s_out
    same_writer, other_writer = s_out["mallory"], s_out["eve"]
    assert same_writer == pytest.approx(together["odd-0"].s_out, abs=0.05)
    assert other_writer < same_writer - 0.3


def test_a_flooding_writer_does_not_move_another_writers_verdict(kb_copy) -> None:
    before = _screen(kb_copy("before"), [[GIFT], [ODD[0]]], writer="carol")
    directory = kb_copy("flooded")
    with KnowledgeBase.open(directory) as kb:
        kb.ingest([Document(id=f"flood-{i}", text=f"ok thanks {i}") for i in range(120)],
                  writer="flooder")
    after = _screen(directory, [[GIFT], [ODD[0]]], writer="carol")
    assert after["gift"].blocked == before["gift"].blocked is False
    assert after["gift"].s_out == pytest.approx(before["gift"].s_out, abs=0.05)
    assert after["odd-0"].s_out > 0.5


def test_a_new_kb_gives_its_first_batch_no_s_out_and_says_why(tmp_path: Path) -> None:
    documents = [Document(id=f"p{i}", text=text) for i, text in enumerate(_paragraphs()[:30])]
    with KnowledgeBase.open(tmp_path / "new-kb", create=True):
        pass
    verdicts = _screen(tmp_path / "new-kb", [documents])
    assert all(v.s_out is None for v in verdicts.values())
    assert all(any("no S_out: the KB stores 0 documents" in r for r in v.reasons)
               for v in verdicts.values())


# -- without a model: a neighbourhood made of plain vectors -------------------------------


@dataclass
class _Vectors:
    """A :class:`Neighbourhood` over given document vectors (one chunk per document)."""

    writer: str
    vectors: np.ndarray
    writers: tuple[str, ...]

    def _pool(self, also_excluding: str | None) -> np.ndarray:
        keep = [w not in (self.writer, also_excluding) for w in self.writers]
        return self.vectors[np.array(keep, dtype=bool)]

    def document_count(self, *, also_excluding: str | None = None) -> int:
        return len(self._pool(also_excluding))

    def nearest(self, vectors: np.ndarray, k: int, *,
                also_excluding: str | None = None) -> np.ndarray:
        similarity = vectors @ self._pool(also_excluding).T
        return -np.sort(-similarity, axis=1)[:, :k]

    def reference(self) -> ReferenceSample:
        keep = np.array([w != self.writer for w in self.writers], dtype=bool)
        return ReferenceSample(self.vectors[keep],
                               tuple(w for w in self.writers if w != self.writer))

    def nearest_documents(self, vectors: np.ndarray, k: int) -> list[list[StoredNeighbour]]:
        return [[] for _ in vectors]  # vectors without texts: nothing to align


def _cluster(count: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=16) + 0.3 * rng.normal(size=(count, 16))
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def test_s_out_needs_documents_by_two_other_writers() -> None:
    vectors = _cluster(60, 0)
    probe = _cluster(1, 1)
    one_writer: Neighbourhood = _Vectors("mallory", vectors, ("alice",) * 60)
    result = stored_outlier_scores(probe, one_writer)
    assert result.scores is None and "at least two writers other than 'mallory'" in result.note
    too_few = stored_outlier_scores(probe, _Vectors("mallory", vectors[:10], ("alice",) * 10))
    assert too_few.scores is None and "10 documents by writers other than" in too_few.note
    two = stored_outlier_scores(probe, _Vectors("mallory", vectors, ("alice", "bob") * 30))
    assert two.note is None and two.scores.shape == (1,)
    verdict = IngestGuard().screen(["x"], ["A plain sentence."], tiers=["neutral"],
                                   embeddings=probe, neighbourhood=one_writer)[0]
    assert verdict.s_out is None and any(r.startswith("no S_out") for r in verdict.reasons)


def test_one_writer_is_one_vote_in_the_baseline() -> None:
    rng = np.random.default_rng(0)
    clean = [0.5 + 0.05 * rng.normal(size=50) for _ in range(5)]
    centre, sigma = writer_balanced_baseline(clean)
    flooded = writer_balanced_baseline([*clean, np.full(5000, 0.99)])
    assert abs(flooded[0] - centre) < 0.02 and flooded[1] == pytest.approx(sigma, rel=0.3)
