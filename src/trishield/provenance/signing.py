"""Signed provenance: Ed25519 signatures of trusted publishers over a document's content hash.

A writer can type anything into a document, including "tier: trusted". The only provenance a
document can claim beyond its writer's key is a signature that a *registered* publisher made
over the document's content hash (:func:`trishield.kb.documents.content_hash`, the sha256 of
the whitespace-normalised text). The signed message is ``trishield-document-v1:<hash>``; the
prefix keeps a publisher's key from being tricked into signing something that is valid in
another protocol.

:func:`decide_provenance` is the one place that turns a claim into a tier. A verified
signature gives ``trusted``; any tag that does not verify (malformed, unknown or revoked
publisher, bad signature, a tier claimed without a signature) gives ``untrusted``, never the
key's tier: a forged tag is evidence of bad intent, not a neutral mistake. The verdict's note
is stored with the document, so the audit log and every trace say why.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from trishield.errors import InputError
from trishield.kb.documents import Tier
from trishield.provenance.keys import ApiKey, KeyStore

MESSAGE_PREFIX = b"trishield-document-v1:"
MAX_SIGNATURE_CHARS = 200


def signed_message(content_hash: str) -> bytes:
    return MESSAGE_PREFIX + content_hash.encode("ascii")


def generate_private_key() -> tuple[bytes, str]:
    """A new Ed25519 key pair: the private key as PKCS#8 PEM, the public key as base64."""
    private = Ed25519PrivateKey.generate()
    pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return pem, public_key_b64(private.public_key())


def public_key_b64(public: Ed25519PublicKey) -> str:
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return base64.b64encode(raw).decode("ascii")


def load_private_key(path: Path) -> Ed25519PrivateKey:
    """An unencrypted PKCS#8 PEM Ed25519 private key; :class:`InputError` saying what is wrong."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise InputError(f"cannot read the private key: {error.strerror}", path=str(path)) \
            from None
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as error:
        raise InputError(f"not an unencrypted PEM private key ({error})", path=str(path)) \
            from None
    if not isinstance(key, Ed25519PrivateKey):
        raise InputError(f"the private key is {type(key).__name__}, not Ed25519",
                         path=str(path))
    return key


def parse_public_key(text: str, *, where: str = "public key") -> str:
    """Normalise a public key given as base64 of the raw 32 bytes or as PEM; returns base64."""
    text = text.strip()
    if text.startswith("-----BEGIN"):
        try:
            key = serialization.load_pem_public_key(text.encode("ascii"))
        except (ValueError, UnicodeEncodeError) as error:
            raise InputError(f"{where}: not a PEM public key ({error})") from None
        if not isinstance(key, Ed25519PublicKey):
            raise InputError(f"{where}: {type(key).__name__} is not an Ed25519 key")
        return public_key_b64(key)
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise InputError(f"{where}: neither PEM nor base64") from None
    if len(raw) != 32:
        raise InputError(f"{where}: an Ed25519 public key is 32 bytes, got {len(raw)}")
    return text


def sign(private: Ed25519PrivateKey, content_hash: str) -> str:
    """The base64 signature of a document's content hash."""
    return base64.b64encode(private.sign(signed_message(content_hash))).decode("ascii")


@dataclass(frozen=True)
class ProvenanceClaim:
    """What a request says about a document's origin, before anything is believed."""

    publisher: str | None = None
    signature: str | None = None
    tier: str | None = None


@dataclass(frozen=True)
class ProvenanceVerdict:
    """The tier a document gets and why (the note is stored, audited and traced)."""

    tier: str
    verified: bool
    note: str

    def as_dict(self) -> dict[str, object]:
        return {"tier": self.tier, "verified": self.verified, "note": self.note}


def _signature_problem(store: KeyStore, claim: ProvenanceClaim, content_hash: str) -> str | None:
    """Why the claim's signature does not verify, or ``None`` when it does."""
    if not claim.publisher or not claim.signature:
        missing = "signature" if claim.publisher else "publisher"
        return f"provenance tag without a {missing}"
    publisher = store.publisher(claim.publisher)
    if publisher is None:
        return f"unknown publisher {claim.publisher!r}"
    if publisher.revoked_at is not None:
        return f"publisher {claim.publisher!r} has been revoked"
    if len(claim.signature) > MAX_SIGNATURE_CHARS:
        return "signature is too long to be an Ed25519 signature"
    try:
        signature = base64.b64decode(claim.signature, validate=True)
    except (binascii.Error, ValueError):
        return "signature is not base64"
    public = Ed25519PublicKey.from_public_bytes(base64.b64decode(publisher.public_key))
    try:
        public.verify(signature, signed_message(content_hash))
    except InvalidSignature:
        return (f"signature does not verify against publisher {claim.publisher!r} for this "
                "text (forged, or the text was changed after signing)")
    return None


def decide_provenance(store: KeyStore, key: ApiKey, content_hash: str,
                      claim: ProvenanceClaim | None) -> ProvenanceVerdict:
    """The tier of a document written with ``key`` that carries ``claim`` (or none)."""
    if claim is None:
        return ProvenanceVerdict(key.tier, False,
                                 f"tier {key.tier} from the API key {key.key_id} of writer "
                                 f"{key.name}")
    problem = _signature_problem(store, claim, content_hash)
    if problem is None:
        return ProvenanceVerdict(Tier.TRUSTED.value, True,
                                 f"signed by trusted publisher {claim.publisher} (Ed25519 over "
                                 f"content sha256 {content_hash[:12]}...), written by "
                                 f"{key.name}")
    claimed = f" claiming tier {claim.tier!r}" if claim.tier else ""
    return ProvenanceVerdict(Tier.UNTRUSTED.value, False,
                             f"UNVERIFIED provenance tag{claimed}: {problem}; treated as "
                             f"untrusted (writer {key.name})")
