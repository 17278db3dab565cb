"""Text that leaves the planner in a file another program reads: the one place that quotes it.

A model or GPU name, a Hugging Face ``_name_or_path``, a price source — every string from a file or a
flag — reaches ``serve.sh``, the Kubernetes/Helm YAML, README/plan Markdown, HTML and CSV exports only
through these functions (issue #20):

* shell: :func:`shell_word` / :func:`shell_line` (``shlex.quote``: one argument, whatever it holds);
* comment lines (``# …`` in ``serve.sh`` and YAML): :func:`comment_line` — control and line-separator
  characters are written as visible escapes (``\\n``, ``\\x1b``, ``\\u2028``), so a comment is always one line;
* YAML bodies: :func:`planner.deploy.k8s.dump_yaml` (``yaml.SafeDumper``: every scalar quoted as it needs);
* Markdown: :func:`md_text` (HTML-escaped, ``|`` escaped, one line) and :func:`md_code_block` (a fence longer
  than any backtick run inside);
* CSV: :func:`csv_cell` — a text cell that a spreadsheet would read as a formula (starting with ``=``, ``+``,
  ``-``, ``@``, tab or carriage return) gets a leading apostrophe (OWASP "CSV injection").

:func:`control_char_problem` is the check the catalog and ``import-hf`` apply on the way in (defence in depth:
a name with a control character is refused there, and quoted here anyway).
"""

from __future__ import annotations

import html
import re
import shlex
import unicodedata
from collections.abc import Iterable

__all__ = ["comment_line", "comment_lines", "control_char_problem", "csv_cell", "md_code_block", "md_text",
           "refuse_control_characters", "shell_line", "shell_word", "visible"]

#: Unicode categories written as escapes: controls (Cc), format characters such as bidi overrides (Cf),
#: line and paragraph separators (Zl, Zp; YAML 1.1 and some editors break lines at U+2028/U+2029/U+0085).
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp"})
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
#: First characters a spreadsheet evaluates (OWASP CSV injection): = + - @ tab carriage-return.
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def _escaped(ch: str) -> bool:
    return unicodedata.category(ch) in _ESCAPED_CATEGORIES


def visible(text: object) -> str:
    """``text`` with every control, format and line-separator character as a visible escape (one line)."""
    s = str(text)
    if not any(_escaped(c) for c in s):
        return s
    out = []
    for c in s:
        if not _escaped(c):
            out.append(c)
        elif c in _NAMED:
            out.append(_NAMED[c])
        elif ord(c) < 0x100:
            out.append(f"\\x{ord(c):02x}")
        else:
            out.append(f"\\u{ord(c):04x}")
    return "".join(out)


def control_char_problem(text: str) -> str | None:
    """Why ``text`` is not acceptable as a name (a control/format/line-separator character), or None."""
    for i, c in enumerate(str(text)):
        if _escaped(c):
            return f"contains the control character U+{ord(c):04X} at position {i + 1}"
    return None


def refuse_control_characters(cls, v):
    """A pydantic field validator (every text field of :class:`planner.specs.FrozenSpec`): a name holding a
    control, format or line-separator character is refused on the way in (and quoted on the way out anyway)."""
    if isinstance(v, str) and (problem := control_char_problem(v)):
        raise ValueError(problem)
    return v


def shell_word(text: object) -> str:
    """One shell word, whatever ``text`` holds (``shlex.quote``)."""
    return shlex.quote(str(text))


def shell_line(argv: Iterable[object], env: dict | None = None) -> str:
    """``[K=V …] argv…`` with every key checked and every value and argument quoted."""
    parts = []
    for k, v in sorted((env or {}).items()):
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(k)):
            raise ValueError(f"environment variable name {visible(k)!r} is not a shell name")
        parts.append(f"{k}={shell_word(v)}")
    return " ".join(parts + [shell_word(a) for a in argv])


def comment_line(text: object, prefix: str = "# ") -> str:
    """One comment line (no newline at its end) for a shell script or YAML file."""
    s = visible(text)
    return (prefix + s) if s else prefix.rstrip()


def comment_lines(lines: Iterable[object], prefix: str = "# ") -> str:
    """Comment lines, each ending in a newline."""
    return "".join(comment_line(x, prefix) + "\n" for x in lines)


def md_text(text: object) -> str:
    """Inline Markdown text: HTML escaped (``<script>`` is never raw), ``|`` escaped for tables, one line."""
    s = html.escape(visible(text), quote=False)
    return s.replace("|", "\\|")


def md_code_block(text: str, lang: str = "") -> list[str]:
    """The lines of a fenced code block holding ``text`` verbatim: the fence is longer than any backtick
    run in ``text``, so nothing inside can close it."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence + lang, text, fence]


def csv_cell(value: object) -> object:
    """A CSV cell: text on one line (control characters as visible escapes: a lone carriage return is not
    quoted by a writer whose lines end in LF, and breaks the row), and text a spreadsheet would evaluate gets a
    leading apostrophe; numbers are left alone."""
    if not isinstance(value, str):
        return value
    if value.startswith(FORMULA_PREFIXES):
        value = "'" + value
    return visible(value)
