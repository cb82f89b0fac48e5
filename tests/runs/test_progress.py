"""The run's progress report: tqdm's bar on a terminal, log lines otherwise."""

from __future__ import annotations

import io
import re

from lattice_lgm.runs import progress as P


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_tqdms_bar_with_the_phase(monkeypatch):
    err = _Tty()
    monkeypatch.setattr(P.sys, "stderr", err)
    bar = P._Progress(10, True, "chains 0-1")
    for k in range(1, 11):
        bar.update(k, "warmup" if k <= 4 else "posterior")
    out = err.getvalue()
    assert "chains 0-1" in out and "10/10" in out and "posterior" in out
    assert "sweep/s" in out or "s/sweep" in out  # tqdm's rate
    assert bar.bar.disable or bar.bar.n == 10


def test_a_log_gets_a_line_at_the_end_and_nothing_when_disabled(monkeypatch):
    err = io.StringIO()
    monkeypatch.setattr(P.sys, "stderr", err)
    log = P._Progress(5, True, "chains 0-1")
    for k in range(1, 6):
        log.update(k, "posterior")
    lines = err.getvalue().splitlines()
    # the first update starts the clock and logs (nothing before it to wait for), the last
    # always logs; none between (30 s apart)
    assert len(lines) == 2 and "\r" not in err.getvalue()
    assert re.search(r"chains 0-1: 5/5 sweeps \(posterior\), [0-9.]+ sweeps/s, ETA", lines[-1])
    quiet = io.StringIO()
    monkeypatch.setattr(P.sys, "stderr", quiet)
    P._Progress(5, False, "x").update(5, "done")
    assert quiet.getvalue() == ""
