"""``/docs``: the API reference as one server-rendered HTML page, from the OpenAPI document.

Why not Swagger UI or ReDoc: FastAPI's pages load their JavaScript and CSS from a CDN, which
an offline server cannot reach, and start with an inline script, which the service's own
Content-Security-Policy (``script-src 'self'``, set because the viewer shows attacker-written
text) forbids; the page stayed blank. Shipping a copy of Swagger UI would add a large
third-party bundle to maintain for a page that only has to list endpoints. This page needs no
script at all: every endpoint with its summary, parameters, body, responses and the schemas
they use, styled by one same-origin stylesheet. ``/openapi.json`` stays the machine-readable
document (for Swagger UI or any other client run elsewhere).
"""

from __future__ import annotations

from html import escape
from typing import Any

STYLESHEET = """
body { font: 15px/1.5 system-ui, sans-serif; margin: 2rem auto; max-width: 60rem;
       padding: 0 1rem; color: #1d1d1f; }
h1 { margin-bottom: 0; } h2 { border-bottom: 1px solid #ddd; margin-top: 2.5rem; }
.op { border: 1px solid #ddd; border-radius: 6px; margin: 1rem 0; padding: .5rem 1rem; }
.method { display: inline-block; min-width: 4.5rem; font-weight: 700; }
.get { color: #1565c0; } .post { color: #2e7d32; } .delete { color: #c62828; }
code, .path { font-family: ui-monospace, monospace; }
table { border-collapse: collapse; margin: .5rem 0; }
td, th { border: 1px solid #e0e0e0; padding: .2rem .6rem; text-align: left;
         vertical-align: top; }
.muted { color: #666; }
"""


def _type(schema: dict[str, Any]) -> str:
    """A short readable type for a JSON schema (refs by name, unions with ``|``)."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f'<a href="#schema-{escape(name)}">{escape(name)}</a>'
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            return " | ".join(_type(part) for part in schema[key])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"list[{_type(schema.get('items', {}))}]"
    if "enum" in schema:
        return " | ".join(escape(repr(value)) for value in schema["enum"])
    return escape(str(kind))


def _parameters(operation: dict[str, Any]) -> str:
    rows = [f"<tr><td><code>{escape(p['name'])}</code></td><td>{escape(p['in'])}</td>"
            f"<td>{_type(p.get('schema', {}))}</td>"
            f"<td>{'required' if p.get('required') else ''}</td>"
            f"<td>{escape(p.get('description', ''))}</td></tr>"
            for p in operation.get("parameters", [])]
    if not rows:
        return ""
    return ("<table><tr><th>parameter</th><th>in</th><th>type</th><th></th><th></th></tr>"
            + "".join(rows) + "</table>")


def _operation(path: str, method: str, operation: dict[str, Any]) -> str:
    body = operation.get("requestBody", {}).get("content", {}).get("application/json")
    responses = "".join(
        f"<tr><td>{escape(code)}</td><td>{escape(answer.get('description', ''))}</td><td>"
        + _type(answer.get("content", {}).get("application/json", {}).get("schema", {}))
        + "</td></tr>"
        for code, answer in sorted(operation.get("responses", {}).items()))
    description = escape(operation.get("description", "")).replace("\n\n", "<br><br>")
    return (f'<div class="op"><p><span class="method {escape(method)}">{method.upper()}</span>'
            f' <span class="path">{escape(path)}</span> — {escape(operation.get("summary", ""))}'
            f"</p><p>{description}</p>{_parameters(operation)}"
            + (f"<p>JSON body: {_type(body.get('schema', {}))}</p>" if body else "")
            + f"<table><tr><th>status</th><th>meaning</th><th>body</th></tr>{responses}"
              "</table></div>")


def _schema(name: str, schema: dict[str, Any]) -> str:
    required = set(schema.get("required", []))
    rows = "".join(
        f"<tr><td><code>{escape(field)}</code></td><td>{_type(spec)}</td>"
        f"<td>{'required' if field in required else ''}</td>"
        f"<td>{escape(spec.get('description', ''))}</td></tr>"
        for field, spec in schema.get("properties", {}).items())
    return (f'<h3 id="schema-{escape(name)}">{escape(name)}</h3>'
            f'<p class="muted">{escape(schema.get("description", ""))}</p>'
            + (f"<table><tr><th>field</th><th>type</th><th></th><th></th></tr>{rows}</table>"
               if rows else ""))


def render(openapi: dict[str, Any], *, stylesheet_url: str) -> str:
    """The whole page: no script, no inline style, nothing from another origin."""
    info = openapi.get("info", {})
    groups: dict[str, list[str]] = {}
    for path, methods in openapi.get("paths", {}).items():
        for method, operation in methods.items():
            tag = (operation.get("tags") or ["other"])[0]
            groups.setdefault(tag, []).append(_operation(path, method, operation))
    sections = "".join(f"<h2>{escape(tag)}</h2>{''.join(items)}"
                       for tag, items in groups.items())
    schemas = "".join(_schema(name, schema) for name, schema in sorted(
        openapi.get("components", {}).get("schemas", {}).items()))
    return ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(info.get('title', 'API'))} API</title>"
            f'<link rel="stylesheet" href="{escape(stylesheet_url)}"></head><body>'
            f"<h1>{escape(info.get('title', 'API'))} "
            f"<span class=\"muted\">{escape(info.get('version', ''))}</span></h1>"
            f"<p>{escape(info.get('description', ''))}</p>"
            "<p>Send <code>Authorization: Bearer &lt;API key&gt;</code> (from <code>trishield "
            "keys create</code>) to every <code>/v1</code> endpoint. Machine-readable: "
            '<a href="/openapi.json">/openapi.json</a>. Errors are JSON: '
            "<code>{\"error\", \"status\", \"details\"}</code>; 503 carries "
            "<code>Retry-After</code> when the knowledge base is busy.</p>"
            f"{sections}<h2>schemas</h2>{schemas}</body></html>")
