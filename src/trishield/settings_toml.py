"""The effective configuration written back as a TOML file (``trishield config show``).

The output is a valid configuration file: feeding it to :func:`trishield.settings.load_settings`
gives the same settings, so a user can start from the defaults and edit what they need. Keys
are placed in the sections the file documents, named members before ``[[panel.remote]]`` tables
(the order the file gives them); Ring 1's per-detector pattern weights are left out because the
file cannot set them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from trishield.settings import NOT_IN_FILE, RETRIEVAL_KEYS, Settings

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(name: str) -> str:
    return name if _BARE_KEY.match(name) else json.dumps(name, ensure_ascii=False)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)  # inf and nan are spelt the same way in TOML
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # JSON's escapes are valid TOML
    if isinstance(value, Mapping):
        items = [f"{_key(str(k))} = {_value(v)}" for k, v in value.items() if v is not None]
        return "{ " + ", ".join(items) + " }" if items else "{}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise ValueError(f"cannot write {value!r} as TOML")


def _table(header: str, values: Mapping[str, Any]) -> list[str]:
    return [header, *(f"{_key(k)} = {_value(v)}" for k, v in values.items() if v is not None)]


def to_toml(settings: Settings, *, source: str | None = None) -> str:
    """``settings`` as a configuration file, with a comment naming where they came from."""
    pipeline = asdict(settings.pipeline)
    scorer = pipeline["scorer"]
    retrieval = {"backend": pipeline["backend"], **{k: scorer[k] for k in RETRIEVAL_KEYS}}
    ring2 = {k: v for k, v in scorer.items() if k not in RETRIEVAL_KEYS}
    ring1 = {k: v for k, v in pipeline["guard"].items() if k not in NOT_IN_FILE}
    members = [m for m in settings.panel if isinstance(m, str)]
    origin = f"defaults overridden by {source}" if source else "defaults"
    lines = [f"# TriShield effective configuration ({origin})",
             *_table("[retrieval]", retrieval), "", *_table("[ring1]", ring1), "",
             *_table("[ring2]", ring2), "", *_table("[ring3]", pipeline["consensus"]), "",
             *_table("[panel]", {"members": members,
                                 "second_reader": settings.second_reader or "none"})]
    for remote in (m for m in settings.panel if not isinstance(m, str)):
        lines += ["", *_table("[[panel.remote]]", remote)]
    lines += ["", *_table("[service]", asdict(settings.service))]
    return "\n".join(lines) + "\n"
