"""The ingest plan (kb/store/ownership.py): per-writer duplicates, id ownership, signed
takeovers."""

from __future__ import annotations

import json

import pytest

from trishield.errors import ConflictError, InputError
from trishield.kb import Document
from trishield.kb.store.ownership import Claim, plan_batch

TEXT = "Tents can be exchanged within 30 days."


def _claim(doc_id: str, *, writer: str = "wes", key: str = "k-wes", tier: str = "neutral",
           state: str = "stored", text: str = TEXT, signed: str = "") -> Claim:
    return Claim(doc_id, Document(id=doc_id, text=text).content_hash, writer, key, tier, state,
                 signed)


def _signed(version: int, publisher: str = "acme") -> str:
    return json.dumps({"publisher": publisher, "version": version, "issued_at": 0})


def test_a_writers_own_text_is_a_duplicate_and_anothers_is_new() -> None:
    documents = [Document(id="mine", text=TEXT)]
    own = plan_batch(documents, [_claim("old")], tier="neutral", writer="wes",
                     writer_key="k-wes")
    assert own.new == [] and own.duplicates[0]["same_text_as"] == "old"
    other = plan_batch(documents, [_claim("old", writer="mallory", key="k-mal")],
                       tier="neutral", writer="wes", writer_key="k-wes")
    assert [d.id for d in other.new] == ["mine"] and other.duplicates == []


def test_the_key_not_the_name_owns() -> None:
    documents = [Document(id="old", text=TEXT)]
    with pytest.raises(ConflictError, match="another writer"):  # same name, another key
        plan_batch(documents, [_claim("old", key="k-first")], tier="neutral", writer="wes",
                   writer_key="k-second")
    with pytest.raises(ConflictError, match="another writer"):  # a local write by "wes"
        plan_batch(documents, [_claim("old", key="")], tier="neutral", writer="wes",
                   writer_key="k-wes")
    local = plan_batch(documents, [_claim("old", key="")], tier="neutral", writer="wes",
                       writer_key="")
    assert local.duplicates and not local.new


def test_a_more_trusted_copy_of_the_writers_own_text_is_stored() -> None:
    signed = Document(id="signed", text=TEXT, tier="trusted", signed=_signed(1))
    plan = plan_batch([signed], [_claim("unsigned")], tier="neutral", writer="wes",
                      writer_key="k-wes")
    assert [d.id for d in plan.new] == ["signed"]


def test_a_signed_record_takes_over_a_less_trusted_id_or_an_older_version() -> None:
    signed = Document(id="legal", text=TEXT + " v2", tier="trusted", signed=_signed(2))
    for claim in (_claim("legal", writer="mallory", key="k-mal", tier="untrusted"),
                  _claim("legal", tier="trusted", signed=_signed(1))):
        plan = plan_batch([signed], [claim], tier="neutral", writer="wes", writer_key="k-wes")
        assert [c.doc_id for c, _ in plan.displaced] == ["legal"] and plan.new == [signed]
    # another writer's held text is set aside, whatever the write: never reported as displaced
    held = _claim("legal", writer="mallory", key="k-mal", state="quarantined")
    plan = plan_batch([signed], [held], tier="neutral", writer="wes", writer_key="k-wes")
    assert plan.displaced == [] and plan.set_aside == [(held, signed)] and plan.new == [signed]
    for claim in (_claim("legal", writer="ada", key="k-ada", tier="trusted"),
                  _claim("legal", writer="ada", key="k-ada", tier="trusted",
                         signed=_signed(3)),
                  _claim("legal", writer="ada", key="k-ada", tier="trusted",
                         signed=_signed(5, publisher="globex"))):
        with pytest.raises(ConflictError):
            plan_batch([signed], [claim], tier="neutral", writer="wes", writer_key="k-wes")


def test_own_id_with_other_text_and_repeated_ids_are_refused() -> None:
    with pytest.raises(ConflictError, match=r"held in quarantine .* different text"):
        plan_batch([Document(id="old", text="Other.")], [_claim("old", state="quarantined")],
                   tier="neutral", writer="wes", writer_key="k-wes")
    with pytest.raises(InputError, match="duplicate document id"):
        plan_batch([Document(id="a", text="One."), Document(id="a", text="Two.")], [],
                   tier="neutral", writer="wes", writer_key="k-wes")


def test_another_writers_held_text_never_blocks_an_id() -> None:
    """Issue 49: a poison held under an id locked its owner out (409) and told it the id was
    held. Whatever the tiers, the held row is set aside and the write goes ahead."""
    held = _claim("legal/returns", writer="mallory", key="k-mal", tier="untrusted",
                  state="quarantined", text="Returns: 365 days, no receipt needed.")
    for tier, key in (("trusted", "k-ada"), ("neutral", "k-wes"), ("untrusted", "k-eve"),
                      ("trusted", "")):
        plan = plan_batch([Document(id="legal/returns", text=TEXT)], [held], tier=tier,
                          writer="owner", writer_key=key)
        assert [d.id for d in plan.new] == ["legal/returns"] and plan.displaced == []
        assert [c for c, _ in plan.set_aside] == [held]
    # its own writer still sees its own held row (and may withdraw it)
    with pytest.raises(ConflictError, match="held in quarantine"):
        plan_batch([Document(id="legal/returns", text=TEXT)], [held], tier="untrusted",
                   writer="mallory", writer_key="k-mal")


def test_the_same_signed_record_from_another_relay_is_a_duplicate() -> None:
    stored = _claim("legal", writer="mallory", key="k-mal", tier="trusted", signed=_signed(1))
    relayed = Document(id="legal", text=TEXT, tier="trusted", signed=_signed(1))
    plan = plan_batch([relayed], [stored], tier="neutral", writer="relay", writer_key="k-rel")
    assert plan.new == [] and plan.duplicates[0]["same_text_as"] == "legal"
    other = Document(id="legal", text=TEXT, tier="trusted", signed=_signed(1, "globex"))
    with pytest.raises(ConflictError, match="another writer"):
        plan_batch([other], [stored], tier="neutral", writer="relay", writer_key="k-rel")
