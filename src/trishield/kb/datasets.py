"""The public data sets TriShield evaluates on, read from the data directory.

Nothing here is committed to the project: each entry says where its file lives under the data
directory, the sha256 it must have, and where a user elsewhere can obtain it. Loaders turn each
corpus into :class:`Document` objects with stable, source-prefixed ids.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from trishield.config import data_dir
from trishield.errors import DatasetError
from trishield.kb.documents import Document, content_hash
from trishield.kb.loaders import iter_squad

WIKI5K_SIZE = 5000


@dataclass(frozen=True)
class Dataset:
    """One file of public evaluation data and how to get it."""

    name: str
    path: str
    sha256: str
    description: str
    source: str
    licence: str
    loader: Callable[[Path], Iterator[Document]] | None = None

    def location(self, root: Path | None = None) -> Path:
        return (root or data_dir()) / self.path

    def status(self, root: Path | None = None) -> dict[str, object]:
        """Where the file is and whether it matches its pinned sha256."""
        location = self.location(root)
        found = location.is_file()
        actual = file_sha256(location) if found else None
        return {
            "name": self.name,
            "path": str(location),
            "found": found,
            "sha256_ok": actual == self.sha256 if found else None,
            "sha256": actual,
            "expected_sha256": self.sha256,
            "description": self.description,
            "source": self.source,
            "licence": self.licence,
            "loadable": self.loader is not None,
        }

    def verified_path(self, root: Path | None = None) -> Path:
        """The file, after checking it exists and has the pinned sha256."""
        location = self.location(root)
        if not location.is_file():
            raise DatasetError(
                f"data set {self.name!r} not found at {location}. Obtain it from {self.source} "
                f"and place it there, or point TRISHIELD_DATA_DIR at a directory that has "
                f"{self.path}"
            )
        actual = file_sha256(location)
        if actual != self.sha256:
            raise DatasetError(
                f"data set {self.name!r} at {location} has sha256 {actual}, expected "
                f"{self.sha256}: the file is not the published one"
            )
        return location

    def documents(self, root: Path | None = None) -> Iterator[Document]:
        if self.loader is None:
            raise DatasetError(f"data set {self.name!r} holds questions or attacks, not passages")
        return self.loader(self.verified_path(root))


@cache
def _cached_sha256(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    stat = path.stat()
    return _cached_sha256(str(path), stat.st_size, stat.st_mtime_ns)


def _json(path: Path) -> object:
    with path.open("rb") as handle:
        return json.load(handle)


def _nq_gt_passages(path: Path) -> Iterator[Document]:
    for target_id, target in _json(path).items():
        for passage in target["gt_passages"]:
            yield Document(id=f"nq-gt:{passage['doc_id']}", text=passage["text"],
                           source=f"poisonedrag-nq-gt:{target_id}", origin=str(path))


def _poisonedrag_poisons(path: Path) -> Iterator[Document]:
    """The published attack texts, as PoisonedRAG builds them: ``question + ". " + adv_text``."""
    for target_id, target in _json(path).items():
        for number, adv_text in enumerate(target["adv_texts"]):
            yield Document(id=f"poison:{target_id}:{number}",
                           text=f"{target['question']}. {adv_text}",
                           source=f"poisonedrag-nq:{target_id}", origin=str(path))


def _squad_dev(path: Path) -> Iterator[Document]:
    return iter_squad(path, id_prefix="squad-dev:")


def _squadshifts(path: Path) -> Iterator[Document]:
    return iter_squad(path, id_prefix="squadshifts-new-wiki:")


def _nq_open_gold(path: Path) -> Iterator[Document]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for number, line in enumerate(handle):
            record = json.loads(line)
            gold = record["ctxs"][0]
            yield Document(id=f"nq-open:{number}", text=gold["text"], title=gold.get("title", ""),
                           source="nq-open-oracle", origin=f"{path}:{number + 1}")


def _hipporag_corpus(name: str) -> Callable[[Path], Iterator[Document]]:
    def load(path: Path) -> Iterator[Document]:
        corpus = _json(path)
        items = corpus.items() if isinstance(corpus, dict) else (
            (entry["title"], entry["text"]) for entry in corpus)
        for number, (title, text) in enumerate(items):
            body = "".join(text) if isinstance(text, list) else text
            yield Document(id=f"{name}:{number}", text=body, title=title, source=name,
                           origin=str(path))

    return load


DATASETS: dict[str, Dataset] = {
    dataset.name: dataset
    for dataset in (
        Dataset("poisonedrag-nq", "poisonedrag/nq.json",
                "44df711454a9bada08e72e9e4a003a2cc845c43707ac93a3493e5168ec415cf2",
                "PoisonedRAG black-box poisons: 100 NQ targets x 5 texts (question + '. ' + text)",
                "https://github.com/sleeepeer/PoisonedRAG results/adv_targeted_results/nq.json",
                "MIT", _poisonedrag_poisons),
        Dataset("poisonedrag-nq-gt", "poisonedrag/nq_gt_passages.json",
                "6fbda8e4d110ce3af6b2b57408746416d9942d4566000a52e8f5b4dcdd25d08d",
                "BEIR-NQ ground-truth passages of the 100 PoisonedRAG targets (118 passages)",
                "rebuilt from https://github.com/olliematthews/PoisonedRAG (BEIR NQ qrels)",
                "CC BY-SA 3.0", _nq_gt_passages),
        Dataset("squad-dev", "squad/dev-v1.1.json",
                "95aa6a52d5d6a735563366753ca50492a658031da74f301ac5238b03966972c9",
                "SQuAD v1.1 dev set: 2,067 paragraphs, 10,570 questions",
                "https://rajpurkar.github.io/SQuAD-explorer/ (dev-v1.1.json)",
                "CC BY-SA 4.0", _squad_dev),
        Dataset("squadshifts-new-wiki", "squadshifts/new_wiki_v1.0.json",
                "1d50a0ca4cdab88d038b52ea8a2d0510af6038d7f41a0a256b9659237769d0ee",
                "SQuADShifts new Wikipedia split: 1,581 paragraphs",
                "https://github.com/modestyachts/squadshifts-website",
                "CC BY 4.0", _squadshifts),
        Dataset("nq-open", "nq_open/nq-open-oracle.jsonl.gz",
                "6a7f72b846f663a133ef952244e5a4e43f06bcf190afe34e8fbe687ce0d1653e",
                "NQ-open questions with their gold Wikipedia passage (2,655)",
                "https://github.com/nelson-liu/lost-in-the-middle (nq-open-oracle.jsonl.gz)",
                "MIT; NQ CC BY-SA 3.0", _nq_open_gold),
        Dataset("hotpotqa", "hipporag/hotpotqa_train_corpus.json",
                "2671af600095eabc5b3f3bc3728861682f14fcced84ef1386509a8ae92647f88",
                "HotpotQA passage corpus (994 passages)",
                "https://github.com/OSU-NLP-Group/HippoRAG", "MIT",
                _hipporag_corpus("hotpotqa")),
        Dataset("musique", "hipporag/musique_train_corpus.json",
                "79845dd085f9df49c8ce440208763e2611aeb86c81ee0bdad2094504381bb651",
                "MuSiQue passage corpus (1,890 passages)",
                "https://github.com/OSU-NLP-Group/HippoRAG", "MIT",
                _hipporag_corpus("musique")),
        Dataset("2wikimultihopqa", "hipporag/2wikimultihopqa_corpus.json",
                "9d6e352952aafb18dab22bf8195039461321a44a949df902ae83bce134ad238a",
                "2WikiMultihopQA passage corpus (6,119 passages)",
                "https://github.com/OSU-NLP-Group/HippoRAG", "MIT",
                _hipporag_corpus("2wikimultihopqa")),
        Dataset("hotpotqa-questions", "hipporag/hotpotqa_train.json",
                "6c0e2689d03c94b3bb4d5f94ed806ea4f4eb4f46c12132f8e91df774ad5c5a22",
                "100 HotpotQA questions", "https://github.com/OSU-NLP-Group/HippoRAG", "MIT"),
        Dataset("musique-questions", "hipporag/musique_train.json",
                "bca674746844637f5c68408a96b67bc0542d98e7c53715f3acafe144bd5e4ff4",
                "100 MuSiQue questions", "https://github.com/OSU-NLP-Group/HippoRAG", "MIT"),
        Dataset("bipia-train", "bipia/text_attack_train.json",
                "63f95d3e67eac4178cdabdbdaf192cd05f2b6ed0702b578f1d30d556e5155670",
                "BIPIA indirect prompt-injection instructions (train, 15 x 5)",
                "https://github.com/microsoft/BIPIA", "MIT"),
        Dataset("bipia-test", "bipia/text_attack_test.json",
                "75750e7b4e8b34e8f9d88d89b357aeaaf02bd07f9e493ccd37eda74a0cd7c7f8",
                "BIPIA indirect prompt-injection instructions (test, 15 x 5)",
                "https://github.com/microsoft/BIPIA", "MIT"),
    )
}


def get_dataset(name: str) -> Dataset:
    try:
        return DATASETS[name]
    except KeyError:
        known = ", ".join(sorted([*DATASETS, "wiki5k"]))
        raise DatasetError(f"unknown data set {name!r}; known: {known}") from None


def wiki5k_documents(root: Path | None = None) -> list[Document]:
    """The "wiki5k" KB: exactly 5,000 distinct Wikipedia passages, chosen deterministically.

    In this order, keeping the first copy of each whitespace-normalised text: the 118
    PoisonedRAG-NQ ground-truth passages, the SQuAD dev paragraphs, the NQ-open gold passages;
    then SQuADShifts new_wiki paragraphs in file order until there are exactly 5,000.
    """
    chosen: list[Document] = []
    seen: set[str] = set()
    for name in ("poisonedrag-nq-gt", "squad-dev", "nq-open", "squadshifts-new-wiki"):
        for document in DATASETS[name].documents(root):
            if document.content_hash in seen:
                continue
            seen.add(document.content_hash)
            chosen.append(document)
            if len(chosen) == WIKI5K_SIZE:
                return chosen
    raise DatasetError(f"wiki5k needs {WIKI5K_SIZE} distinct passages, found only {len(chosen)}")


def load_named(name: str, root: Path | None = None) -> list[Document]:
    """Documents of a named corpus: any loadable entry of :data:`DATASETS`, or ``wiki5k``."""
    if name == "wiki5k":
        return wiki5k_documents(root)
    return list(get_dataset(name).documents(root))


__all__ = ["DATASETS", "Dataset", "content_hash", "get_dataset", "load_named",
           "wiki5k_documents"]
