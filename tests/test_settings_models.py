"""The configuration classes validate themselves: in code, through ``replace`` and from a file."""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from pathlib import Path
from typing import get_args

import pytest
from pydantic import ValidationError

from trishield.errors import InputError
from trishield.kb import BACKENDS
from trishield.rings.config_types import Backend, GateMode
from trishield.rings.consensus import GATE_MODES, ConsensusConfig
from trishield.rings.ingest_guard import GuardConfig
from trishield.rings.patterns import PatternWeights
from trishield.rings.retrieval_scorer import ScorerConfig
from trishield.settings import PipelineConfig, Settings, load_settings, settings_from_dict


def test_the_literals_are_the_one_list_of_backends_and_gates() -> None:
    assert get_args(Backend) == BACKENDS
    assert get_args(GateMode) == GATE_MODES


@pytest.mark.parametrize(("build", "field"), [
    (lambda: GuardConfig(theta=2.0), "theta"),
    (lambda: GuardConfig(w_pat=-0.1), "w_pat"),
    (lambda: GuardConfig(quarantine_trusted=1), "quarantine_trusted"),
    (lambda: GuardConfig(threshold=0.2), "threshold"),
    (lambda: PatternWeights(injection=1.5), "injection"),
    (lambda: ScorerConfig(pool=0), "pool"),
    (lambda: ScorerConfig(pool=3), "context"),
    (lambda: ScorerConfig(w_prov={"trusted": 0.2}), "w_prov"),
    (lambda: ScorerConfig(min_relevance={"sparse": 0.3}), "min_relevance"),
    (lambda: ConsensusConfig(tau=0.0), "tau"),
    (lambda: ConsensusConfig(gate="sometimes"), "gate"),
    (lambda: ConsensusConfig(low_trust_tiers=("evil",)), "low_trust_tiers"),
    (lambda: PipelineConfig(backend="sparse"), "backend"),
    (lambda: replace(ConsensusConfig(), drop_fraction=2.0), "drop_fraction"),
    (lambda: replace(ScorerConfig(), context=21), "context"),
])
def test_invalid_values_are_refused_where_they_are_set(build, field: str) -> None:
    with pytest.raises(ValidationError) as raised:
        build()
    assert raised.value.errors()[0]["loc"][0] == field


def test_valid_configs_keep_working_like_dataclasses() -> None:
    config = PipelineConfig(guard=replace(GuardConfig(), flag_theta=1.0),
                            scorer=replace(ScorerConfig(), min_relevance={"dense": 1}),
                            consensus=replace(ConsensusConfig(), low_trust_tiers=["neutral"]))
    assert config.scorer.min_relevance == {"dense": 1.0}
    assert config.consensus.low_trust_tiers == ("neutral",)  # a list becomes a tuple
    as_dict = dataclasses.asdict(config)
    assert as_dict["guard"]["patterns"]["injection"] == 0.9
    assert as_dict["consensus"]["tau"] == pytest.approx(2 / 3)
    assert hash(GuardConfig()) == hash(GuardConfig()) and hash(ConsensusConfig())
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.backend = "bm25"  # type: ignore[misc]
    assert PipelineConfig() == PipelineConfig()


def test_overrides_are_validated_in_one_place() -> None:
    settings = Settings(panel=("extractive",))
    changed = settings.with_overrides(backend="bm25", gate="always")
    assert changed.pipeline.backend == "bm25" and changed.pipeline.consensus.gate == "always"
    assert changed.panel == ("extractive",) and settings.pipeline.backend == "hybrid"
    assert settings.with_overrides() == settings
    assert settings.with_overrides(panel=["a", "b"]).panel == ("a", "b")
    assert settings.pipeline.with_overrides(gate="never").consensus.gate == "never"
    with pytest.raises(InputError, match="gate: must be one of 'always', 'gated' or 'never'"):
        settings.with_overrides(gate="sometimes")
    with pytest.raises(InputError, match="backend: must be one of"):
        settings.with_overrides(backend="sparse")
    with pytest.raises(InputError, match="no members"):
        settings.with_overrides(panel=[])


