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
