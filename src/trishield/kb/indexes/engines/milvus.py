"""Milvus as a knowledge base's search engine: dense (cosine) and BM25 full text in one collection.

For KBs that outgrow one machine. The SQLite store keeps provenance, tiers, quarantine and the
audit log; the Milvus collection holds, per chunk row id, the embedding and the chunk's index
terms (:mod:`trishield.kb.indexes.engines.terms`), from which a server-side BM25 function derives a
sparse vector. A URI ending in ``.db`` is Milvus Lite (an embedded engine in a local folder, for
tests and CI); ``http(s)://host:19530`` is a Milvus server or cluster (or Zilliz Cloud). The
same code path serves both.

Writes are upserts keyed by the row id (adding a row twice leaves one), deletes of unknown ids
are no-ops, and every read uses ``Strong`` consistency so a search right after a write sees it.
``pymilvus`` is imported when a backend is constructed, never at module import.

Over 500 lines on purpose: one client class, :class:`MilvusBackend`, the only code that speaks
to Milvus (schema, writes, both searches, positions, consistency); it is optional and read as
one unit by whoever changes the engine.
"""

from __future__ import annotations

import logging
import os
import re
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import numpy as np

from trishield.errors import InputError, KnowledgeBaseError
from trishield.kb.indexes.engines.terms import TERMS_ANALYZER, engine_terms
from trishield.text import index_terms

TOKEN_ENV = "TRISHIELD_MILVUS_TOKEN"
"""Where the token (``user:password`` or an API key) is read from; it is never a parameter
that could end up in a settings file or a log line."""
SCHEMA_VERSION = "1"
INDEX_KINDS: dict[str, tuple[str, dict[str, int]]] = {
    "flat": ("FLAT", {}),
    "hnsw": ("HNSW", {"M": 32, "efConstruction": 200}),
    "ivf": ("IVF_FLAT", {"nlist": 256}),
}
"""TriShield's name -> Milvus index type and build parameters (HNSW as the embedded index)."""
HNSW_EF_SEARCH = 128
IVF_NPROBE = 32
BM25_K1 = 1.2
BM25_B = 0.75
"""FTS5's ``bm25()`` parameters, so Milvus ranks like the embedded lexical index (a collection
made before keeps the parameters it was made with)."""
MAX_TOPK = 16384
"""Milvus's limit on ``limit`` (top-k) per search."""
MAX_TERMS_BYTES = 65535
"""The VARCHAR field's ``max_length``, Milvus's largest."""
WRITE_BATCH = 1000
"""Rows per upsert request: well under gRPC's message limits at any embedding size we ship."""
TIMEOUT_S = 10.0

ID_FIELD = "id"
VECTOR_FIELD = "vector"
TERMS_FIELD = "terms"
SPARSE_FIELD = "sparse"
BM25_FUNCTION = "trishield_bm25"
POSITION_PROPERTY = "trishield.position"
OWNER_PROPERTY = "trishield.kb"
_COLLECTION_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,254}")
_SERVER_SCHEMES = ("http", "https", "tcp", "unix")
log = logging.getLogger("trishield.kb.indexes.engines.milvus")
_LITE_USERS: dict[str, int] = {}
"""Open backends per Milvus Lite folder in this process. Milvus Lite runs one server per
folder per process and keeps it (and the folder's lock) until the process exits; the last
backend to close stops it, so another process can open the folder next."""


def redact(uri: str) -> str:
    """``uri`` with any ``user:password@`` removed: what messages and logs may show."""
    parsed = urllib.parse.urlsplit(uri)
    if parsed.username is None and parsed.password is None:
        return uri
    host = parsed.hostname or ""
    if parsed.port is not None:
        host = f"{host}:{parsed.port}"
    return urllib.parse.urlunsplit((parsed.scheme, host, parsed.path, parsed.query,
                                    parsed.fragment))


def is_lite(uri: str) -> bool:
    """True for a Milvus Lite path (pymilvus's rule: the URI ends in ``.db``)."""
    return uri.endswith(".db")


