"""The only reader of models/*.yaml, hardware/*.yaml and calibration/profiles/*.yaml.

Errors are :class:`SpecError` with a one-line message naming the file and the field, never a
pydantic traceback or a KeyError deep inside a computation.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from planner.io.files import MAX_CONFIG_BYTES, SpecError, read_text
from planner.profile import IDEAL_PROFILE, CalibrationProfile
from planner.specs import GpuSpec, ModelSpec

__all__ = ["SpecError", "gpu", "gpus", "load_profile", "model", "models", "profile_errors", "profile_for", "profiles",
           "resolve_profile"]

ROOT = Path(os.environ.get("PLANNER_DATA_DIR", Path(__file__).resolve().parents[2]))
MODELS_DIR = ROOT / "models"
HARDWARE_DIR = ROOT / "hardware"
PROFILES_DIR = ROOT / "calibration" / "profiles"

T = TypeVar("T", bound=BaseModel)


def format_validation_error(err: ValidationError, where: str = "") -> str:
    parts = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"]) or "(root)"
        msg = e["msg"].removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}")
    prefix = f"{where}: " if where else ""
    return prefix + "; ".join(parts)


def parse_spec(cls: type[T], data: object, where: str = "") -> T:
    """Validate ``data`` as ``cls``; raise SpecError naming the field on failure."""
    if not isinstance(data, dict):
        raise SpecError(f"{where}: expected a mapping of fields, got {type(data).__name__}")
    try:
        return cls.model_validate(data)
    except ValidationError as err:
        raise SpecError(format_validation_error(err, where)) from None


#: libyaml's parser (C, ~10x faster: the catalog's ~40 files load at every cold start) where PyYAML was built
#: with it, else the pure-Python one; both feed the same SafeConstructor and Resolver, so the documents are the
#: same objects.  libyaml refuses nesting deeper than 1,000 levels itself (a YAMLError, never a C stack overflow).
_SAFE_LOADER = yaml.CSafeLoader if getattr(yaml, "__with_libyaml__", False) else yaml.SafeLoader


class UniqueKeyLoader(_SAFE_LOADER):
    """``yaml.SafeLoader`` (its C parser where available) that refuses a mapping with the same key twice (PyYAML
    keeps the last silently: a second ``memory_bytes:`` further down a file would win without a word)."""

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            try:
                first = seen.setdefault(key, key_node.start_mark.line + 1)
            except TypeError:  # unhashable key: SafeLoader says so itself
                continue
            if first != key_node.start_mark.line + 1:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key '{key}' (first at line {first})", key_node.start_mark)
        return super().construct_mapping(node, deep)


def _timestamp_as_text(loader, node):
    """An unquoted date/time stays the text it is (``created: 2024-13-45`` is then refused by the field that
    holds it, naming the field, instead of PyYAML's bare "month must be in 1..12")."""
    return loader.construct_scalar(node)


UniqueKeyLoader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp_as_text)


