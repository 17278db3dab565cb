"""JSON-lines record files: read tolerantly (a line cut short by a crash is skipped, not fatal)."""

from __future__ import annotations

import json
from pathlib import Path


def read_jsonl(path: str | Path) -> list[dict]:
    """Every complete JSON object of a JSON-lines file; [] when the file does not exist."""
    path = Path(path)
    if not path.exists():
        return []
    out: list[dict] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short by a crash
        if isinstance(rec, dict):
            out.append(rec)
    return out