def check_uri(uri: str) -> str:
    """The URI, or an :class:`InputError` saying what is wrong with it (checked before any
    connection is tried, so a typo is not reported as an unreachable server)."""
    if not isinstance(uri, str) or not uri.strip():
        raise InputError("the Milvus URI is empty; give a local path ending in .db "
                         "(Milvus Lite) or http://host:19530")
    uri = uri.strip()
    if is_lite(uri):
        parent = Path(uri).expanduser().parent
        if not parent.is_dir():
            raise InputError(f"the folder for the Milvus Lite database does not exist: {parent}",
                             path=uri)
        if Path(uri).expanduser().is_file():
            raise InputError("a Milvus Lite database is a folder, but a file is there "
                             "(an older milvus-lite format, or not Milvus at all)", path=uri)
        return str(Path(uri).expanduser())
    scheme = urllib.parse.urlsplit(uri).scheme.lower()
    if scheme not in _SERVER_SCHEMES:
        raise InputError(f"unsupported Milvus URI {redact(uri)!r}: give a local path ending "
                         f"in .db (Milvus Lite) or a {'/'.join(_SERVER_SCHEMES)} URI "
                         "(e.g. http://host:19530)")
    return uri


def check_collection_name(collection: str) -> str:
    """The collection name, or an :class:`InputError` naming Milvus's rule."""
    if not isinstance(collection, str) or not _COLLECTION_NAME.fullmatch(collection):
        raise InputError(f"invalid Milvus collection name {collection!r}: letters, digits "
                         "and underscores, not starting with a digit, at most 255")
    return collection


def _pymilvus() -> Any:
    """The pymilvus module, or a :class:`KnowledgeBaseError` that says how to install it."""
    try:
        import pymilvus
    except ImportError:
        raise KnowledgeBaseError(
            "the Milvus engine needs pymilvus (and milvus-lite for a local .db): "
            "pip install 'trishield[milvus]'") from None
    return pymilvus


