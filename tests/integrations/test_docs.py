"""docs/integrations.md: every example compiles and imports what the package exports."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

DOC = Path(__file__).parents[2] / "docs" / "integrations.md"
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def test_every_example_compiles_and_its_imports_exist() -> None:
    blocks = BLOCK.findall(DOC.read_text(encoding="utf-8"))
    assert len(blocks) >= 4, "an example per library and Ring 3's"
    imported = set()
    for block in blocks:
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.ImportFrom) and node.module.startswith("trishield"):
                module = importlib.import_module(node.module)
                for alias in node.names:
                    assert hasattr(module, alias.name), f"{node.module}.{alias.name}"
                    imported.add(alias.name)
    assert {"TriShieldPostprocessor", "TriShieldRetriever", "TriShieldRunnable",
            "TriShieldRanker"} <= imported
