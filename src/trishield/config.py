"""Where TriShield finds its data and keeps its caches.

Data sets are never committed to the project; they are read from a data directory so that users
can point TriShield at their own copy. Resolution order, first match wins:

1. the ``TRISHIELD_DATA_DIR`` environment variable (or ``--data-dir`` on the CLI, which sets it);
2. ``../shared/data`` relative to the current directory (the layout of this workplace and CI);
3. ``../shared/data`` relative to the project checkout that holds this package.
"""

from __future__ import annotations

import os
from pathlib import Path

DATA_DIR_ENV = "TRISHIELD_DATA_DIR"
CACHE_DIR_ENV = "TRISHIELD_CACHE_DIR"

# Models are loaded from installed packages only: never let a library reach for a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def project_root() -> Path:
    """The checkout this package lives in (meaningful for an editable install)."""
    return Path(__file__).resolve().parents[2]


def data_dir() -> Path:
    """The directory holding the public evaluation data (see ``trishield datasets``)."""
    configured = os.environ.get(DATA_DIR_ENV)
    if configured:
        return Path(configured).expanduser().resolve()
    beside_cwd = Path.cwd() / ".." / "shared" / "data"
    beside_checkout = project_root().parent / "shared" / "data"
    for candidate in (beside_cwd, beside_checkout):
        if candidate.is_dir():
            return candidate.resolve()
    return (Path.cwd() / ".." / "shared" / "data").resolve()


def cache_dir() -> Path:
    """A per-user cache shared by every clone (assembled models, LLM responses)."""
    configured = os.environ.get(CACHE_DIR_ENV)
    if configured:
        base = Path(configured).expanduser()
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "trishield"
    base.mkdir(parents=True, exist_ok=True)
    return base
