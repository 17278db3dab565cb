"""Reading a user's input files without trusting them: every reader of a file the user names (a trace, a
measurement CSV, a load-test JSON, a Hugging Face config.json, a catalog or profile YAML, calibration JSON
lines) goes through here, so each one

* reads regular files only: a directory, FIFO, socket or device (``/dev/zero``, ``/dev/stdin``) is refused by
  name *before* it is opened (opening a FIFO blocks until a writer comes; ``/dev/zero`` never ends);
* reads at most a size cap (:data:`MAX_INPUT_BYTES` for data, :data:`MAX_CONFIG_BYTES` for configs), never
  more than the cap plus one byte, however large the file;
* accepts a UTF-8 byte-order mark (Excel writes one) and names the file, line and column of a byte that is
  not UTF-8;
* turns the parsers' own limits (a CSV field over ``csv.field_size_limit()``, JSON nested past the
  interpreter's recursion limit) into one-line errors naming the file and line.

Every error is a :class:`SpecError` (a ValueError: the CLI's exit 2) whose message starts with the file name.
"""

from __future__ import annotations

import csv
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

#: Largest data file read (traces, measurements, load-test results, calibration records): 256 MiB.
MAX_INPUT_BYTES = 256 * 2**20
#: Largest configuration file read (config.json, catalog and profile YAML): 16 MiB.
MAX_CONFIG_BYTES = 16 * 2**20


class SpecError(ValueError):
    """Bad input: a malformed spec or file, an unknown id, a value out of range.  The message names the file
    and the field (re-exported as :class:`planner.io.catalog.SpecError`)."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


def check_readable(path: str | Path) -> Path:
    """``path`` if it is an existing regular file; else a SpecError saying what it is (no such file, a
    directory, a device, a FIFO), found with ``stat`` alone so that nothing blocks."""
    path = Path(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise SpecError(f"{path}: no such file") from None
    except OSError as err:
        raise SpecError(f"{path}: cannot read ({err.strerror})") from None
    except ValueError as err:  # an embedded NUL byte
        raise SpecError(f"{str(path)!r}: not a usable file name ({err})") from None
    if not stat.S_ISREG(st.st_mode):
        raise SpecError(f"{path}: is {_kind(st.st_mode)}, not a regular file")
    return path


def read_bytes(path: str | Path, max_bytes: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` (SpecError naming the file otherwise)."""
    path = check_readable(path)
    try:
        with open(path, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as err:
        raise SpecError(f"{path}: cannot read ({err.strerror})") from None
    if len(data) > max_bytes:
        raise SpecError(f"{path.name}: larger than the {max_bytes:,}-byte limit for this kind of file")
    return data


def decode_utf8(data: bytes, name: str) -> str:
    """``data`` as UTF-8 text (a leading byte-order mark dropped); a SpecError naming ``name``, the line and
    the column of the first byte that is not UTF-8."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        start = err.start + (3 if data.startswith(b"\xef\xbb\xbf") else 0)
        line = data.count(b"\n", 0, start) + 1
        col = start - (data.rfind(b"\n", 0, start) + 1) + 1
        raise SpecError(f"{name}: not UTF-8 text (byte 0x{data[start]:02x} at line {line}, column {col}); "
                        f"save it as UTF-8") from None


def read_text(path: str | Path, max_bytes: int = MAX_INPUT_BYTES) -> str:
    """A regular file of at most ``max_bytes`` as UTF-8 text (BOM accepted); SpecError naming the file."""
    path = Path(path)
    return decode_utf8(read_bytes(path, max_bytes), path.name)


def loads_json(text: str | bytes, name: str):
    """``json.loads`` with its failures as one SpecError naming ``name`` (and the line for a syntax error)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise SpecError(f"{name}: malformed JSON at line {err.lineno}, column {err.colno}: {err.msg}") from None
    except RecursionError:
        raise SpecError(f"{name}: JSON nested too deeply") from None
    except UnicodeDecodeError:
        raise SpecError(f"{name}: not UTF-8 text") from None


def read_json(path: str | Path, max_bytes: int = MAX_INPUT_BYTES):
    """A JSON file (BOM accepted), bounded as :func:`read_text`."""
    path = Path(path)
    return loads_json(read_text(path, max_bytes), path.name)


def csv_rows(text: str, name: str) -> tuple[list[str], Iterator[tuple[int, dict]]]:
    """(header, iterator of (line number, row dict)) of CSV ``text``; a CSV error (a field larger than
    ``csv.field_size_limit()``, a stray quote) is a SpecError naming ``name`` and the line."""
    reader = csv.DictReader(text.splitlines())
    try:
        header = list(reader.fieldnames or [])
    except csv.Error as err:
        raise SpecError(f"{name} line 1: not CSV ({err})") from None
    header = [h.strip() if isinstance(h, str) else h for h in header]
    reader.fieldnames = header

    def rows():
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as err:
                raise SpecError(f"{name} line {reader.line_num + 1}: not CSV ({err})") from None
            yield reader.line_num, row

    return header, rows()


def check_writable(path: str | Path, field: str) -> Path:
    """``path`` if a file can be written there (not an existing directory, not a named pipe or socket, which
    could block forever: /dev/null, /dev/stdout and /dev/fd/N are fine); SpecError naming ``field`` otherwise."""
    path = Path(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return path
    except OSError as err:
        raise SpecError(f"{field}: {path}: {err.strerror}") from None
    except ValueError as err:  # an embedded NUL byte
        raise SpecError(f"{field}: not a usable file name ({err})") from None
    if stat.S_ISDIR(st.st_mode):
        raise SpecError(f"{field}: {path} is a directory; give a file path")
    if (stat.S_ISFIFO(st.st_mode) or stat.S_ISSOCK(st.st_mode)) and not str(path).startswith("/dev/"):
        raise SpecError(f"{field}: {path} is {_kind(st.st_mode)} (writing could wait forever); give a file path")
    return path


def write_text(path: str | Path, text: str | bytes, field: str) -> Path:
    """Write ``text`` (UTF-8; bytes as they are) to ``path``; any OSError -- a full disk (``/dev/full``), no permission, a
    directory in the way -- is a SpecError naming ``field`` and the file (a full disk raises with no file name
    of its own: the error would otherwise name nothing)."""
    path = Path(path)
    try:
        path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text, encoding="utf-8")
    except OSError as err:
        raise SpecError(f"{field}: cannot write '{path}': {err.strerror or err}") from None
    return path
