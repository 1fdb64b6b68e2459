"""Signed provenance for the benchmark, decided by the service's own code.

A registered publisher signs each clean passage's record (its id, content hash, version and
issue time: the v2 record the service accepts, not the legacy text-only signature it refuses)
with Ed25519; the attacker forges the same publisher's tag with its own key. Both keys derive
from fixed seeds so the benchmark is reproducible; every tag goes through
:func:`trishield.provenance.signing.decide_provenance` against a real key store (with the
document id, as the service calls it), so a forged tag fails here for exactly the reason it
would fail at ``POST /v1/documents``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from trishield.eval.poisonedrag.attacks import is_poison
from trishield.kb.documents import Tier
from trishield.provenance.keys import ApiKey, KeyStore
from trishield.provenance.signing import (
    ProvenanceClaim,
    ProvenanceVerdict,
    SignedRecord,
    decide_provenance,
    public_key_b64,
    sign_record,
)

PUBLISHER = "wiki-publisher"
CLEAN_WRITER = "wikipedia"
ATTACKER = "attacker"
SIGNED_AT = 1_735_689_600
"""The fixed issue time of every benchmark record (2025-01-01): reproducible, never future."""


def _key(seed: str) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(hashlib.sha256(seed.encode()).digest())


class Provenance:
    """Decides each retrieved document's tier under a provenance setting, and logs why."""

    def __init__(self, keys_dir: Path, seed: int = 0):
        keys_dir.mkdir(parents=True, exist_ok=True)
        self._publisher = _key(f"trishield-benchmark-publisher:{seed}")
        self._attacker = _key(f"trishield-benchmark-attacker:{seed}")
        self.store = KeyStore(keys_dir)
        if self.store.publisher(PUBLISHER) is None:
            self.store.add_publisher(PUBLISHER, public_key_b64(self._publisher.public_key()))
        self._writers = {CLEAN_WRITER: self._writer(CLEAN_WRITER, Tier.NEUTRAL.value),
                         ATTACKER: self._writer(ATTACKER, Tier.UNTRUSTED.value)}
        self._verdicts: dict[tuple[str, str], ProvenanceVerdict] = {}
        self.checks: dict[str, str] = {}

    def _writer(self, name: str, tier: str) -> ApiKey:
        for key in self.store.api_keys():
            if key.name == name and key.revoked_at is None:
                return key
        return self.store.create_key(name, "writer", tier)[0]

    def tag(self, doc_id: str, content_hash: str, *, forged: bool) -> ProvenanceClaim:
        """The tag a writer attaches: the publisher's own signed record of this document, or
        the attacker's forgery of one."""
        key = self._attacker if forged else self._publisher
        record = SignedRecord(doc_id, content_hash, 1, SIGNED_AT)
        return ProvenanceClaim(PUBLISHER, sign_record(key, record),
                               Tier.TRUSTED.value if forged else None, record.version,
                               record.issued_at)

    def verdict(self, doc_id: str, content_hash: str) -> ProvenanceVerdict:
        """What the service decides for this document's tag (memoised: it is deterministic)."""
        poison = is_poison(doc_id)
        cached = self._verdicts.get((doc_id, content_hash))
        if cached is None:
            writer = self._writers[ATTACKER if poison else CLEAN_WRITER]
            cached = decide_provenance(self.store, writer, content_hash,
                                       self.tag(doc_id, content_hash, forged=poison),
                                       doc_id=doc_id)
            self._verdicts[doc_id, content_hash] = cached
        self.checks[doc_id] = cached.note
        return cached

    def tier_of(self, doc_id: str, content_hash: str, *, stored: str, setting: str) -> str:
        if setting == "neutral":
            return Tier.NEUTRAL.value
        if setting == "untrusted":
            return stored
        poison = is_poison(doc_id)
        if (poison or doc_id.startswith(("filler:", "sleeper:"))) \
                and setting == "trusted-clean":
            return stored  # the attacker attaches no tag at all (nor to its own filler)
        if poison and setting == "forged-unchecked":
            self.checks[doc_id] = f"tag claims {PUBLISHER}; accepted without a check"
            return Tier.TRUSTED.value
        return self.verdict(doc_id, content_hash).tier
