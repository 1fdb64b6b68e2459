"""The text an engine's full-text index receives: TriShield's own index terms.

Engines analyse text themselves, and Milvus Lite's analyzer differs from a Milvus server's
(no stemmer, other stop words, other word boundaries). Handing every engine TriShield's
stemmed content words and identifiers (:func:`trishield.kb.store.fts.lexical_terms`),
joined by spaces and reduced to letters and digits, makes the engine's whitespace-and-lowercase
analysis an identity: the same terms in Milvus Lite, on a cluster and in the embedded BM25
index, so a query matches the same chunks everywhere and the KB's analyzer version names what
an engine holds.
"""

from __future__ import annotations

import re

from trishield.kb.store.fts import ANALYZER, lexical_terms

TERMS_ANALYZER = f"{ANALYZER}+alnum-joined/v1"
"""Names this analysis; an engine collection built with another one must be reloaded."""

_NOT_ALNUM = re.compile(r"[\W_]+", re.UNICODE)


def engine_terms(text: str) -> str:
    """``text`` as space-separated index terms with apostrophes and any other non-word
    characters removed (``o'brien`` -> ``obrien``), so no tokenizer can split a term."""
    terms = (_NOT_ALNUM.sub("", term) for term in lexical_terms(text))
    return " ".join(term for term in terms if term)
