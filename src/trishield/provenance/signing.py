"""Signed provenance: Ed25519 signatures of trusted publishers over a document's record.

A writer can type anything into a document, including "tier: trusted". The only provenance a
document can claim beyond its writer's key is a signature that a *registered* publisher made
over the document's **signed record**: its id, its content hash
(:func:`trishield.kb.documents.content_hash`, the sha256 of the whitespace-normalised text), a
version and the time it was issued. The signed message is ``trishield-document-v2`` and a
newline, then the record as canonical JSON (keys sorted, no spaces, ASCII)::

    {"content_sha256":"<hex>","id":"<doc id>","issued_at":<epoch s>,"version":<n>}

The prefix keeps a publisher's key from being tricked into signing something that is valid in
another protocol. Binding the id means a signed text cannot be re-posted under another id and
come back trusted; the version lets a publisher *withdraw* one document (every version up to
N of that id, :meth:`~trishield.provenance.keys.KeyStore.withdraw_signature`) without revoking
the publisher, and sign a corrected version N+1. A record issued more than
:data:`MAX_CLOCK_SKEW_S` in the future is refused.

A signature belongs to its publisher, not to the key that relayed the record: over the
service only the publisher itself withdraws it, with a **signed withdrawal**
(``trishield-withdrawal-v1`` and a newline, then ``{"id":..,"issued_at":..,"up_to_version":..}``
as canonical JSON; :func:`withdrawal_problem`), or an admin acting for it.

The first format (``trishield-document-v1:<hash>``, the text alone) is not accepted by the
service: it is valid under any id, so a withdrawn document could be replayed under a new one.
:func:`decide_provenance` still verifies it when no id is given, for the offline evaluation,
whose passages are judged by text alone.

:func:`decide_provenance` is the one place that turns a claim into a tier. A verified
signature gives ``trusted``; any tag that does not verify (malformed, unknown or revoked
publisher, bad signature, a tier claimed without a signature) gives ``untrusted``, never the
key's tier: a forged tag is evidence of bad intent, not a neutral mistake. The verdict's note
is stored with the document, so the audit log and every trace say why.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from trishield.errors import InputError
from trishield.kb.documents import Tier
from trishield.provenance.keys import ApiKey, KeyStore

MESSAGE_PREFIX = b"trishield-document-v1:"
RECORD_PREFIX = b"trishield-document-v2\n"
WITHDRAWAL_PREFIX = b"trishield-withdrawal-v1\n"
MAX_SIGNATURE_CHARS = 200
MAX_CLOCK_SKEW_S = 300
MAX_VERSION = 2**31 - 1
MAX_ISSUED_AT = 2**40


def signed_message(content_hash: str) -> bytes:
    """The legacy (v1) message: the text alone, valid under any id."""
    return MESSAGE_PREFIX + content_hash.encode("ascii")


@dataclass(frozen=True)
class SignedRecord:
    """What a publisher signs for one document: id, content hash, version, issue time."""

    doc_id: str
    content_hash: str
    version: int
    issued_at: int

    def message(self) -> bytes:
        record = {"content_sha256": self.content_hash, "id": self.doc_id,
                  "issued_at": self.issued_at, "version": self.version}
        return RECORD_PREFIX + json.dumps(record, sort_keys=True, separators=(",", ":"),
                                          ensure_ascii=True).encode("ascii")


@dataclass(frozen=True)
class SignedWithdrawal:
    """What a publisher signs to withdraw its signed records of one id, up to a version. Its
    own prefix: a withdrawal can never pass for a document record, nor a record for one."""

    doc_id: str
    up_to_version: int
    issued_at: int

    def message(self) -> bytes:
        record = {"id": self.doc_id, "issued_at": self.issued_at,
                  "up_to_version": self.up_to_version}
        return WITHDRAWAL_PREFIX + json.dumps(record, sort_keys=True, separators=(",", ":"),
                                              ensure_ascii=True).encode("ascii")


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
    """The base64 legacy (v1) signature of a content hash alone (offline evaluation only)."""
    return base64.b64encode(private.sign(signed_message(content_hash))).decode("ascii")


def sign_record(private: Ed25519PrivateKey, record: SignedRecord) -> str:
    """The base64 signature of a document's signed record (what the service accepts)."""
    return base64.b64encode(private.sign(record.message())).decode("ascii")


def sign_withdrawal(private: Ed25519PrivateKey, withdrawal: SignedWithdrawal) -> str:
    """The base64 signature of a withdrawal (``trishield keys sign-withdrawal``)."""
    return base64.b64encode(private.sign(withdrawal.message())).decode("ascii")


def _publisher_key(store: KeyStore, name: str) -> tuple[Ed25519PublicKey | None, str | None]:
    """A registered, unrevoked publisher's public key, or why there is none."""
    publisher = store.publisher(name)
    if publisher is None:
        return None, f"unknown publisher {name!r}"
    if publisher.revoked_at is not None:
        return None, f"publisher {name!r} has been revoked"
    return Ed25519PublicKey.from_public_bytes(base64.b64decode(publisher.public_key)), None


def _decoded(signature: str) -> bytes | None:
    if len(signature) > MAX_SIGNATURE_CHARS:
        return None
    try:
        return base64.b64decode(signature, validate=True)
    except (binascii.Error, ValueError):
        return None


