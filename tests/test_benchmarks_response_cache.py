"""``benchmarks/response_cache.py``: the LLM response cache packed into one file and unpacked
elsewhere gives back every response; the same cache packs to the same bytes; a packed file
with one bad line unpacks nothing."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest

from trishield.llm.base import LLMResponse
from trishield.llm.cache import ResponseCache

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import response_cache


def _filled(directory: Path) -> dict[str, LLMResponse]:
    cache = ResponseCache(directory)
    responses = {f"{n:02x}" * 32: LLMResponse(text=f"answer {n} — é", model="qwen2.5-0.5b",
                                              prompt_tokens=300 + n, completion_tokens=n,
                                              seconds=1.5 * n)
                 for n in range(12)}
    for key, response in responses.items():
        cache.put(key, response, identity="model-sha")
    (directory / "ab" / "not-json.json").parent.mkdir(exist_ok=True)
    (directory / "ab" / "not-json.json").write_text("{torn")  # a miss, not packed
    return responses


def test_a_packed_cache_unpacks_to_the_same_responses(tmp_path: Path) -> None:
    responses = _filled(tmp_path / "a")
    assert response_cache.pack(tmp_path / "a", tmp_path / "p.jsonl.gz") == len(responses)
    assert response_cache.pack(tmp_path / "a", tmp_path / "q.jsonl.gz") == len(responses)
    assert (tmp_path / "p.jsonl.gz").read_bytes() == (tmp_path / "q.jsonl.gz").read_bytes()
    assert response_cache.unpack(tmp_path / "p.jsonl.gz", tmp_path / "b") == (12, 0)
    assert response_cache.unpack(tmp_path / "p.jsonl.gz", tmp_path / "b") == (0, 12)
    cache = ResponseCache(tmp_path / "b")
    for key, response in responses.items():
        assert cache.get(key) == LLMResponse(**(response.as_dict() | {"cached": True}))


@pytest.mark.parametrize(("line", "problem"), [
    ('{"key": "xyz", "response": {}}', "64 hex digits"),
    ('{"key": "' + "a" * 64 + '", "response": {"text": 3}}', "text is not"),
    ("not json", "Expecting value"),
])
def test_a_bad_line_unpacks_nothing(tmp_path: Path, line: str, problem: str) -> None:
    _filled(tmp_path / "a")
    response_cache.pack(tmp_path / "a", tmp_path / "p.jsonl.gz")
    lines = gzip.decompress((tmp_path / "p.jsonl.gz").read_bytes()).decode().splitlines()
    lines.insert(5, line)
    (tmp_path / "bad.jsonl.gz").write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    with pytest.raises(SystemExit, match=f"bad.jsonl.gz:6: .*{problem}"):
        response_cache.unpack(tmp_path / "bad.jsonl.gz", tmp_path / "b")
    assert not (tmp_path / "b").exists()
    (tmp_path / "plain.json").write_text(json.dumps({"key": "a"}))
    with pytest.raises(SystemExit, match="not a packed response cache"):
        response_cache.unpack(tmp_path / "plain.json", tmp_path / "b")
