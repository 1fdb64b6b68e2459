"""How big the code is, where it is big: modules, lines and the largest modules and functions.

Issue 52 asks for these before and after the knowledge base is split into parts, so that the
claim "no module over ~500 lines without a reason written at its top" is a printed figure,
not a promise. For a package directory (default ``src/trishield``) and one subpackage of it
(default ``kb``) it prints:

* the number of modules and their physical lines (blank and comment lines included: what a
  reader scrolls through), in the package and in the subpackage;
* the ``--top`` largest modules (lines) and the ``--top`` largest functions and methods
  (lines from the ``def`` to the last line of the body, decorators excluded), found with
  :mod:`ast`;
* the modules over ``--limit`` lines, each with whether its docstring gives a reason for its
  size (the convention: "Over 500 lines on purpose: <why>" in its first 30 lines).

Figures only, never pass/fail; ``--json FILE`` also writes them. Reading files only: a few
hundred milliseconds, no load-average sensitivity worth printing.

    python benchmarks/code_size.py
    python benchmarks/code_size.py --package src/trishield --sub kb --top 10 --json out.json
"""

from __future__ import annotations

import argparse
import ast
import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

REASON = re.compile(r"over ~?500 lines on purpose:")


@dataclass(frozen=True)
class Module:
    path: str
    lines: int
    reason: bool
    """Whether the module's head explains its size (see the module docstring)."""


@dataclass(frozen=True)
class Function:
    where: str
    name: str
    lines: int


def _modules(root: Path, base: Path) -> list[Module]:
    found = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        head = " ".join(text.splitlines()[:30]).lower()
        found.append(Module(str(path.relative_to(base)), len(text.splitlines()),
                            REASON.search(head) is not None))
    return found


def _functions(root: Path, base: Path) -> list[Function]:
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        stack: list[tuple[ast.AST, str]] = [(tree, "")]
        while stack:
            node, prefix = stack.pop()
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                    name = f"{prefix}{child.name}"
                    found.append(Function(str(path.relative_to(base)), name,
                                          child.end_lineno - child.lineno + 1))
                    stack.append((child, f"{name}."))
                elif isinstance(child, ast.ClassDef):
                    stack.append((child, f"{prefix}{child.name}."))
    return found


def measure(package: Path, sub: str, top: int, limit: int) -> dict[str, object]:
    """Every figure this script prints, as one JSON-ready dict."""
    base = package.parent
    modules = _modules(package, base)
    functions = _functions(package, base)
    sub_root = package / sub
    sub_modules = [m for m in modules if Path(base / m.path).is_relative_to(sub_root)]
    sub_functions = [f for f in functions if Path(base / f.where).is_relative_to(sub_root)]
    by_lines = sorted(modules, key=lambda m: (-m.lines, m.path))
    return {
        "package": {"modules": len(modules), "lines": sum(m.lines for m in modules)},
        "sub": {"name": sub, "modules": len(sub_modules),
                "lines": sum(m.lines for m in sub_modules),
                "largest_modules": [asdict(m) for m in sorted(
                    sub_modules, key=lambda m: (-m.lines, m.path))[:top]],
                "largest_functions": [asdict(f) for f in sorted(
                    sub_functions, key=lambda f: (-f.lines, f.where, f.name))[:top]],
                "over_limit": [asdict(m) for m in sub_modules if m.lines > limit]},
        "largest_modules": [asdict(m) for m in by_lines[:top]],
        "largest_functions": [asdict(f) for f in sorted(
            functions, key=lambda f: (-f.lines, f.where, f.name))[:top]],
        "over_limit": [asdict(m) for m in by_lines if m.lines > limit],
        "limit": limit,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--package", type=Path, default=Path("src/trishield"))
    parser.add_argument("--sub", default="kb", help="a subpackage to report on its own")
    parser.add_argument("--top", type=int, default=8)
    parser.add_argument("--limit", type=int, default=500, help="module lines called large")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if not (args.package / "__init__.py").is_file():
        parser.error(f"{args.package} is not a package directory")
    if not (args.package / args.sub).is_dir():
        parser.error(f"{args.package / args.sub} is not a directory")
    if args.top < 1 or args.limit < 1:
        parser.error("--top and --limit must be positive")
    figures = measure(args.package, args.sub, args.top, args.limit)
    package, sub = figures["package"], figures["sub"]
    print(f"{args.package}: {package['modules']} modules, {package['lines']} lines")
    print(f"{args.package / args.sub}: {sub['modules']} modules, {sub['lines']} lines")
    for title, rows in ((f"largest modules in {sub['name']}/", sub["largest_modules"]),
                        ("largest modules in the package", figures["largest_modules"])):
        print(f"\n{title}")
        for row in rows:
            print(f"  {row['lines']:5d}  {row['path']}")
    for title, rows in ((f"largest functions in {sub['name']}/", sub["largest_functions"]),
                        ("largest functions in the package", figures["largest_functions"])):
        print(f"\n{title}")
        for row in rows:
            print(f"  {row['lines']:5d}  {row['where']}: {row['name']}")
    print(f"\nmodules over {args.limit} lines (reason at the top: yes/no)")
    for row in figures["over_limit"]:
        print(f"  {row['lines']:5d}  {row['path']}  {'yes' if row['reason'] else 'no'}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
