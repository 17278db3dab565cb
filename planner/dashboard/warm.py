"""The dashboard's warm start: ``make app`` runs ``python app.py [streamlit flags]``, which runs the page a bare URL
opens once in the server's own process before the server listens — every import, the catalog and the fleet
engine's knees for the opening question (:mod:`planner.fleet_eval` keeps them for the process) — then serves the
app from that process, so the first visitor does not wait for them.  Any other question is computed when asked,
as always; a warm-up that fails is said and the server starts anyway.

No streamlit import: ``app.py`` passes in streamlit's ``AppTest`` and its command-line entry point.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

#: Seconds the opening page may take in the warm-up before the server starts without it.
WARM_TIMEOUT_S = 300.0


def serve(app_path: str, app_test, streamlit_main: Callable[[], object], argv: list[str]) -> None:
    """Run ``app_path``'s opening page once (``app_test.from_file(...).run()``), say how it went on stdout, then
    hand over to ``streamlit run app_path *argv`` (``streamlit_main`` reads ``sys.argv``)."""
    t0 = time.perf_counter()
    try:
        at = app_test.from_file(app_path, default_timeout=WARM_TIMEOUT_S).run()
        failed = [" ".join(str(e.value).split())[:200] for e in at.exception]
    except Exception as err:  # noqa: BLE001 - a warm-up is an optimisation: the server starts without it
        failed = [f"{type(err).__name__}: {' '.join(str(err).split())[:200]}"]
    took = time.perf_counter() - t0
    print(f"planner: opening page warmed in {took:.1f} s" if not failed else
          f"planner: the opening page failed in the warm-up after {took:.1f} s ({failed[0]}); serving without it",
          flush=True)
    sys.argv = ["streamlit", "run", app_path, *argv]
    streamlit_main()