@pytest.mark.parametrize(("raw", "message"), [
    ({"retrieval": {"pool": 3}}, "[retrieval] context: must not exceed pool (3), got 5"),
    ({"retrieval": {"pool": 0}}, "[retrieval] pool: must be at least 1, got 0"),
    ({"retrieval": {"pool": "20"}}, "[retrieval] pool: must be an integer, got '20'"),
    ({"ring2": {"min_relevance": {"sparse": 1}}}, "[ring2] min_relevance.sparse: must be one of"),
    ({"ring2": {"w_prov": {"trusted": 1.1, "neutral": 0.5, "untrusted": 0.8}}},
     "[ring2] w_prov.trusted: must be at most 1, got 1.1"),
    ({"ring3": {"tau": 0}}, "[ring3] tau: must be above 0 and at most 1, got 0"),
    ({"ring3": {"low_trust_tiers": "untrusted"}}, "[ring3] low_trust_tiers: must be a list"),
    ({"ring1": {"patterns": {}}}, "[ring1] unknown key 'patterns'; allowed: flag_theta,"),
    ({"retrieval": {"bogus": 1}}, "allowed: backend, burst_window_s, context, detect_conflicts"),
    ({"panel": {"members": [""]}}, "[panel] members: must be a list of model names"),
    ({"panel": {"second_reader": ""}}, "[panel] second_reader: must be a model name or 'none'"),
    ({"panel": {"second_reader": 3}}, "[panel] second_reader: must be a model name or 'none'"),
    ({"panel": {"second": "x"}}, "allowed: members, remote, second_reader"),
])
def test_file_errors_name_section_and_key(raw: dict, message: str) -> None:
    with pytest.raises(InputError) as raised:
        settings_from_dict(raw)
    assert message in str(raised.value)


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("[ring1]\ntheta = 1.5\nw_pat = -1\n")
    with pytest.raises(InputError) as raised:
        load_settings(path)
    assert "theta: must be between 0 and 1" in raised.value.message
    assert "w_pat: must be between 0 and 1" in raised.value.message
    assert raised.value.path == str(path)


def test_types_from_the_file_are_normalised(tmp_path: Path) -> None:
    path = tmp_path / "ok.toml"
    path.write_text("[ring3]\ntau = 1\nlow_trust_tiers = ['untrusted', 'neutral']\n"
                    "[ring2]\nmin_relevance = { dense = 1 }\n")
    settings = load_settings(path)
    assert settings.pipeline.consensus.tau == 1.0
    assert settings.pipeline.consensus.low_trust_tiers == ("untrusted", "neutral")
    assert settings.pipeline.scorer.min_relevance == {"dense": 1.0}


def test_the_second_reader_defaults_to_the_strongest_packaged_model() -> None:
    """Absent, the default second reader; "none" turns it off; another name replaces it."""
    assert Settings().second_reader == settings_from_dict({}).second_reader == "qwen2.5-1.5b"
    off = settings_from_dict({"panel": {"second_reader": "none"}})
    assert off.second_reader is None and off.as_dict()["second_reader"] == "none"
    named = settings_from_dict({"panel": {"second_reader": "smollm2-135m"}})
    assert named.as_dict()["second_reader"] == "smollm2-135m"


def test_the_command_line_chooses_the_second_reader() -> None:
    """--second-reader wins; --panel alone names every reader, so it means none."""
    from trishield.llm.panel import second_reader_choice

    assert second_reader_choice(None, panel_given=False, configured="q") == "q"
    assert second_reader_choice(None, panel_given=True, configured="q") is None
    assert second_reader_choice("none", panel_given=False, configured="q") is None
    assert second_reader_choice("s", panel_given=True, configured="q") == "s"
    with pytest.raises(InputError, match="--second-reader"):
        second_reader_choice(" ", panel_given=False, configured="q")
