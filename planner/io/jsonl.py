"""JSON-lines record files, read tolerantly: each line on its own, so one bad line (cut short by a crash, not
UTF-8, not JSON, not an object, nested too deeply) is skipped and counted with its line number, never fatal
for the others.  The file itself is read as :mod:`planner.io.files` reads every input (a regular file of at most
256 MiB)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from planner.io.files import MAX_INPUT_BYTES, read_bytes


class Record(dict):
    """One JSON object of a JSON-lines file, with where it came from: ``file`` (name) and ``line`` (1-based).
    A dict in every other respect (equal to the plain dict, dumped as one)."""

    __slots__ = ("file", "line")

    def __init__(self, data=(), file: str = "", line: int = 0):
        super().__init__(data)
        self.file = file
        self.line = line

    def where(self) -> str:
        """``name:line`` (or '' for a record not read from a file)."""
        return f"{self.file}:{self.line}" if self.file else ""


def where(rec: dict) -> str:
    """``file:line`` of a record read by :func:`read_jsonl` ('' for any other dict)."""
    return rec.where() if isinstance(rec, Record) else ""


def read_jsonl(path: str | Path, skipped: list[tuple[int, str]] | None = None,
               max_bytes: int = MAX_INPUT_BYTES) -> list[Record]:
    """Every JSON object of a JSON-lines file, in order, as :class:`Record`; [] when the file does not exist.
    A line that is not UTF-8, not JSON or not an object is left out and, when ``skipped`` is given, added
    to it as (line number, reason)."""
    path = Path(path)
    if not path.exists():
        return []
    out: list[Record] = []
    for k, raw in enumerate(read_bytes(path, max_bytes).split(b"\n"), 1):
        raw = raw.strip()
        if k == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        if not raw:
            continue
        try:
            rec = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:
            reason = "not UTF-8"
        except json.JSONDecodeError as err:
            reason = f"not JSON ({err.msg}, column {err.colno})"  # e.g. a line cut short by a crash
        except RecursionError:
            reason = "JSON nested too deeply"
        else:
            if isinstance(rec, dict):
                out.append(Record(rec, path.name, k))
                continue
            reason = f"a JSON {type(rec).__name__}, not an object"
        if skipped is not None:
            skipped.append((k, reason))
    return out


def json_safe(obj):
    """``obj`` with every non-finite float (NaN, ±inf: an error of a measurement of 1e-320 s, say) as None --
    JSON null, the value ``--json`` documents for "no number" -- in dicts, lists and tuples at any depth."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if hasattr(obj, "item") and hasattr(obj, "dtype") and getattr(obj, "ndim", 1) == 0:  # a numpy scalar
        return json_safe(obj.item())
    return obj
