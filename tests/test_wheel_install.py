"""The package as a user gets it: the sdist and the wheel built with ``python -m build``
(the wheel from the sdist, so both are checked), the wheel installed into a fresh virtual
environment, then used from outside the checkout.

The environment is made with ``python -m venv`` and *without* the system's or this
environment's site-packages, so a runtime dependency missing from ``pyproject.toml`` fails
here. pip resolves the wheel's dependencies from the indexes pip is configured with, the ones
`make install` uses. One exception keeps the test to about two minutes on 2 cores: torch
(over 700 MB unpacked, most of an install's time) is not unpacked again but linked from the
environment running the tests, through a ``.pth`` file that names a folder holding only
torch's own files (its package and its ``.dist-info``: pip sees it installed and installs what
torch itself requires). Everything else, the package's data files included, comes from the
wheel and its dependencies.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
import tarfile
import time
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINKED = ("torch",)
"""Distributions linked from the running environment instead of installed (see above)."""

PACKAGE_DATA = ("trishield/demo/corpus/refund-policy.md", "trishield/demo/questions.json",
                "trishield/demo/attacks.json", "trishield/eval/data/safety_cases.json",
                "trishield/eval/data/docqa.jsonl", "trishield/service/viewer/viewer.js",
                "trishield/service/viewer/index.html", "trishield/kb/store/migrations.py")

WHERE = """
import json
import trishield
from trishield.demo import corpus_dir
from trishield.errors import MissingExtraError
from trishield.eval.baselines.ragdefender import _defender
try:
    _defender("all-MiniLM-L6-v2", "single_hop")
    baseline = "RAGDefender loaded"
except MissingExtraError as error:
    baseline = str(error)
print(json.dumps([trishield.__file__, str(corpus_dir()), baseline]))
"""
"""Where the installed package and its data are, and what the RAGDefender baseline says
without the ``eval`` extra."""


def _run(command: list[str], *, cwd: Path, env: dict[str, str],
         timeout: float = 600) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)
    assert done.returncode == 0, (f"{' '.join(command)} exited {done.returncode}\n"
                                  f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done


def _clean_env(tmp: Path) -> dict[str, str]:
    """This process's environment without what would let the new environment import this
    checkout or this environment's packages."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("PYTHON", "VIRTUAL_ENV", "PIP_TARGET", "PIP_PREFIX"))}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               TRISHIELD_CACHE_DIR=str(tmp / "cache"), HOME=env.get("HOME", str(tmp)))
    return env


def _link_heavy(target: Path, site_packages: Path) -> None:
    """A folder of links to the :data:`LINKED` distributions' top-level files, named by a
    ``.pth`` file in the new environment's site-packages."""
    target.mkdir()
    for name in LINKED:
        dist = importlib.metadata.distribution(name)
        tops = {Path(str(entry)).parts[0] for entry in dist.files or ()
                if not str(entry).startswith("..")}
        for top in sorted(tops):
            source = Path(str(dist.locate_file(top)))
            if source.exists():
                (target / top).symlink_to(source)
    (site_packages / "trishield-test-linked.pth").write_text(f"{target}\n", encoding="utf-8")


def _readme_example() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"<!-- python-api-example -->\n```python\n(.*?)```", text, re.S)
    assert found, "README.md's Python example (between its python-api-example markers)"
    return found.group(1)


@pytest.mark.slow
def test_wheel_installs_and_runs_in_a_fresh_environment(tmp_path: Path) -> None:
    if importlib.util.find_spec("build") is None:
        pytest.fail("python -m build is missing: `make install` installs it (the dev extra)")
    started = time.perf_counter()
    dist = tmp_path / "dist"
    # sdist first, then the wheel built from the unpacked sdist (build's default)
    _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(ROOT)],
         cwd=tmp_path, env=dict(os.environ))
    wheel = next(dist.glob("trishield-*.whl"))
    sdist = next(dist.glob("trishield-*.tar.gz"))
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA")))
    assert set(PACKAGE_DATA) <= names, set(PACKAGE_DATA) - names
    requires = [line for line in metadata.decode().splitlines()
                if line.startswith("Requires-Dist:")]
    runtime = [line for line in requires if "extra ==" not in line]
    assert not [line for line in runtime if re.search(r"ragdefender|accelerate|gguf", line)]
    assert any("ragdefender==0.2.0" in line and 'extra == "eval"' in line for line in requires)
    with tarfile.open(sdist) as archive:
        members = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert {"README.md", "pyproject.toml", "src/trishield/demo/corpus/refund-policy.md"} \
        <= members

    # a fresh environment: no system site-packages, pip run from this environment
    home = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False, system_site_packages=False).create(home)
    python = home / "bin" / "python"
    site_packages = Path(_run([str(python), "-c", "import sysconfig; "
                               "print(sysconfig.get_paths()['purelib'])"],
                              cwd=tmp_path, env=_clean_env(tmp_path)).stdout.strip())
    _link_heavy(tmp_path / "linked", site_packages)
    env = _clean_env(tmp_path)
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
          "--disable-pip-version-check", "--no-warn-script-location", str(wheel)],
         cwd=tmp_path, env=env, timeout=900)
    installed = time.perf_counter() - started

    work = tmp_path / "work"  # outside the checkout: nothing of it is on the path
    work.mkdir()
    (work / "where.py").write_text(WHERE, encoding="utf-8")
    module, corpus, baseline = json.loads(_run([str(python), "where.py"], cwd=work,
                                               env=env).stdout)
    assert module.startswith(str(site_packages)) and corpus.startswith(str(site_packages))
    # the baselines are an extra: without it, a clear error names it
    assert "pip install 'trishield[eval]'" in baseline

    trishield = str(home / "bin" / "trishield")
    assert "ingest" in _run([trishield, "--help"], cwd=work, env=env).stdout

    (work / "readme_example.py").write_text(_readme_example(), encoding="utf-8")
    out = _run([str(python), "readme_example.py"], cwd=work, env=env).stdout
    assert "30 days" in out and "['policy'] ['forum-post']" in out

    ingest = _run([trishield, "ingest", corpus, "--kb", "kb", "--tier", "trusted",
                   "--writer", "handbook", "--json"], cwd=work, env=env).stdout
    assert "shipping-policy" in json.loads(ingest)["added"]
    answer = json.loads(_run([trishield, "ask", "How long does shipping to Canada take?",
                              "--kb", "kb", "--panel", "extractive", "--json"],
                             cwd=work, env=env).stdout)
    assert not answer["refused"] and "5-8 business days" in answer["answer"]
    assert answer["citations"] == ["shipping-policy"]

    print(f"built and installed in {installed:.0f} s, "
          f"whole test {time.perf_counter() - started:.0f} s")