class MilvusBackend:
    """One Milvus collection holding a KB's chunk vectors and index terms.

    Implements ``trishield.kb.indexes.backend.IndexBackend``, plus ``ids`` and ``vectors_of``
    for :mod:`trishield.kb.indexes.engines.sync`'s consistency check.

    Its ``position`` (the chunk change-log position it reflects) lives in the collection's
    properties, next to the rows it describes, with the ``owner`` (the id of the KB that
    wrote it): a reopened collection is caught up from where it stands instead of reloaded,
    and a collection another KB wrote (or one reused from an earlier attach) reads as
    position ``-1``, which no change log reaches, so the KB reloads it in full. The position
    is written after the rows it covers, so a crash in between leaves it behind the rows,
    never ahead: replaying upserts and deletes is harmless.
    """

    name = "milvus"

    def __init__(self, uri: str, collection: str, dimension: int, *, index: str = "flat",
                 token_env: str = TOKEN_ENV, timeout: float = TIMEOUT_S,
                 owner: str | None = None):
        check_collection_name(collection)
        if isinstance(dimension, bool) or not isinstance(dimension, int) or \
                not 1 <= dimension <= 32768:
            raise InputError(f"the embedding dimension must be an integer in 1..32768, "
                             f"got {dimension!r}")
        if index not in INDEX_KINDS:
            raise InputError(f"unknown Milvus index kind {index!r}; known: "
                             f"{', '.join(INDEX_KINDS)}")
        if not timeout > 0:
            raise InputError(f"the Milvus timeout must be positive, got {timeout!r}")
        self.uri = check_uri(uri)
        self.collection = collection
        self.dimension = dimension
        self.index = index
        self.timeout = timeout
        self.lite = is_lite(self.uri)
        self._where = f"Milvus {'Lite ' if self.lite else ''}at {redact(self.uri)}"
        self.owner = owner
        self._client: Any = None
        self._position = -1
        pymilvus = _pymilvus()
        self._exceptions = _client_exceptions(pymilvus)
        token = os.environ.get(token_env, "") if token_env else ""
        with self._errors("connecting"):
            self._client = pymilvus.MilvusClient(uri=self.uri, token=token, timeout=timeout)
        if self.lite:
            _LITE_USERS[self.uri] = _LITE_USERS.get(self.uri, 0) + 1
        try:
            with self._errors(f"opening collection {collection!r}"):
                if self._client.has_collection(collection, timeout=timeout):
                    self._check_collection()
                else:
                    self._create_collection(pymilvus)
                if _load_state(self._client.get_load_state(collection)) != "Loaded":
                    self._client.load_collection(collection, timeout=timeout)
            self.refresh_position()
        except BaseException:
            self.close()
            raise
        log.info("search engine: collection %r in %s", collection, self._where)

    def __repr__(self) -> str:
        return (f"MilvusBackend({redact(self.uri)!r}, {self.collection!r}, "
                f"dimension={self.dimension}, index={self.index!r})")

    # -- the change-log position ---------------------------------------------------------------
    @property
    def position(self) -> int:
        """The change-log position the collection reflects (``-1``: unknown, reload it)."""
        return self._position

    @position.setter
    def position(self, value: int) -> None:
        """Record ``value`` (and the owner) in the collection's properties; called once the
        rows up to ``value`` are written."""
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InputError(f"a change-log position is a non-negative integer, got {value!r}")
        properties = {POSITION_PROPERTY: str(value)}
        if self.owner is not None:
            properties[OWNER_PROPERTY] = self.owner
        with self._errors("recording the change-log position"):
            self._client.alter_collection_properties(self.collection, properties=properties,
                                                     timeout=self.timeout)
        self._position = value

    def refresh_position(self) -> int:
        """Read the recorded position again (another process may have advanced it)."""
        with self._errors("reading the change-log position"):
            described = self._client.describe_collection(self.collection, timeout=self.timeout)
        properties = described.get("properties") or {}
        recorded = properties.get(POSITION_PROPERTY)
        mine = self.owner is None or properties.get(OWNER_PROPERTY) == self.owner
        self._position = int(recorded) if recorded is not None and mine else -1
        return self._position

    def sync(self, store: Any) -> bool:
        """Catch up with ``store``'s change log (``False``: the log does not reach back to
        this collection's position; reload it with
        :func:`trishield.kb.indexes.engines.sync.sync`)."""
        from trishield.kb.indexes.backend import catch_up

        return catch_up(self, store)

    def unknown_terms(self, text: str) -> list[str]:
        """The text's index terms that no row of the collection contains, in order, once
        each: one BM25 request with a query per term (a term no row holds finds nothing).
        The KB itself answers this from its FTS5 vocabulary; this is the engine's own view."""
        terms = list(dict.fromkeys(index_terms(text)))
        queries = [engine_terms(term) for term in terms]
        asked = [query for query in dict.fromkeys(queries) if query]
        found: set[str] = set()
        if asked:
            with self._errors("looking up terms"):
                result = self._client.search(
                    self.collection, data=asked, anns_field=SPARSE_FIELD, limit=1,
                    output_fields=[ID_FIELD], search_params={"metric_type": "BM25",
                                                             "params": {}},
                    consistency_level="Strong", timeout=self.timeout)
            found = {query for query, hits in zip(asked, result, strict=True)
                     if any(abs(float(hit["distance"])) > 0 for hit in hits)}
        return [term for term, query in zip(terms, queries, strict=True) if query not in found]

    # -- the collection ---------------------------------------------------------------------
    def _create_collection(self, pymilvus: Any) -> None:
        data_type = pymilvus.DataType
        schema = pymilvus.MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field(ID_FIELD, data_type.INT64, is_primary=True)
        schema.add_field(VECTOR_FIELD, data_type.FLOAT_VECTOR, dim=self.dimension)
        schema.add_field(TERMS_FIELD, data_type.VARCHAR, max_length=MAX_TERMS_BYTES,
                         enable_analyzer=True,
                         analyzer_params={"tokenizer": "standard", "filter": ["lowercase"]})
        schema.add_field(SPARSE_FIELD, data_type.SPARSE_FLOAT_VECTOR)
        schema.add_function(pymilvus.Function(
            name=BM25_FUNCTION, function_type=pymilvus.FunctionType.BM25,
            input_field_names=[TERMS_FIELD], output_field_names=[SPARSE_FIELD]))
        index_type, params = INDEX_KINDS[self.index]
        indexes = self._client.prepare_index_params()
        indexes.add_index(VECTOR_FIELD, index_type=index_type, index_name=VECTOR_FIELD,
                          metric_type="COSINE", params=dict(params))
        indexes.add_index(SPARSE_FIELD, index_type="SPARSE_INVERTED_INDEX",
                          index_name=SPARSE_FIELD, metric_type="BM25",
                          params={"bm25_k1": BM25_K1, "bm25_b": BM25_B})
        self._client.create_collection(
            self.collection, schema=schema, index_params=indexes, consistency_level="Strong",
            properties={"trishield.schema": SCHEMA_VERSION, "trishield.analyzer": TERMS_ANALYZER},
            timeout=self.timeout)

    def _check_collection(self) -> None:
        """Refuse a collection this KB cannot use: another layout, another embedding
        dimension, another analyzer or another index kind (a KB setting that silently did
        not apply would be worse than an error)."""
        described = self._client.describe_collection(self.collection, timeout=self.timeout)
        fields = {field["name"]: field for field in described.get("fields", [])}
        name = self.collection
        properties = described.get("properties") or {}
        if properties.get("trishield.schema") != SCHEMA_VERSION or \
                set(fields) != {ID_FIELD, VECTOR_FIELD, TERMS_FIELD, SPARSE_FIELD}:
            raise KnowledgeBaseError(
                f"collection {name!r} in {self._where} was not made by TriShield (schema "
                f"{SCHEMA_VERSION}); name another collection, or drop this one")
        dimension = int(fields[VECTOR_FIELD].get("params", {}).get("dim", -1))
        if dimension != self.dimension:
            raise KnowledgeBaseError(
                f"collection {name!r} in {self._where} holds {dimension}-dimensional vectors, "
                f"but this KB's embedding model makes {self.dimension}-dimensional ones; "
                "name another collection, or drop this one and sync the KB into it")
        analyzer = properties.get("trishield.analyzer")
        if analyzer != TERMS_ANALYZER:
            raise KnowledgeBaseError(
                f"collection {name!r} in {self._where} holds terms analysed as {analyzer!r}, "
                f"this TriShield analyses as {TERMS_ANALYZER!r}; drop it and sync the KB again")
        built = self._client.describe_index(name, VECTOR_FIELD, timeout=self.timeout) or {}
        wanted = INDEX_KINDS[self.index][0]
        if str(built.get("index_type", "")).upper() != wanted:
            raise KnowledgeBaseError(
                f"collection {name!r} in {self._where} has a {built.get('index_type')!r} "
                f"vector index, but {self.index!r} ({wanted}) was asked for; ask for the "
                "collection's kind, or name another collection")

    # -- writing ----------------------------------------------------------------------------
    def add(self, ids: np.ndarray, vectors: np.ndarray, texts: list[str]) -> None:
        """Upsert rows ``ids[i] -> (vectors[i], texts[i])``; a row already there is replaced.

        Everything is checked before anything is sent. Rows go in batches of
        :data:`WRITE_BATCH`: should the engine fail midway, some batches are in and the error
        says so; adding the same rows again (or :func:`~trishield.kb.indexes.engines.sync.sync`)
        completes it, since upserts are idempotent."""
        keys = _ids(ids)
        matrix = np.asarray(vectors)
        if matrix.ndim != 2 or matrix.shape != (len(keys), self.dimension):
            raise InputError(f"expected {len(keys)} vectors of dimension {self.dimension}, got "
                             f"an array of shape {matrix.shape}")
        if not np.issubdtype(matrix.dtype, np.floating) or not np.isfinite(matrix).all():
            raise InputError("vectors must be finite floating-point numbers")
        if not isinstance(texts, list) or len(texts) != len(keys) or \
                not all(isinstance(text, str) for text in texts):
            raise InputError(f"expected a list of {len(keys)} texts, one per id")
        rows = []
        for key, vector, text in zip(keys.tolist(), matrix.astype(np.float32), texts,
                                     strict=True):
            terms = engine_terms(text)
            if len(terms.encode("utf-8")) > MAX_TERMS_BYTES:
                raise InputError(f"chunk {key}: its index terms exceed Milvus's "
                                 f"{MAX_TERMS_BYTES}-byte text field; chunk the document smaller")
            rows.append({ID_FIELD: key, VECTOR_FIELD: vector.tolist(), TERMS_FIELD: terms})
        for start in range(0, len(rows), WRITE_BATCH):
            done = f" ({start} of {len(rows)} rows were written)" if start else ""
            with self._errors(f"writing {len(rows)} rows{done}"):
                self._client.upsert(self.collection, rows[start:start + WRITE_BATCH],
                                    timeout=self.timeout)
        if self.lite and rows:
            # Milvus Lite searches unsealed rows in Python, about 10x slower than a sealed,
            # indexed segment (measured at 3,000 rows: 290 -> 28 ms dense, 810 -> 51 ms BM25);
            # its write-ahead log already made them durable. A server seals on its own, and
            # flushing there per write is rate-limited and fragments segments: never done.
            with self._errors("sealing the written rows"):
                self._client.flush(self.collection, timeout=self.timeout)

    def remove(self, ids: np.ndarray) -> None:
        """Delete these rows; ids the collection does not hold are ignored."""
        keys = _ids(ids).tolist()
        for start in range(0, len(keys), WRITE_BATCH):
            with self._errors(f"deleting {len(keys)} rows"):
                self._client.delete(self.collection, ids=keys[start:start + WRITE_BATCH],
                                    timeout=self.timeout)

    # -- reading ----------------------------------------------------------------------------
    def dense(self, vector: np.ndarray, depth: int) -> list[tuple[int, float]]:
        """The ``depth`` rows nearest ``vector`` as ``(id, cosine similarity)``, best first."""
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        if query.shape != (self.dimension,) or not np.isfinite(query).all():
            raise InputError(f"the query vector must be {self.dimension} finite numbers, "
                             f"got shape {np.shape(vector)}")
        if self.index == "hnsw":
            params: dict[str, int] = {"ef": max(HNSW_EF_SEARCH, _depth(depth))}
        elif self.index == "ivf":
            params = {"nprobe": IVF_NPROBE}
        else:
            params = {}
        hits = self._search([query.tolist()], VECTOR_FIELD, "COSINE", params, depth)
        return [(int(hit["id"]), float(hit["distance"])) for hit in hits]

    def lexical(self, query: str, depth: int) -> list[tuple[int, float]]:
        """The ``depth`` best BM25 matches of ``query`` as ``(id, score)``, best first; only
        rows sharing a term with the query (an empty list when none do)."""
        if not isinstance(query, str):
            raise InputError("the lexical query must be text")
        terms = engine_terms(query)
        if not terms:
            _depth(depth)
            return []
        hits = self._search([terms], SPARSE_FIELD, "BM25", {}, depth)
        # a Milvus server reports BM25 scores; Milvus Lite reports their negation as a distance
        scored = [(int(hit["id"]), abs(float(hit["distance"]))) for hit in hits]
        return [(key, score) for key, score in scored if score > 0]

    def _search(self, data: list, field: str, metric: str, params: dict[str, int],
                depth: int) -> list[dict]:
        limit = min(_depth(depth), MAX_TOPK)
        with self._errors(f"searching {field}"):
            result = self._client.search(
                self.collection, data=data, anns_field=field, limit=limit,
                output_fields=[ID_FIELD], search_params={"metric_type": metric,
                                                         "params": params},
                consistency_level="Strong", timeout=self.timeout)
        return list(result[0]) if result else []

    def __len__(self) -> int:
        """Rows in the collection (a strong ``count(*)``: collection statistics on a server
        still count deleted rows until compaction)."""
        with self._errors("counting rows"):
            rows = self._client.query(self.collection, filter="", output_fields=["count(*)"],
                                      consistency_level="Strong", timeout=self.timeout)
        return int(rows[0]["count(*)"])

    def ids(self, batch: int = 4096) -> np.ndarray:
        """Every row id in the collection, sorted (paged with a query iterator)."""
        found: list[int] = []
        with self._errors("listing row ids"), _quiet_iterator():
            iterator = self._client.query_iterator(
                self.collection, batch_size=batch, filter="", output_fields=[ID_FIELD],
                consistency_level="Strong", timeout=self.timeout)
            try:
                while page := iterator.next():
                    found.extend(int(row[ID_FIELD]) for row in page)
            finally:
                iterator.close()
        return np.array(sorted(found), dtype=np.int64)

    def vectors_of(self, ids: np.ndarray) -> dict[int, np.ndarray]:
        """The stored vector of each of these ids that the collection holds."""
        keys = _ids(ids).tolist()
        found: dict[int, np.ndarray] = {}
        for start in range(0, len(keys), WRITE_BATCH):
            with self._errors("reading vectors"):
                rows = self._client.get(self.collection, ids=keys[start:start + WRITE_BATCH],
                                        output_fields=[VECTOR_FIELD], timeout=self.timeout)
            for row in rows:
                found[int(row[ID_FIELD])] = np.asarray(row[VECTOR_FIELD], dtype=np.float32)
        return found

    def drop(self) -> None:
        """Drop the collection (its rows are derived data: a sync recreates them)."""
        with self._errors(f"dropping collection {self.collection!r}"):
            self._client.drop_collection(self.collection, timeout=self.timeout)

    def close(self) -> None:
        """Release the connection; safe to call twice."""
        client, self._client = self._client, None
        if client is not None:
            with suppress(*self._exceptions):
                client.close()
            if self.lite:
                _release_lite(self.uri)

    # -- errors -----------------------------------------------------------------------------
    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        """The client's exceptions as a :class:`KnowledgeBaseError` naming the engine and the
        operation, with the URI's credentials removed."""
        if self._client is None and what != "connecting":
            raise KnowledgeBaseError(f"{self._where}: the backend is closed")
        try:
            yield
        except self._exceptions as error:
            message = getattr(error, "message", None) or str(error) or type(error).__name__
            message = message.replace(self.uri, redact(self.uri))
            code = getattr(error, "code", None)
            if what == "connecting" or code == 2:
                hint = (" (Milvus Lite lets one process at a time use a folder: is another "
                        "process using it?)" if self.lite else "")
                raise KnowledgeBaseError(f"cannot reach {self._where}: {message}{hint}"
                                         ) from None
            raise KnowledgeBaseError(f"{self._where}: {what} failed: {message}") from None


