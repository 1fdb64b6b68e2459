"""How every integration reads provenance from metadata (``trishield/integrations/
metadata.py``) and serves a user's search to a whole defense (``integrations/source.py``)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from trishield.defenses.retrievers import Passage
from trishield.errors import InputError
from trishield.integrations.metadata import (
    Found,
    MetadataKeys,
    ScreenOptions,
    to_passage,
    with_relevance,
)
from trishield.integrations.source import FoundRetriever
from trishield.models.embedders import DEFAULT_EMBEDDING_MODEL

KEYS = MetadataKeys()


def passage(meta: dict, **found: object):
    return to_passage(Found(**{"id": "p1", "text": "Some text.", "metadata": meta, **found}),
                      KEYS, "neutral")


def test_documented_defaults_for_missing_provenance() -> None:
    bare = passage({})
    assert (bare.tier, bare.writer, bare.doc_id, bare.title, bare.ingested_at) == \
        ("neutral", "p1", "p1", "", None)
    filed = passage({"file_path": "/data/guides/paris.md"}, parent_id="parent-7")
    assert (filed.writer, filed.doc_id, filed.title) == \
        ("/data/guides/paris.md", "parent-7", "paris.md")
    given = passage({"tier": "trusted", "writer": "alice", "doc_id": 42, "title": "Policy",
                     "source": "x.md", "score": 0.5})
    assert (given.tier, given.writer, given.doc_id, given.title, given.score) == \
        ("trusted", "alice", "42", "Policy", 0.5)
    assert passage({"score": 0.5}, score=0.9).score == 0.9  # the library's own score wins
    untrusted = to_passage(Found("p1", "Some text.", {}), KEYS, "untrusted")
    assert untrusted.tier == "untrusted"


@pytest.mark.parametrize("value", [1704877200, 1704877200.0, "2024-01-10T09:00:00Z",
                                   "2024-01-10T09:00:00", datetime(2024, 1, 10, 9, tzinfo=UTC)])
def test_ingest_time_in_every_usual_form(value: object) -> None:
    assert passage({"ingested_at": value}).ingested_at == 1704877200.0


@pytest.mark.parametrize(("meta", "message"), [
    ({"tier": "gold"}, "metadata 'tier' must be one of trusted, neutral, untrusted"),
    ({"tier": 2}, "metadata 'tier' must be one of"),
    ({"writer": ["alice"]}, "metadata 'writer' must be a string, got list"),
    ({"source": 3}, "metadata 'source' must be a string"),
    ({"ingested_at": "yesterday"}, "'ingested_at' is not an ISO 8601 time"),
    ({"ingested_at": float("inf")}, "'ingested_at' must be Unix seconds"),
    ({"ingested_at": True}, "'ingested_at' must be Unix seconds"),
    ({"score": "high"}, "score must be a finite number"),
])
def test_bad_metadata_names_the_passage_and_the_key(meta: dict, message: str) -> None:
    with pytest.raises(InputError, match=message) as raised:
        passage(meta)
    assert "'p1'" in str(raised.value)


def test_keys_and_options_are_checked() -> None:
    assert passage({"level": "trusted"}).tier == "neutral"
    renamed = to_passage(Found("p1", "Some text.", {"level": "trusted"}),
                         MetadataKeys(tier="level"), "neutral")
    assert renamed.tier == "trusted"
    with pytest.raises(InputError, match="metadata key for tier"):
        MetadataKeys(tier="")
    with pytest.raises(InputError, match="tuple of non-empty strings"):
        MetadataKeys(sources="source")
    with pytest.raises(InputError, match="default_tier must be one of"):
        ScreenOptions(default_tier="gold")
    with pytest.raises(InputError, match="keys must be a MetadataKeys"):
        ScreenOptions(keys={"tier": "level"})
    with pytest.raises(InputError, match="metadata must be a mapping"):
        passage(["tier"])


def test_found_retriever_serves_one_result_set_with_provenance() -> None:
    results = {"q": [Found("a", "Alpha text here.", {"tier": "trusted"}, 0.9),
                     Found("b", "Beta text here.", {"source": "b.md"}, 0.4)]}
    retriever = FoundRetriever(lambda query: results.get(query, []))
    candidates = retriever.retrieve("q", 5)
    assert [(c.chunk_id, c.chunk.tier, c.chunk.writer) for c in candidates] == \
        [("a#0", "trusted", "a"), ("b.md#0", "neutral", "b.md")]
    assert retriever.unknown_terms("alpha gamma") == ["gamma"]
    assert retriever.retrieve("nothing", 5) == [] and retriever.embeddings([]) is None
    with pytest.raises(InputError, match="must return Found passages"):
        FoundRetriever(lambda query: [{"id": "a"}]).retrieve("q", 5)


def test_relevance_is_scored_only_when_the_retriever_gave_none() -> None:
    texts = ["The museum opens at nine on weekdays.", "Penguins live in the southern ocean."]
    bare = [Passage(id=f"p{i}", text=t) for i, t in enumerate(texts)]
    scored = with_relevance("When does the museum open?", bare, DEFAULT_EMBEDDING_MODEL)
    assert scored[0].score > 0.4 > 0.1 > scored[1].score  # cosine: on topic, off topic
    assert [p.text for p in scored] == texts
    some = [bare[0], Passage(id="p1", text=texts[1], score=0.9)]
    assert with_relevance("When does the museum open?", some, DEFAULT_EMBEDDING_MODEL) == some
