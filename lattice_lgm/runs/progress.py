"""Progress of a run: tqdm's bar on a terminal, a log line every 30 s otherwise.

On a terminal the bar is tqdm's (rate and ETA, the phase beside them); in a log (stderr not a
terminal: a batch job, a pipe) a line with the time, the sweeps, the rate and the ETA every
:data:`~lattice_lgm.runs.plan.LOG_INTERVAL` seconds and at the end, which a bar redrawn with
carriage returns would garble.
"""

from __future__ import annotations

import math
import sys
import time

from tqdm import tqdm

from .plan import LOG_INTERVAL


class _Progress:
    """Sweeps done of ``total``, reported on stderr (nothing when not ``enabled``)."""

    def __init__(self, total: int, enabled: bool, label: str) -> None:
        self.total, self.enabled, self.label = total, enabled, label
        self.tty = enabled and sys.stderr.isatty()
        self.bar = (tqdm(total=total, desc=label, unit="sweep", file=sys.stderr, leave=True,
                         dynamic_ncols=True) if self.tty else None)
        self.t0 = time.monotonic()
        self.last = 0.0
        self.done0: int | None = None

    def update(self, done: int, phase: str) -> None:
        """Report ``done`` sweeps (cumulative) in ``phase``."""
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.set_postfix_str(phase, refresh=False)
            self.bar.update(done - self.bar.n)
            if done >= self.total:
                self.bar.close()
            return
        now = time.monotonic()
        if self.done0 is None:
            self.done0, self.t0 = done, now
        if done < self.total and now - self.last < LOG_INTERVAL:
            return
        self.last = now
        rate = (done - self.done0) / max(now - self.t0, 1e-9)
        eta = (self.total - done) / rate if rate > 0 else float("inf")
        eta_s = "?" if not math.isfinite(eta) else time.strftime("%H:%M:%S", time.gmtime(eta))
        sys.stderr.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {self.label}: {done}/"
                         f"{self.total} sweeps ({phase}), {rate:.2f} sweeps/s, ETA {eta_s}\n")
        sys.stderr.flush()