def _release_lite(uri: str) -> None:
    """One backend fewer on a Milvus Lite folder; the last one stops its server."""
    users = _LITE_USERS.get(uri, 0) - 1
    if users > 0:
        _LITE_USERS[uri] = users
        return
    _LITE_USERS.pop(uri, None)
    try:
        from milvus_lite import server_manager_instance
    except ImportError:
        return
    server_manager_instance.release_server(uri)


def _client_exceptions(pymilvus: Any) -> tuple[type[BaseException], ...]:
    """What the client raises for engine and transport failures."""
    found: list[type[BaseException]] = [pymilvus.exceptions.MilvusException]
    try:
        import grpc
    except ImportError:
        pass
    else:
        found.append(grpc.RpcError)
    return tuple(found)


class _WithoutMvccWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "mvccTs" not in record.getMessage()


@contextmanager
def _quiet_iterator() -> Iterator[None]:
    """Drop pymilvus's warning that Milvus Lite has no MVCC timestamp for an iterator (it
    falls back to the client's clock, which is what a strong read wants anyway)."""
    logger = logging.getLogger("pymilvus.client.iterator.query_iterator")
    drop = _WithoutMvccWarning()
    logger.addFilter(drop)
    try:
        yield
    finally:
        logger.removeFilter(drop)


def _load_state(state: Any) -> str:
    value = state.get("state") if isinstance(state, dict) else state
    return str(getattr(value, "name", value))


def _ids(ids: np.ndarray) -> np.ndarray:
    """``ids`` as a 1-D int64 array of distinct values, or an :class:`InputError`."""
    array = np.asarray(ids)
    if array.ndim != 1 or (len(array) and not np.issubdtype(array.dtype, np.integer)):
        raise InputError(f"ids must be a 1-D array of integers, got shape {array.shape} "
                         f"of {array.dtype}")
    array = array.astype(np.int64)
    if len(np.unique(array)) != len(array):
        raise InputError("ids repeat within one call; each row id may appear once")
    return array


def _depth(depth: int) -> int:
    if isinstance(depth, bool) or not isinstance(depth, int | np.integer) or depth < 1:
        raise InputError(f"the search depth must be a positive integer, got {depth!r}")
    return int(depth)
