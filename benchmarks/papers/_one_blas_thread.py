"""Imported first by the paper scripts: one BLAS thread per process when run as a script.

Each run of these scripts updates its chains in one process, one after another, on matrices of
a few hundred rows.  OpenBLAS's worker threads then only contend with each other and with any
neighbouring process: on this 2-core VM a 200 × 200 Cholesky took 0.78 ms with the default
threads and 0.28 ms with one (6 ms under load from a second process), and a sweep of
``hyper2010.py``'s surr-site on Ionosphere fell from 3.8 s to 1.0 s.  The variables are read
when OpenBLAS loads, so this only acts if numpy has not been imported yet (when a script is
the entry point, not when a test imports it); a value already in the environment wins.
"""

import os
import sys

if "numpy" not in sys.modules:
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")