def withdrawal_problem(store: KeyStore, publisher: str, withdrawal: SignedWithdrawal,
                       signature: str, *, now: float | None = None) -> str | None:
    """Why ``signature`` is not ``publisher``'s signature of ``withdrawal``, or ``None`` when
    it is. Replaying a valid withdrawal changes nothing (withdrawals only ever rise), so no
    nonce is needed; one issued in the future is refused like a record."""
    public, problem = _publisher_key(store, publisher)
    if public is None:
        return problem
    if not (1 <= withdrawal.up_to_version <= MAX_VERSION
            and 0 <= withdrawal.issued_at <= MAX_ISSUED_AT):
        return "version or issue time out of range"
    if withdrawal.issued_at > (time.time() if now is None else now) + MAX_CLOCK_SKEW_S:
        return f"withdrawal issued in the future (issued_at {withdrawal.issued_at})"
    raw = _decoded(signature)
    if raw is None:
        return "signature is not a base64 Ed25519 signature"
    try:
        public.verify(raw, withdrawal.message())
    except InvalidSignature:
        return (f"signature does not verify against publisher {publisher!r} for this id, "
                "version and issue time")
    return None


@dataclass(frozen=True)
class ProvenanceClaim:
    """What a request says about a document's origin, before anything is believed."""

    publisher: str | None = None
    signature: str | None = None
    tier: str | None = None
    version: int | None = None
    issued_at: int | None = None


@dataclass(frozen=True)
class ProvenanceVerdict:
    """The tier a document gets and why (the note is stored, audited and traced).

    ``signed`` is the verified record's publisher, version and issue time (JSON), stored with
    the document so that its signature can be withdrawn; '' when nothing was verified or the
    signature was a legacy one."""

    tier: str
    verified: bool
    note: str
    signed: str = ""

    def as_dict(self) -> dict[str, object]:
        return {"tier": self.tier, "verified": self.verified, "note": self.note}


def _signature_problem(store: KeyStore, claim: ProvenanceClaim, content_hash: str,
                       doc_id: str | None, now: float) -> str | None:
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
    if doc_id is None:
        message = signed_message(content_hash)
    else:
        if claim.version is None or claim.issued_at is None:
            return ("signature without a version and issue time: a signature over the text "
                    "alone (trishield-document-v1) is valid under any id and is no longer "
                    "accepted; sign the record with `trishield keys sign`")
        if not (1 <= claim.version <= MAX_VERSION and 0 <= claim.issued_at <= MAX_ISSUED_AT):
            return "version or issue time out of range"
        if claim.issued_at > now + MAX_CLOCK_SKEW_S:
            return f"record issued in the future (issued_at {claim.issued_at})"
        withdrawn = store.withdrawn_version(claim.publisher, doc_id)
        if withdrawn is not None and claim.version <= withdrawn:
            return (f"publisher {claim.publisher!r} withdrew document {doc_id!r} up to "
                    f"version {withdrawn}; this record is version {claim.version}")
        message = SignedRecord(doc_id, content_hash, claim.version, claim.issued_at).message()
    public = Ed25519PublicKey.from_public_bytes(base64.b64decode(publisher.public_key))
    try:
        public.verify(signature, message)
    except InvalidSignature:
        bound = "this text" if doc_id is None else "this id, text, version and issue time"
        return (f"signature does not verify against publisher {claim.publisher!r} for {bound} "
                "(forged, or the document was changed or renamed after signing)")
    return None


def decide_provenance(store: KeyStore, key: ApiKey, content_hash: str,
                      claim: ProvenanceClaim | None, *, doc_id: str | None = None,
                      now: float | None = None) -> ProvenanceVerdict:
    """The tier of a document written with ``key`` that carries ``claim`` (or none).

    The service always passes ``doc_id``: the claim must then be a signed record (v2) of
    that id. Without ``doc_id`` the legacy text-only signature is verified (evaluation)."""
    if claim is None:
        return ProvenanceVerdict(key.tier, False,
                                 f"tier {key.tier} from the API key {key.key_id} of writer "
                                 f"{key.name}")
    problem = _signature_problem(store, claim, content_hash, doc_id,
                                 time.time() if now is None else now)
    if problem is None:
        if doc_id is None:
            return ProvenanceVerdict(Tier.TRUSTED.value, True,
                                     f"signed by trusted publisher {claim.publisher} (Ed25519 "
                                     f"over content sha256 {content_hash[:12]}...), written "
                                     f"by {key.name}")
        issued = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(claim.issued_at))
        signed = json.dumps({"publisher": claim.publisher, "version": claim.version,
                             "issued_at": claim.issued_at}, sort_keys=True)
        return ProvenanceVerdict(Tier.TRUSTED.value, True,
                                 f"signed by trusted publisher {claim.publisher} (Ed25519 over "
                                 f"id {doc_id}, content sha256 {content_hash[:12]}..., "
                                 f"version {claim.version}, issued {issued}), written by "
                                 f"{key.name}", signed)
    claimed = f" claiming tier {claim.tier!r}" if claim.tier else ""
    return ProvenanceVerdict(Tier.UNTRUSTED.value, False,
                             f"UNVERIFIED provenance tag{claimed}: {problem}; treated as "
                             f"untrusted (writer {key.name})")
