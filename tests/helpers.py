"""Small helpers shared by the test modules (crafted scripts in tmp folders, result files)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path


def write(root: Path, rel: str, text: str) -> Path:
    """Write a dedented script at ``root/rel`` (folders created) and return its path."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))
