"""The data-set registry against the real data directory, and its sha256 / missing-file checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from trishield.config import DATA_DIR_ENV, data_dir
from trishield.errors import DatasetError
from trishield.kb.datasets import (
    DATASETS,
    WIKI5K_SIZE,
    Dataset,
    get_dataset,
    load_named,
    wiki5k_documents,
)
from trishield.kb.documents import Document
from trishield.kb.loaders import check_unique_ids, validate_document

WIKI5K_PARTS = ("nq-gt", "squad-dev", "nq-open", "squadshifts-new-wiki")
PASSAGE_COUNTS = {
    "poisonedrag-nq": 500,
    "poisonedrag-nq-gt": 118,
    "squad-dev": 2067,
    "squadshifts-new-wiki": 1581,
    "nq-open": 2655,
    "hotpotqa": 994,
    "musique": 1890,
    "2wikimultihopqa": 6119,
}


@pytest.fixture(scope="module")
def real_data_dir() -> Path:
    root = data_dir()
    if not root.is_dir() or not any(ds.location(root).is_file() for ds in DATASETS.values()):
        pytest.skip(f"evaluation data not present at {root}")
    return root


@pytest.fixture(scope="module")
def wiki5k(real_data_dir: Path) -> list[Document]:
    return wiki5k_documents(real_data_dir)


def corrupt_copy(source: Path, target: Path) -> None:
    """Copy ``source`` to ``target`` with one letter in the middle changed (still valid JSON)."""
    data = bytearray(source.read_bytes())
    middle = len(data) // 2
    position = next(i for i in range(middle, len(data)) if data[i] == ord("e"))
    data[position] = ord("f")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(bytes(data))


# ------------------------------------------------------------------------------ real data set


@pytest.mark.parametrize("name", list(DATASETS))
def test_every_dataset_is_present_and_verified(real_data_dir: Path, name: str) -> None:
    dataset = DATASETS[name]
    status = dataset.status()
    assert status["found"] is True, status
    assert status["sha256_ok"] is True, status
    assert status["sha256"] == dataset.sha256
    assert status["path"] == str(real_data_dir / dataset.path)
    assert status["loadable"] is (dataset.loader is not None)
    assert dataset.verified_path() == real_data_dir / dataset.path


def test_registry_entries_are_well_formed() -> None:
    for name, dataset in DATASETS.items():
        assert dataset.name == name
        assert len(dataset.sha256) == 64
        assert int(dataset.sha256, 16) >= 0
        assert not Path(dataset.path).is_absolute()
        assert dataset.source and dataset.licence and dataset.description
    assert {n for n, d in DATASETS.items() if d.loader is not None} == set(PASSAGE_COUNTS)


@pytest.mark.parametrize("name", sorted(PASSAGE_COUNTS))
def test_loadable_datasets_give_valid_unique_documents(real_data_dir: Path, name: str) -> None:
    documents = load_named(name)
    assert len(documents) == PASSAGE_COUNTS[name]
    assert check_unique_ids(documents) == documents
    for document in documents:
        validate_document(document, path=document.origin)


def test_question_sets_are_not_loadable(real_data_dir: Path) -> None:
    with pytest.raises(DatasetError, match="holds questions or attacks, not passages"):
        load_named("bipia-test")


def test_unknown_dataset_lists_the_known_ones() -> None:
    with pytest.raises(DatasetError) as caught:
        get_dataset("no-such-set")
    message = str(caught.value)
    assert "unknown data set 'no-such-set'" in message
    assert "wiki5k" in message
    assert all(name in message for name in DATASETS)
    with pytest.raises(DatasetError, match="unknown data set"):
        load_named("no-such-set")


# ------------------------------------------------------------------------------------ wiki5k


def test_wiki5k_has_5000_distinct_documents(wiki5k: list[Document]) -> None:
    assert WIKI5K_SIZE == 5000
    assert len(wiki5k) == 5000
    assert len({d.id for d in wiki5k}) == 5000
    assert len({d.content_hash for d in wiki5k}) == 5000


def test_wiki5k_is_deterministic(real_data_dir: Path, wiki5k: list[Document]) -> None:
    again = load_named("wiki5k")
    assert [d.id for d in again] == [d.id for d in wiki5k]
    assert [d.content_hash for d in again] == [d.content_hash for d in wiki5k]


def test_wiki5k_holds_every_ground_truth_passage_first(real_data_dir: Path,
                                                        wiki5k: list[Document]) -> None:
    ground_truth = [d.id for d in load_named("poisonedrag-nq-gt")]
    assert len(ground_truth) == 118
    assert all(i.startswith("nq-gt:") for i in ground_truth)
    in_kb = [d.id for d in wiki5k if d.id.startswith("nq-gt:")]
    assert len(in_kb) == 118
    assert set(in_kb) == set(ground_truth)
    assert [d.id for d in wiki5k[:118]] == ground_truth


def test_wiki5k_keeps_the_documented_source_order(wiki5k: list[Document]) -> None:
    ranks = [WIKI5K_PARTS.index(d.id.split(":", 1)[0]) for d in wiki5k]
    assert ranks == sorted(ranks)
    assert set(ranks) == set(range(len(WIKI5K_PARTS)))


def test_wiki5k_documents_pass_loader_validation(wiki5k: list[Document]) -> None:
    for document in wiki5k:
        validate_document(document, path=document.origin)


# ------------------------------------------------------------------- sha256 and missing files


def test_one_changed_byte_fails_the_sha256_check(real_data_dir: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    dataset = DATASETS["poisonedrag-nq-gt"]
    other = DATASETS["poisonedrag-nq"]
    root = tmp_path / "data"
    corrupt_copy(real_data_dir / dataset.path, root / dataset.path)
    (root / other.path).write_bytes((real_data_dir / other.path).read_bytes())
    monkeypatch.setenv(DATA_DIR_ENV, str(root))
    assert data_dir() == root.resolve()

    with pytest.raises(DatasetError) as caught:
        dataset.verified_path()
    message = str(caught.value)
    assert "sha256" in message
    assert dataset.sha256 in message
    assert str(root.resolve() / dataset.path) in message

    status = dataset.status()
    assert (status["found"], status["sha256_ok"]) == (True, False)
    assert status["sha256"] != dataset.sha256
    with pytest.raises(DatasetError, match="sha256"):
        list(dataset.documents())
    with pytest.raises(DatasetError, match="sha256"):
        wiki5k_documents()

    # The intact copy next to it still verifies: the check is per file, not per directory.
    assert other.verified_path() == root.resolve() / other.path
    assert len(load_named("poisonedrag-nq")) == 500


def test_explicit_root_overrides_the_environment(real_data_dir: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    dataset = DATASETS["bipia-train"]
    corrupt_copy(real_data_dir / dataset.path, tmp_path / dataset.path)
    monkeypatch.setenv(DATA_DIR_ENV, str(real_data_dir))
    assert dataset.verified_path() == real_data_dir / dataset.path
    with pytest.raises(DatasetError, match="sha256"):
        dataset.verified_path(tmp_path)


def test_missing_file_says_where_to_obtain_it(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty-data"
    empty.mkdir()
    monkeypatch.setenv(DATA_DIR_ENV, str(empty))
    for dataset in DATASETS.values():
        with pytest.raises(DatasetError) as caught:
            dataset.verified_path()
        message = str(caught.value)
        assert "not found" in message
        assert str(empty.resolve() / dataset.path) in message
        assert dataset.source in message
        assert DATA_DIR_ENV in message
        status = dataset.status()
        assert (status["found"], status["sha256_ok"], status["sha256"]) == (False, None, None)
    with pytest.raises(DatasetError, match="Obtain it from"):
        wiki5k_documents()


def test_dataset_location_uses_the_given_root(tmp_path: Path) -> None:
    dataset = Dataset("x", "sub/x.json", "0" * 64, "d", "https://example.org", "MIT")
    assert dataset.location(tmp_path) == tmp_path / "sub" / "x.json"
    with pytest.raises(DatasetError, match="holds questions or attacks"):
        dataset.documents(tmp_path)
