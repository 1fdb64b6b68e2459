"""The embedder: a small encode (a question) runs on one torch thread and leaves the pool as
it was; a large one (passages at ingest) uses the pool; both give the same vectors."""

from __future__ import annotations

import numpy as np
import torch

from trishield.models import load_embedder
from trishield.models.embedders import DEFAULT_EMBEDDING_MODEL, SMALL_ENCODE


def test_small_encodes_run_on_one_thread_and_restore_the_pool() -> None:
    embedder = load_embedder(DEFAULT_EMBEDDING_MODEL)
    seen: list[int] = []
    hook = embedder.sentence_transformer.register_forward_pre_hook(
        lambda module, args: seen.append(torch.get_num_threads()))
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        texts = [f"passage number {i} about the river" for i in range(SMALL_ENCODE + 4)]
        one = embedder.encode(texts[:1])
        many = embedder.encode(texts)
        assert seen[0] == 1 and seen[-1] == 2
        assert torch.get_num_threads() == 2
        assert np.allclose(one[0], many[0], atol=1e-5)
    finally:
        hook.remove()
        torch.set_num_threads(previous)


def test_the_int8_encoder_agrees_with_fp32_and_keeps_the_input_order() -> None:
    int8, fp32 = load_embedder("all-MiniLM-L6-v2-int8"), load_embedder(DEFAULT_EMBEDDING_MODEL)
    texts = ["a short one", "the river Thames flows through London " * 12, "cats and dogs"]
    together = int8.encode(texts, batch_size=2)  # sorted by length inside, back in order
    alone = np.stack([int8.encode([text])[0] for text in texts])
    assert np.allclose(together, alone, atol=1e-4)
    assert np.all((together * fp32.encode(texts)).sum(axis=1) > 0.995)
    seen: list[int] = []
    int8.encode(texts * 5, batch_size=4, on_batch=lambda n, seconds: seen.append(n))
    assert seen == [4, 4, 4, 3]


def test_a_kb_encodes_with_the_model_it_records(tmp_path) -> None:
    """A KB embedded with one model answers queries with it, whatever the default: vectors
    of two models never meet in one index."""
    from trishield.errors import KnowledgeBaseError
    from trishield.kb import Document, KnowledgeBase

    with KnowledgeBase.open(tmp_path / "int8", create=True,
                            embedding_model="all-MiniLM-L6-v2-int8") as kb:
        kb.ingest([Document(id="a", text="The ferry leaves at nine from pier four.")])
    with KnowledgeBase.open(tmp_path / "int8") as kb:
        assert kb.embedder.name == "all-MiniLM-L6-v2-int8"
        assert kb.search("when does the ferry leave", backend="dense", k=1)[0].doc_id == "a"
    try:
        KnowledgeBase.open(tmp_path / "int8", embedding_model=DEFAULT_EMBEDDING_MODEL)
    except KnowledgeBaseError as refused:
        assert "embedding model" in str(refused)
    else:
        raise AssertionError("a KB opened with another embedding model must be refused")
    with KnowledgeBase.open(tmp_path / "fp32", create=True) as kb:
        assert kb.embedder.name == DEFAULT_EMBEDDING_MODEL


def test_a_question_is_encoded_once_for_retrieval_and_ring2() -> None:
    """Dense retrieval and Ring 2 both need the question's vector: the second asks the
    memo, gets the very same read-only vector, and the memo stays bounded."""
    from trishield.models.embedders import QUERY_MEMO

    for name in (DEFAULT_EMBEDDING_MODEL, "all-MiniLM-L6-v2-int8"):
        embedder = load_embedder(name)
        question = f"Which option sets the port ({name})?"
        first = embedder.encode_query(question)
        assert np.allclose(first, embedder.encode([question])[0], atol=1e-6)
        assert embedder.encode_query(question) is first
        assert not first.flags.writeable
        for number in range(QUERY_MEMO + 3):
            embedder.encode_query(f"question {number}")
        assert len(embedder.__dict__["_query_memo"]) == QUERY_MEMO
        assert embedder.encode_query(question) is not first  # the oldest was let go
