"""What an installed TriShield weighs and how fast it starts, per Python environment.

For each ``--python`` (an environment's interpreter; default: this one) it measures, in
fresh processes of that interpreter:

* **installed size**: the bytes under its site-packages directories, and the largest
  distributions (the files their ``RECORD`` lists);
* ``import trishield``: the wall-clock seconds of ``python -c "import trishield"``;
* ``trishield --help``: the same for the environment's ``trishield`` command (next to its
  interpreter; ``python -m trishield.cli`` when there is none).

Each timing is the median of ``--runs`` runs after one warm-up (so the files are in the page
cache, as on a second call); min and max are printed too. With two or more environments,
each figure is also given as a ratio to the first one's, measured in the same run and
interleaved run by run, so load from other processes hits them alike. The 1-minute load
average is printed before and after: above the CPU count the timings are pessimistic.
Figures only, never pass/fail; also written to ``benchmarks/results/install_footprint.json``.

Build an environment from the wheel as tests/test_wheel_install.py does, e.g.::

    python -m build --no-isolation --outdir dist .
    python -m venv /tmp/ts && /tmp/ts/bin/pip install torch==2.13.0 dist/trishield-*.whl
    python benchmarks/install_footprint.py --python /tmp/ts-before/bin/python \\
        --python /tmp/ts/bin/python --runs 5
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).parent / "results"

_SIZES = r"""
import json, os, site, sysconfig
from importlib import metadata
dirs = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
total = 0
for top in dirs:
    for root, _, files in os.walk(top):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
dists = {}
for dist in metadata.distributions():
    size = 0
    for entry in dist.files or ():
        try:
            size += os.lstat(dist.locate_file(entry)).st_size
        except OSError:
            pass
    dists[dist.metadata["Name"]] = size
print(json.dumps({"dirs": dirs, "bytes": total, "distributions": dists}))
"""


def _load() -> float:
    return os.getloadavg()[0]


def _timed(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600,
                          check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n"
                         f"{done.stderr[-2000:]}")
    return seconds


def _commands(python: Path) -> dict[str, list[str]]:
    script = python.parent / "trishield"
    help_command = [str(script), "--help"] if script.is_file() else \
        [str(python), "-m", "trishield.cli", "--help"]
    return {"import trishield": [str(python), "-c", "import trishield"],
            "trishield --help": help_command}


def _summary(values: list[float]) -> dict[str, float]:
    return {"median_s": round(statistics.median(values), 3),
            "min_s": round(min(values), 3), "max_s": round(max(values), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", type=Path, action="append", default=None,
                        help="an environment's interpreter (repeatable; default: this one)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--top", type=int, default=12, help="largest distributions listed")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    pythons = [p.absolute() for p in (args.python or [Path(sys.executable)])]
    for python in pythons:
        if not python.is_file():
            parser.error(f"no interpreter at {python}")
    # the offline variables as `trishield` sets them; nothing else of this environment's
    # Python setup (PYTHONPATH would make one environment import another's package)
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTHON")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")

    print("command:", " ".join([sys.executable, *sys.argv]))
    print(f"CPUs {os.cpu_count()}, load average (1 min) before: {_load():.2f}")
    report: dict = {"command": sys.argv, "cpus": os.cpu_count(),
                    "platform": platform.platform(), "environments": {}}
    for python in pythons:
        sizes = json.loads(subprocess.run([str(python), "-c", _SIZES], capture_output=True,
                                          text=True, check=True, env=env).stdout)
        report["environments"][str(python)] = {"installed_bytes": sizes["bytes"],
                                               "site_packages": sizes["dirs"],
                                               "distributions": sizes["distributions"]}

    timings: dict[str, dict[str, list[float]]] = {str(p): {} for p in pythons}
    for python in pythons:  # warm-up: the files into the page cache
        for command in _commands(python).values():
            _timed(command, env)
    for _ in range(args.runs):
        for python in pythons:
            for name, command in _commands(python).items():
                timings[str(python)].setdefault(name, []).append(_timed(command, env))

    first = str(pythons[0])
    for python in map(str, pythons):
        entry = report["environments"][python]
        entry["timings"] = {name: _summary(values) for name, values in timings[python].items()}
        mib = entry["installed_bytes"] / 2**20
        ratio = entry["installed_bytes"] / report["environments"][first]["installed_bytes"]
        print(f"\n{python}\n  installed: {mib:,.0f} MiB (x{ratio:.2f} of the first)")
        largest = sorted(entry["distributions"].items(), key=lambda item: -item[1])
        for name, size in largest[:args.top]:
            print(f"    {name:32s} {size / 2**20:8,.0f} MiB")
        for name, summary in entry["timings"].items():
            base = report["environments"][first]["timings"][name]["median_s"]
            print(f"  {name:18s} median {summary['median_s']:.2f} s (min {summary['min_s']:.2f}, "
                  f"max {summary['max_s']:.2f}; x{summary['median_s'] / base:.2f} of the first)")
    report["load_average_1min_after"] = _load()
    print(f"\nload average (1 min) after: {report['load_average_1min_after']:.2f}")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "install_footprint.json").write_text(json.dumps(report, indent=1) + "\n")
    print("command:", " ".join([sys.executable, *sys.argv]))


if __name__ == "__main__":
    main()
