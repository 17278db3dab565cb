"""The house rules of planner/'s layout (issue #18), checked on the source text:

* every module directly in ``planner/`` is core: imported by both the CLI (``planner/cli/``) and the dashboard
  (``planner/dashboard/`` or ``app.py``), or by another core module (``planner/`` outside ``cli/`` and
  ``dashboard/``, or the calibration fit in ``calibration/``, which uses the planner as a library) — a module
  only one surface uses belongs in that surface's folder;
* one default per engine setting: the literal 0.92 (vLLM's gpu_memory_utilization) is written once, in
  ``planner/specs.py`` (``Deployment``), and everything else reads ``Deployment.default``;
* ceil-division is ``planner.units.cdiv``, never the ``-(-x // b)`` idiom;
* ``Deployment`` is built one way, ``Deployment.for_gpu`` (varied with ``Deployment.replace``);
* the ``duplicates`` tool (when it is on PATH) finds no repeated 6+-line block inside ``planner/`` beyond the
  pairs listed below, each with the issue that removes it.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PLANNER = ROOT / "planner"
SURFACES = ("cli", "dashboard")


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at the top or inside a function (lazy imports count): for
    ``from planner import x`` both ``planner`` and ``planner.x``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def _sources() -> dict[str, set[str]]:
    files = [*PLANNER.rglob("*.py"), *(ROOT / "calibration").rglob("*.py"), ROOT / "app.py"]
    return {_module_name(p): _imports(p) for p in files}


def _where(importer: str) -> str:
    """'cli', 'dashboard' (app.py too) or 'core' (the rest of planner/, and calibration/)."""
    if importer == "app":
        return "dashboard"
    parts = importer.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in SURFACES else "core"


def test_every_top_level_planner_module_is_core():
    """A module directly in planner/ is imported by the CLI and the dashboard, or by another core module."""
    sources = _sources()
    top = sorted(_module_name(p) for p in PLANNER.glob("*.py") if p.name != "__init__.py")
    assert "planner.roofline" in top and "planner.specs" in top  # the scan sees the package
    lonely = []
    for mod in top:
        users = {_where(name) for name, imps in sources.items() if name != mod and mod in imps}
        if "core" not in users and not {"cli", "dashboard"} <= users:
            lonely.append(f"{mod}: imported by {sorted(users) or 'nothing'}")
    assert not lonely, "move these into planner/cli/ or planner/dashboard/ (or import them from core): " + \
        "; ".join(lonely)


def _code_files():
    for folder in ("planner", "calibration", "benchmarks"):
        yield from sorted((ROOT / folder).rglob("*.py"))
    yield ROOT / "app.py"


def test_gpu_memory_utilization_default_is_written_once():
    """0.92 appears only in planner/specs.py, where Deployment holds it (its field default, and the docs
    beside it); the CLI, the dashboard, calibration and replay read Deployment.default(...)."""
    literal = re.compile(r"(?<![\w.])0\.92(?![\d])")
    found = [f"{p.relative_to(ROOT)}:{i}" for p in _code_files() if p != PLANNER / "specs.py"
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if literal.search(line)]
    assert not found, found
    from planner.specs import Deployment

    assert Deployment.default("gpu_memory_utilization") == 0.92


def test_no_negated_floor_division_for_ceil():
    """Ceil-division is planner.units.cdiv (cdiv(100, 16) == 7, cdiv(96, 16) == 6), not -(-x // b)."""
    from planner.units import cdiv

    assert (cdiv(100, 16), cdiv(96, 16), cdiv(0, 16), cdiv(1, 16)) == (7, 6, 0, 1)
    found = [f"{p.relative_to(ROOT)}:{i}" for p in [*_code_files(), *sorted((ROOT / "tests").glob("*.py"))]
             if p != Path(__file__).resolve()
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if "-(-" in line]
    assert not found, found


def test_deployment_is_built_one_way():
    """No ``Deployment(...)`` call outside planner/specs.py: ``Deployment.for_gpu`` builds one (the GPU's vLLM
    scheduler defaults), ``Deployment.replace`` varies one (validated again, unlike model_copy)."""
    call = re.compile(r"(?<![\w.])Deployment\(")
    found = [f"{p.relative_to(ROOT)}:{i}" for p in _code_files() if p != PLANNER / "specs.py"
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if call.search(line) and not line.lstrip().startswith(("#", "class "))]
    assert not found, found


#: Repeated blocks ``duplicates`` still finds in planner/ and why each stays (data, or a shape with no shared
#: logic): (file, file, why).  A pair not listed here fails the test; remove a line when its pair goes.
KNOWN_DUPLICATES: tuple[tuple[str, str, str], ...] = (
    ("dashboard/presets.py", "dashboard/presets.py", "data, not logic: the three Preset records share their fields"),
    ("quality.py", "steady_fleet.py", "shape only: one-line @property accessors (a quality estimate's retention and "
     "score; a fleet's GPUs and $/hour); the fleet's $/month formula is one method, WholeFleet.usd_per_month_of"),
    ("capacity/demand.py", "serving/workloads.py", "shape only: one-line @property reductions (a demand curve's peak "
     "and mean rate; a request set's token totals); their positive-number check is one, units.positive_number"),
)


@pytest.mark.skipif(shutil.which("duplicates") is None, reason="the duplicates tool is not on PATH")
def test_no_repeated_blocks_in_planner():
    """``duplicates`` run in planner/ lists no pair of 6+-line blocks beyond KNOWN_DUPLICATES."""
    out = subprocess.run(["duplicates", "--most", "200", "--seconds", "120"], cwd=PLANNER, capture_output=True,
                         text=True, timeout=300).stdout
    assert "incomplete:" not in out, out
    known = {tuple(sorted(k[:2])) for k in KNOWN_DUPLICATES}
    pairs = re.findall(r"^D\d+ (\S+?):\d+-\d+ ~ (\S+?):\d+-\d+", out, re.M)
    new = [f"{a} ~ {b}" for a, b in pairs if tuple(sorted((a, b))) not in known]
    assert not new, out
