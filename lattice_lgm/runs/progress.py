"""Progress of a run: a bar on a terminal, a log line every 30 s otherwise."""

from __future__ import annotations

import math
import sys
import time

from .plan import LOG_INTERVAL


# -- progress ------------------------------------------------------------------------------------
class _Progress:
    """A one-line bar with rate and ETA on a terminal; a log record every 30 s otherwise."""

    def __init__(self, total: int, enabled: bool, label: str) -> None:
        self.total, self.enabled, self.label = total, enabled, label
        self.tty = enabled and sys.stderr.isatty()
        self.t0 = time.monotonic()
        self.last = 0.0
        self.done0: int | None = None

    def update(self, done: int, phase: str) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if self.done0 is None:
            self.done0, self.t0 = done, now
        if done < self.total and now - self.last < (0.5 if self.tty else LOG_INTERVAL):
            return
        self.last = now
        rate = (done - self.done0) / max(now - self.t0, 1e-9)
        eta = (self.total - done) / rate if rate > 0 else float("inf")
        eta_s = "?" if not math.isfinite(eta) else time.strftime("%H:%M:%S", time.gmtime(eta))
        frac = done / self.total
        if self.tty:
            bar = "#" * int(30 * frac) + "-" * (30 - int(30 * frac))
            sys.stderr.write(f"\r{self.label} [{bar}] {done}/{self.total} sweeps ({phase}) "
                             f"{rate:.2f}/s ETA {eta_s}  ")
            if done >= self.total:
                sys.stderr.write("\n")
        else:
            sys.stderr.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {self.label}: {done}/"
                             f"{self.total} sweeps ({phase}), {rate:.2f} sweeps/s, ETA {eta_s}\n")
        sys.stderr.flush()