def load_yaml_file(path: Path) -> object:
    """A YAML file (at most 16 MiB, regular, UTF-8) parsed safely; duplicate keys, malformed YAML and
    nesting too deep are a SpecError naming the file and line."""
    path = Path(path)
    text = read_text(path, MAX_CONFIG_BYTES)
    try:
        return yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as err:
        if "maximum nesting depth" in str(getattr(err, "problem", "")):  # libyaml's limit: as the recursion below
            raise SpecError(f"{path.name}: YAML nested too deeply") from None
        mark = getattr(err, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise SpecError(f"{path.name}: malformed YAML{at}: {getattr(err, 'problem', err)}") from None
    except RecursionError:
        raise SpecError(f"{path.name}: YAML nested too deeply") from None


def load_spec_file(cls: type[T], path: Path) -> T:
    spec = parse_spec(cls, load_yaml_file(path), Path(path).name)
    want = Path(path).stem
    got = getattr(spec, "id", want)
    if cls is not CalibrationProfile and got != want:
        raise SpecError(f"{Path(path).name}: id '{got}' does not match the file name '{want}'")
    return spec


def _load_dir(cls: type[T], directory: Path) -> dict[str, T]:
    out: dict[str, T] = {}
    for path in sorted(Path(directory).glob("*.yaml")):
        spec = load_spec_file(cls, path)
        out[path.stem] = spec
    return out


@functools.cache
def models() -> dict[str, ModelSpec]:
    return _load_dir(ModelSpec, MODELS_DIR)


@functools.cache
def gpus() -> dict[str, GpuSpec]:
    return _load_dir(GpuSpec, HARDWARE_DIR)


def _lookup(kind: str, table: dict[str, T], key: str) -> T:
    try:
        return table[key]
    except KeyError:
        raise SpecError(f"{kind}: unknown id '{key}'; known: {', '.join(sorted(table))}") from None


@functools.cache
def _one(cls: type[T], directory: Path, key: str) -> T | None:
    path = Path(directory) / f"{key}.yaml"
    try:
        if "/" in key or "\x00" in key or key.startswith(".") or len(key) > 200 or not path.is_file():
            return None
    except OSError:  # a name the file system refuses is simply not a catalog id
        return None
    return load_spec_file(cls, path)


def model(model_id: str) -> ModelSpec:
    """One model by id (reads only its own file: a broken neighbour does not block it)."""
    return _one(ModelSpec, MODELS_DIR, model_id) or _lookup("model", models(), model_id)


def gpu(gpu_id: str) -> GpuSpec:
    """One GPU by id (reads only its own file)."""
    return _one(GpuSpec, HARDWARE_DIR, gpu_id) or _lookup("gpu", gpus(), gpu_id)


@functools.cache
def _scan_profiles() -> tuple[tuple[tuple[Path, CalibrationProfile], ...], tuple[tuple[Path, str, str], ...]]:
    good, broken = [], []
    for path in sorted(PROFILES_DIR.glob("*.yaml")):
        data = None
        try:
            data = load_yaml_file(path)
            good.append((path, parse_spec(CalibrationProfile, data, path.name)))
        except SpecError as err:  # one broken file must not take every GPU's --profile auto down
            gpu_id = data.get("gpu_id") if isinstance(data, dict) else None
            broken.append((path, str(gpu_id or path.stem.split("-vllm-")[0]), str(err)))
    return tuple(good), tuple(broken)


def profiles() -> tuple[tuple[Path, CalibrationProfile], ...]:
    """Every readable profile of calibration/profiles/ (the unreadable ones: :func:`profile_errors`)."""
    return _scan_profiles()[0]


def profile_errors(gpu_id: str | None = None) -> list[tuple[Path, str]]:
    """(path, one-line error) of each profile file that could not be read -- those for ``gpu_id`` only when
    given (the GPU is the file's ``gpu_id`` where readable, else the file name before ``-vllm-``)."""
    return [(p, e) for p, g, e in _scan_profiles()[1] if gpu_id is None or g == gpu_id]


def profile_for(gpu_id: str, engine_version: str | None = None, *, transfer: bool = False
                ) -> CalibrationProfile | None:
    """The newest committed calibrated profile for a GPU (and engine version, if given).

    With ``transfer=True`` a GPU that has none gets the newest profile of another GPU, preferring the
    same vendor, transferred (mode 'transferred'): its efficiencies and overheads applied to this GPU's
    datasheet roofs — far closer to a real engine than the ideal roofline (which a ranking would
    otherwise favour unfairly against measured GPUs), but not measured here."""
    broken = profile_errors(gpu_id)
    if broken:  # this GPU's own profile is unreadable: say so rather than fall back to another silently
        raise SpecError(f"calibration profile {broken[0][0].name} for {gpu_id} is unreadable: {broken[0][1]}")

    def newest(pred):
        found = [p for _, p in profiles()
                 if pred(p) and (engine_version in (None, "") or p.engine_version == engine_version)]
        found.sort(key=lambda p: p.created)
        return found[-1] if found else None

    own = newest(lambda p: p.gpu_id == gpu_id)
    if own is not None or not transfer:
        return own
    vendor = gpu(gpu_id).vendor
    other = newest(lambda p: p.gpu_id in gpus() and gpus()[p.gpu_id].vendor == vendor) or newest(
        lambda p: p.gpu_id in gpus())
    return other.transferred_to(gpu_id) if other is not None else None


def load_profile(path: str | Path) -> CalibrationProfile:
    return parse_spec(CalibrationProfile, load_yaml_file(Path(path)), Path(path).name)


def resolve_profile(value: str, gpu_id: str, *, engine_version: str | None = None,
                    field: str = "profile") -> tuple[CalibrationProfile, str]:
    """``(profile, sentence saying which mode)`` for a ``--profile`` value: 'auto', 'none' or a YAML path.

    'none' is the ideal roofline; 'auto' the newest committed profile for ``gpu_id`` (for
    ``engine_version`` first, when given), else another GPU's transferred to it (:func:`profile_for`),
    else the ideal roofline; anything else a profile YAML path.  Never None: "no profile" is
    :data:`planner.profile.IDEAL_PROFILE`.  A path that does not exist is a SpecError naming ``field``.
    """
    if value == "none":
        return IDEAL_PROFILE, "ideal roofline (--profile none)"
    if value == "auto":
        prof = (profile_for(gpu_id, engine_version) if engine_version else None) or profile_for(gpu_id, transfer=True)
        skipped = profile_errors()
        note = (f"; skipped {len(skipped)} unreadable profile file(s): {', '.join(p.name for p, _ in skipped)}"
                if skipped else "")
        if prof is None:
            return IDEAL_PROFILE, f"ideal roofline (no calibration profile for {gpu_id} in calibration/profiles/{note})"
        if prof.mode == "transferred":
            return prof, (f"transferred calibration: {prof.transferred_from}'s measured efficiencies and overheads "
                          f"({prof.engine} {prof.engine_version}, {prof.created}) on {gpu_id}'s datasheet roofs; "
                          f"calibrate this GPU for measured numbers{note}")
        return prof, f"calibrated ({prof.gpu_id}, {prof.engine} {prof.engine_version}, {prof.created}{note})"
    path = Path(value)
    try:
        found = path.exists()
    except OSError:  # too long a name, a loop of links
        found = False
    if not found:
        raise SpecError(f"{field}: expected auto, none or a profile YAML path; no such file '{value[:200]}'")
    try:
        prof = load_profile(path)
    except SpecError as err:
        raise SpecError(f"{field}: {err}") from None
    return prof, f"{prof.mode} ({path.name}: {prof.gpu_id}, {prof.engine} {prof.engine_version}, {prof.created})"
