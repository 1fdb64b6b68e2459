"""Signed provenance for the benchmark: a registered publisher signs the clean passages'
content hashes with Ed25519; an attacker forges the same publisher's tag with its own key.

Both keys are derived from fixed seeds so the benchmark is reproducible; the verification is
the real Ed25519 check over the document's content hash, so a forged tag fails for the same
reason it would fail at a real ingest.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from trishield.eval.poisonedrag.attacks import is_poison
from trishield.kb.documents import Tier

PUBLISHER = "wiki-publisher"


def _key(seed: str) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(hashlib.sha256(seed.encode()).digest())


@dataclass
class Provenance:
    """Decides each retrieved document's tier under a provenance setting, and logs why."""

    seed: int = 0
    checks: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._publisher = _key(f"trishield-benchmark-publisher:{self.seed}")
        self._attacker = _key(f"trishield-benchmark-attacker:{self.seed}")
        self._public = self._publisher.public_key()

    def tag(self, content_hash: str, *, forged: bool) -> bytes:
        """The signature a writer attaches: the publisher's own, or the attacker's forgery."""
        key = self._attacker if forged else self._publisher
        return key.sign(content_hash.encode("ascii"))

    def verified(self, content_hash: str, signature: bytes) -> bool:
        try:
            self._public.verify(signature, content_hash.encode("ascii"))
        except InvalidSignature:
            return False
        return True

    def tier_of(self, doc_id: str, content_hash: str, *, stored: str, setting: str) -> str:
        if setting == "neutral":
            return Tier.NEUTRAL.value
        if setting == "untrusted":
            return stored
        poison = is_poison(doc_id)
        if poison and setting == "trusted-clean":
            return stored  # the attacker attaches no tag at all
        if poison and setting == "forged-unchecked":
            self.checks[doc_id] = f"tag claims {PUBLISHER}; accepted without a check"
            return Tier.TRUSTED.value
        signature = self.tag(content_hash, forged=poison)
        if self.verified(content_hash, signature):
            self.checks[doc_id] = f"signature of {PUBLISHER} verified"
            return Tier.TRUSTED.value
        self.checks[doc_id] = (f"tag claims {PUBLISHER} but the signature does not verify: "
                               "treated as untrusted")
        return Tier.UNTRUSTED.value
