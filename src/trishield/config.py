"""Where TriShield finds its data and keeps its caches.

Data sets are never committed to the project; they are read from a data directory so that users
can point TriShield at their own copy. Resolution order, first match wins:

1. the ``TRISHIELD_DATA_DIR`` environment variable (or ``--data-dir`` on the CLI, which sets it);
2. a folder ``shared/data`` beside the current directory (``../shared/data``): the project's
   developers and its continuous integration keep the data sets there, next to the checkout
   they run the tests and benchmarks from, so a clone needs no setting;
3. the same folder beside the source checkout this package was installed from (an editable
   install, ``pip install -e .``, run from another directory).

When none exists, the first ``../shared/data`` is returned, and ``trishield datasets`` names it
as the place it looked. Caches (assembled models, LLM responses) are per user instead:
:func:`cache_dir`.
"""

from __future__ import annotations

import os
from pathlib import Path

DATA_DIR_ENV = "TRISHIELD_DATA_DIR"
CACHE_DIR_ENV = "TRISHIELD_CACHE_DIR"

OFFLINE_ENVIRONMENT = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                       "TOKENIZERS_PARALLELISM": "false"}
"""Models are loaded from installed packages only: never let a library reach for a model hub
(and keep the tokenizers' threads from fighting the readers for 2 cores)."""


def enforce_offline() -> None:
    """Set :data:`OFFLINE_ENVIRONMENT` where the user has not chosen otherwise.

    Called by the CLI and right before anything imports ``transformers``,
    ``sentence_transformers`` or ``huggingface_hub`` (they read these variables when first
    imported), never at import time: importing a library must not change its host's
    environment.
    """
    for name, value in OFFLINE_ENVIRONMENT.items():
        os.environ.setdefault(name, value)


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
