"""planner.dashboard.warm: `make app` (`python app.py [flags]`) runs the opening page once in the server's process,
says how it went, then hands the same arguments to `streamlit run app.py` — also when the warm-up fails."""

from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import ClassVar

import pytest

from planner.dashboard import warm


class FakeAppTest:
    """Stands in for streamlit's AppTest: records the file and timeout, returns a run with ``exceptions``."""

    calls: ClassVar[list] = []

    def __init__(self, exceptions=(), raises: Exception | None = None):
        self.exceptions, self.raises = exceptions, raises

    def from_file(self, path, default_timeout):
        FakeAppTest.calls.append((path, default_timeout))
        return self

    def run(self):
        if self.raises is not None:
            raise self.raises
        return SimpleNamespace(exception=[SimpleNamespace(value=v) for v in self.exceptions])


@pytest.fixture
def argv(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["app.py"])
    FakeAppTest.calls = []
    return lambda: list(sys.argv)


@pytest.mark.parametrize("app_test, said", [
    (FakeAppTest(), "planner: opening page warmed in "),
    (FakeAppTest(exceptions=["KeyError: 'gpu'\n  at line 3"]), "failed in the warm-up after"),
    (FakeAppTest(raises=RuntimeError("AppTest script run timed out after 300(s)")), "RuntimeError: AppTest script"),
])
def test_the_page_is_run_once_then_streamlit_serves_the_same_flags(app_test, said, argv, capsys):
    served = []
    warm.serve("/x/app.py", app_test, lambda: served.append(argv()), ["--server.port", "8501"])
    assert FakeAppTest.calls == [("/x/app.py", warm.WARM_TIMEOUT_S)]  # one run of the opening page
    assert served == [["streamlit", "run", "/x/app.py", "--server.port", "8501"]]  # served whatever happened
    out = capsys.readouterr().out
    assert said in out and out.count("\n") == 1  # one line; a failure's text on it, folded
    assert ("serving without it" in out) == (said != "planner: opening page warmed in ")

