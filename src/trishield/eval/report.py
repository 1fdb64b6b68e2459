"""Deterministic report files: canonical JSON and a self-contained HTML page with SVG charts.

Reports must be byte-identical across runs, so the JSON is written with sorted keys and floats
rounded once, here, and the HTML draws its bar charts as inline SVG computed from those numbers
(no plotting library, no timestamps, no random ids). Wall-clock figures, which differ between
runs, belong in a separate ``timing.json`` that the caller writes beside the report.
"""

from __future__ import annotations

import html
import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

FLOAT_DIGITS = 4


def canonical(value: Any) -> Any:
    """Round floats, turn tuples into lists, recursively: one JSON form for one result."""
    if isinstance(value, float):
        return round(value, FLOAT_DIGITS)
    if isinstance(value, dict):
        return {str(k): canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    return value


def dumps(payload: Any) -> str:
    return json.dumps(canonical(payload), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write_atomic(path: Path, text: str) -> None:
    """Write ``path`` whole or not at all (temporary file + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def bar_chart(title: str, bars: Sequence[tuple[str, float]], *, maximum: float = 1.0,
              width: int = 560, colour: str = "#3b6ea8") -> str:
    """A horizontal bar chart as inline SVG (values in [0, maximum])."""
    row, label_width = 22, 190
    height = row * len(bars) + 30
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'role="img" aria-label="{html.escape(title)}">',
             f'<text x="0" y="14" font-size="13" font-weight="bold">{html.escape(title)}</text>']
    span = width - label_width - 60
    for index, (label, value) in enumerate(bars):
        y = 24 + index * row
        length = 0 if maximum <= 0 else max(0.0, min(1.0, value / maximum)) * span
        parts.append(f'<text x="0" y="{y + 14}" font-size="12">{html.escape(label)}</text>')
        parts.append(f'<rect x="{label_width}" y="{y + 3}" width="{length:.1f}" height="14" '
                     f'fill="{colour}"/>')
        parts.append(f'<text x="{label_width + length + 4:.1f}" y="{y + 14}" font-size="12">'
                     f'{value:.2f}</text>')
    parts.append("</svg>")
    return "".join(parts)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_cell(c))}</td>" for c in row) + "</tr>"
                   for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub Markdown table, so the docs' figures are pasted from a generated file, not typed."""
    def line(cells: Sequence[Any]) -> str:
        return "| " + " | ".join(_cell(c).replace("|", "\\|") for c in cells) + " |"
    return "\n".join([line(headers), "|" + "---|" * len(headers), *map(line, rows)]) + "\n"


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.{FLOAT_DIGITS}g}" if abs(value) < 1e-3 and value else f"{value:.3f}"
    return "" if value is None else str(value)


def page(title: str, sections: Sequence[tuple[str, str]]) -> str:
    """A complete HTML document; ``sections`` are (heading, already-escaped HTML) pairs."""
    style = ("body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px}"
             "table{border-collapse:collapse;margin:.5em 0 1.5em}"
             "td,th{border:1px solid #ccc;padding:3px 7px;font-size:13px;text-align:left}"
             "th{background:#f0f0f0}h2{margin-top:1.6em}")
    body = "".join(f"<h2>{html.escape(h)}</h2>{content}" for h, content in sections)
    return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><style>{style}</style></head>"
            f"<body><h1>{html.escape(title)}</h1>{body}</body></html>\n")
