"""The ``lattice-lgm`` command: run, resume and inspect LGCP runs described by a TOML config.

::

    lattice-lgm init run.toml                 # a commented config for the bei demo
    lattice-lgm run run.toml --set sampling.draws=200
    lattice-lgm run run.toml --chains 4-7     # chains 4..7 only (e.g. on a second machine)
    lattice-lgm resume run.zarr               # continue an interrupted run
    lattice-lgm summary run.zarr              # posterior table, R-hat, ESS, cross-check
    lattice-lgm verify run.zarr               # every committed chunk against its digest
    lattice-lgm extend run.zarr --draws 500   # 500 more draws of every chain (finished runs)
    lattice-lgm plot run.zarr --out maps/     # intensity and exceedance maps (PNG)

The configuration schema is :mod:`lattice_lgm.config` (``lattice-lgm run --help`` lists every
key).  Errors raised on purpose (:class:`~lattice_lgm.errors.LatticeLGMError`, configuration
errors included) are printed as ``error: <message>`` and exit with status 2; anything else is
a bug and propagates with its traceback.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .errors import InvalidParameterError, LatticeLGMError, UnsupportedOperationError
from .reports import describe_run, print_run_summary, print_summary, write_maps

__all__ = ["build_parser", "main", "parse_chains", "print_summary", "write_maps"]

#: the file ``lattice-lgm init`` writes when no path is given
DEFAULT_CONFIG = "run.toml"

_EXAMPLES = """\
examples:
  lattice-lgm init run.toml                   write a commented config for the bei demo
  lattice-lgm run run.toml                    sample, print the summary, write the maps
  lattice-lgm run run.toml --set sampling.draws=200 --set model.backend=gmrf
  lattice-lgm run run.toml --chains 4-7       only chains 4..7 of the run (same store)
  lattice-lgm resume run.zarr                 continue an interrupted run
  lattice-lgm summary run.zarr                posterior table with R-hat, ESS, cross-check
  lattice-lgm extend run.zarr --draws 500     500 more draws per chain of a finished run
  lattice-lgm verify run.zarr                 every committed chunk against its digest
  lattice-lgm plot run.zarr --out maps/       intensity and exceedance maps as PNG
"""


# -- helpers ------------------------------------------------------------------------------------
def parse_chains(text: str, n_chains: int) -> range:
    """Parse ``--chains``: ``"4-7"`` (inclusive) or ``"5"`` into global chain indices.

    Parameters
    ----------
    text : str
        ``"A-B"`` with ``0 <= A <= B < n_chains``, or a single index ``"A"``.
    n_chains : int
        ``sampling.chains`` of the run.

    Returns
    -------
    range
        ``range(A, B + 1)``.

    Raises
    ------
    InvalidParameterError
        Not of that form, empty, or outside ``[0, n_chains)``.
    """
    lo_s, sep, hi_s = text.strip().partition("-")
    try:
        lo = int(lo_s)
        hi = int(hi_s) if sep else lo
    except ValueError:
        raise InvalidParameterError(
            f"--chains {text!r} is not a chain range; write A-B (inclusive, e.g. 4-7) or a "
            "single index (e.g. 5).") from None
    if lo > hi:
        raise InvalidParameterError(
            f"--chains {text!r} is empty ({lo} > {hi}); write A-B with A <= B, e.g. {hi}-{lo}.")
    if lo < 0 or hi >= n_chains:
        raise InvalidParameterError(
            f"--chains {text!r} is outside the run's chains 0..{n_chains - 1} "
            f"(sampling.chains = {n_chains}); raise sampling.chains or pick chains inside.")
    return range(lo, hi + 1)


def _module(name: str, what: str) -> Any:
    """Import ``lattice_lgm.<name>``, or explain that this installation lacks it."""
    full = f"{__package__}.{name}"
    try:
        return importlib.import_module(full)
    except ModuleNotFoundError as exc:
        if exc.name != full:
            raise
        raise UnsupportedOperationError(
            f"{full} ({what}) is not available in this installation of lattice_lgm; upgrade "
            "it, or sample from Python.") from None


def _check_accepts(fn: Any, extra: dict[str, Any]) -> None:
    """Refuse Dask options that the installed ``runs.sample`` does not take (before any work)."""
    if not extra:
        return
    params = inspect.signature(fn).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    missing = [k for k in extra if k not in params]
    if missing:
        flags = ", ".join("--" + k.removeprefix("dask_") for k in missing)
        raise UnsupportedOperationError(
            f"{flags}: lattice_lgm.runs.sample does not accept {missing} in this version (the "
            "Dask runner is not there yet); run without it, or split the chains over "
            "processes with --chains A-B against the same store.")


def _posterior(tree: Any, where: str) -> Any:
    """The posterior Dataset of a run, with its field ``f`` when the run kept fields.

    With ``thin_fields > 1`` the fields of a subset of draws sit in ``posterior_fields``; the
    analysis then uses those draws (the table says how many).  With ``thin_fields = 0`` the
    Dataset has no ``f``.
    """
    children = getattr(tree, "children", {})
    if "posterior" not in children:
        raise InvalidParameterError(
            f"{where} has no 'posterior' group (groups: {sorted(children)}); give a run store "
            "written by `lattice-lgm run` or lattice_lgm.runs.sample.")
    post = tree["posterior"].to_dataset()
    if "f" not in post and "posterior_fields" in children:
        fields = tree["posterior_fields"].to_dataset()
        post = post.sel(draw=fields["draw"].values).assign(f=fields["f"])
    if post.sizes.get("draw", 0) == 0:
        raise InvalidParameterError(
            f"{where} has no committed draws yet; wait for the first block to be written, or "
            "`lattice-lgm resume` it.")
    return post


def _summaries(tree: Any) -> Any:
    children = getattr(tree, "children", {})
    return tree["summaries"].to_dataset() if "summaries" in children else None


def _sample_stats(tree: Any) -> Any:
    """The run's ``sample_stats`` Dataset, or None if it has none."""
    children = getattr(tree, "children", {})
    return tree["sample_stats"].ds if "sample_stats" in children else None


def _loglik(tree: Any) -> Any:
    """The run's per-draw log-likelihood ``(chain, draw)``, or None if it has none."""
    stats = _sample_stats(tree)
    return stats["loglik"].values if stats is not None and "loglik" in stats else None


def _store_at(path: str) -> Any:
    """The store module, once ``path`` is known to hold a (fully created) run store."""
    if not (Path(path) / "zarr.json").is_file():
        raise InvalidParameterError(
            f"STORE {path!r} is not a run store (no zarr.json there); give the directory that "
            "`lattice-lgm run` wrote (store.path of the config).")
    store = _module("store", "the run store")
    store.check_store(path)  # a half-created store has no config to read
    return store


def _from_store(path: str) -> tuple[Any, Any, Any]:
    """The stored config, its rebuilt model and the store module."""
    from .config import RunConfig

    store = _store_at(path)
    cfg = RunConfig.from_resolved(store.read_config(path))
    return cfg, cfg.build_model(), store


_THREADS_HELP = ("cores the run may use, shared by Numba, BLAS and FFTW (default: "
                 "LATTICE_LGM_THREADS, else Numba's thread count); the draws do not depend on it")


# -- subcommands --------------------------------------------------------------------------------
def _report(model: Any, tree: Any, where: str, out_dir: Path, thresholds: Sequence[float],
            block: Sequence[int] | None = None) -> None:
    """The summary and maps of a run.

    For a chain block whose siblings are unfinished, a line saying so instead (a job-array
    task that did its part exits 0).
    """
    st = _module("store", "the run store") if block is not None else None
    if st is not None and st.store_problem(where) is None:
        rs = st.RunStore(where)
        rc = dict(rs.attrs.get("run_config") or {})
        done = rs.committed("posterior")
        rest = [c for c in range(int(rc.get("chains", 0)))
                if done.get(c, 0) < int(rc.get("draws", 0))]
        if rest:
            draws = int(rc["draws"])
            print(f"chains {list(block)} of {where} have their {draws} draws; chains {rest} "
                  "have not (yet): run `lattice-lgm summary` and `plot` on the store once "
                  "every block has finished.", flush=True)
            return
    post = _posterior(tree, where)
    print_summary(model, post, loglik=_loglik(tree), stats=_sample_stats(tree))
    if _has_maps(model):
        write_maps(model, post, out_dir, thresholds, summaries=_summaries(tree))


def _has_maps(model: Any) -> bool:
    """Whether ``model`` has the LGCP's maps (intensity, exceedance); other families do not."""
    from .models import LGCP

    return isinstance(model, LGCP)


def _cmd_run(args: argparse.Namespace) -> int:
    from .config import load_config

    cfg = load_config(args.config, args.set or ())
    args.store = str(cfg.store_path)  # for the message after Ctrl-C (main)
    n_chains = cfg.resolved["sampling"]["chains"]
    chain_ids = parse_chains(args.chains, n_chains) if args.chains is not None else None
    kwargs = cfg.sample_kwargs()  # refuses a missing seed before any work
    extra: dict[str, Any] = {}
    if args.workers is not None:
        extra["dask_workers"] = args.workers
    if args.scheduler is not None:
        extra["dask_scheduler"] = args.scheduler
    if args.threads is not None:
        extra["threads"] = args.threads
    runs = _module("runs", "sample and resume")
    _check_accepts(runs.sample, extra)
    model = cfg.build_model()
    print(describe_run(model), flush=True)
    tree = runs.sample(model, **kwargs, chain_ids=chain_ids,
                       progressbar=not args.no_progress, **extra)
    _report(model, tree, str(cfg.store_path), cfg.maps_dir, cfg.thresholds, block=chain_ids)
    return 0


def _cmd_resume(args: argparse.Namespace) -> int:
    # the model is rebuilt first: a moved data file fails here, before any sampling
    cfg, model, _ = _from_store(args.store)
    runs = _module("runs", "sample and resume")
    kw: dict[str, Any] = {"progressbar": not args.no_progress}
    if args.threads is not None:
        kw["threads"] = args.threads
    if args.chains is not None:
        kw["chain_ids"] = parse_chains(args.chains, cfg.resolved["sampling"]["chains"])
    if "model" in inspect.signature(runs.resume).parameters:
        kw["model"] = model  # not rebuilt a second time inside resume
    tree = runs.resume(args.store, **kw)
    _report(model, tree, args.store, cfg.maps_dir, cfg.thresholds, block=kw.get("chain_ids"))
    return 0


def _intact(store: Any, path: str) -> None:
    """Refuse to summarise or map a store whose committed chunks are missing (NaN draws)."""
    report = store.verify_store(path, digests=False)
    if not report.ok:
        raise store.StoreIntegrityError(
            f"{path} is damaged, so its posterior would be wrong: "
            + report.describe(limit=5).replace("\n", ";")
            + f". Run `lattice-lgm verify {path}` for the full list.")


def _cmd_verify(args: argparse.Namespace) -> int:
    store = _module("store", "the run store")
    report = store.verify_store(args.store, digests=not args.quick)
    print(f"{args.store}: " + report.describe(limit=args.limit))
    if report.ok:
        print("intact" + (" (presence only)" if args.quick else ""))
    return 0 if report.ok else 1


def _cmd_extend(args: argparse.Namespace) -> int:
    from ._validation import positive_int

    positive_int("--draws", args.draws, "posterior draws to add per chain, e.g. 500")
    cfg, model, store = _from_store(args.store)
    _intact(store, args.store)
    runs = _module("runs", "sample and resume")
    kw: dict[str, Any] = {"progressbar": not args.no_progress, "extend": args.draws}
    if args.threads is not None:
        kw["threads"] = args.threads
    if args.chains is not None:
        kw["chain_ids"] = parse_chains(args.chains, cfg.resolved["sampling"]["chains"])
    tree = runs.resume(args.store, model=model, **kw)
    _report(model, tree, args.store, cfg.maps_dir, cfg.thresholds, block=kw.get("chain_ids"))
    return 0


def _cmd_summary(args: argparse.Namespace) -> int:
    store = _store_at(args.store)
    _intact(store, args.store)
    tree = store.open_store(args.store)
    if "analysis" in tree.attrs or tree.attrs.get("model", "LGCP") != "LGCP":
        # from the store alone: the data files need not be where the run found them
        print_run_summary(tree, _posterior(tree, args.store))
    else:  # an LGCP run written before runs recorded their analysis: rebuild the model
        _, model, _ = _from_store(args.store)
        print_summary(model, _posterior(tree, args.store), loglik=_loglik(tree),
                      stats=_sample_stats(tree))
    return 0


def _cmd_plot(args: argparse.Namespace) -> int:
    store = _store_at(args.store)
    _intact(store, args.store)
    tree = store.open_store(args.store)
    if tree.attrs.get("model") == "LatticeGPDS":  # the density map, from the store alone
        out_dir = args.out if args.out is not None else (
            store.read_config(args.store).get("output") or {}).get("maps")
        if out_dir is None:
            raise InvalidParameterError(
                f"{args.store} was run from Python without a config, so it names no maps "
                "directory; give --out DIR.")
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        _module("gpds.plots", "the GPDS density map").density_map(
            tree, Path(out_dir) / "density.png")
        print(f"wrote {Path(out_dir) / 'density.png'}")
        return 0
    if "lattice" in (tree.attrs.get("analysis") or {}):
        # the LGCP as its store holds it: no data file is read (they may have moved)
        model = _module("analysis", "the analysis").StoredLGCP(tree)
        output = store.read_config(args.store).get("output") or {}
        out_dir = args.out if args.out is not None else output.get("maps")
        if out_dir is None:
            raise InvalidParameterError(
                f"{args.store} was run from Python without a config, so it names no maps "
                "directory; give --out DIR.")
        thresholds = tree.attrs["run_config"]["thresholds"]  # what the run counted
    else:  # written before runs recorded their lattice: the model rebuilt from its config
        cfg, model, _ = _from_store(args.store)
        if not _has_maps(model):
            raise InvalidParameterError(
                f"{args.store} holds a {type(model).__name__} run (model.family); the maps "
                "are the LGCP's (intensity, exceedance). Read its posterior with "
                "lattice_lgm.open_store and `lattice-lgm summary`.")
        out_dir = args.out if args.out is not None else cfg.maps_dir
        thresholds = cfg.thresholds
    write_maps(model, _posterior(tree, args.store), out_dir, thresholds,
               summaries=_summaries(tree))
    return 0


def _demo_data_dir(target: Path) -> str:
    """The repository's ``data/`` relative to ``target``'s directory (``"data"`` if absent)."""
    data = Path(__file__).resolve().parents[1] / "data"
    if not (data / "bei.csv").is_file():
        return "data"
    try:
        return Path(os.path.relpath(data, target.resolve().parent)).as_posix()
    except ValueError:  # another drive on Windows: no relative path exists
        return data.as_posix()


def _cmd_init(args: argparse.Namespace) -> int:
    from .config import template

    target = Path(args.path)
    if target.exists() and not args.force:
        raise InvalidParameterError(
            f"{str(target)!r} exists; pass --force to overwrite it, or give another path.")
    if not target.parent.is_dir():
        raise InvalidParameterError(
            f"the directory of {str(target)!r} does not exist; create it first.")
    target.write_text(template(_demo_data_dir(target)), encoding="utf-8")
    print(f"wrote {target}; edit it, then: lattice-lgm run {target}")
    return 0


def _para(text: str) -> str:
    return textwrap.fill(text, 79)


# -- the parser -----------------------------------------------------------------------------------
def _store_command(sub: Any, name: str, func: Any, help_: str,
                   description: str) -> argparse.ArgumentParser:
    """A subcommand acting on a run's STORE (its positional argument added)."""
    cmd = sub.add_parser(name, formatter_class=argparse.RawDescriptionHelpFormatter,
                         help=help_, description=_para(description), epilog=_EXAMPLES)
    cmd.add_argument("store", metavar="STORE", help="the run's zarr store")
    cmd.set_defaults(func=func)
    return cmd


def _sampling_options(cmd: argparse.ArgumentParser) -> None:
    """``--threads`` and ``--no-progress`` of the subcommands that sample."""
    cmd.add_argument("--threads", type=int, metavar="N", help=_THREADS_HELP)
    cmd.add_argument("--no-progress", action="store_true", help="no progress bar")


def build_parser() -> argparse.ArgumentParser:
    """The ``lattice-lgm`` argument parser (run, resume, summary, extend, verify, plot, init).

    Returns
    -------
    argparse.ArgumentParser
    """
    from . import __version__
    from .config import describe_schema

    raw = argparse.RawDescriptionHelpFormatter
    p = argparse.ArgumentParser(
        prog="lattice-lgm", formatter_class=raw, epilog=_EXAMPLES,
        description=_para("Bayesian LGCPs on large lattices: run, resume and inspect sampling runs "
                    "described by a TOML configuration."))
    p.add_argument("--version", action="version", version=f"lattice-lgm {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser(
        "run", formatter_class=raw, help="sample a model described by a config file",
        description=_para("Load CONFIG, build the LGCP, print its description, sample "
                          "into the store, print the posterior summary and write the maps."),
        epilog=_EXAMPLES + "\nconfiguration keys (TOML sections and keys):\n"
               + describe_schema())
    run.add_argument("config", metavar="CONFIG", help="TOML run configuration")
    run.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE",
                     help="override a config value (repeatable), e.g. sampling.draws=200; the "
                          "value is parsed as TOML, else taken as a string")
    run.add_argument("--chains", metavar="A-B",
                     help="run only the global chains A..B (inclusive) or a single chain A, of "
                          "0..sampling.chains-1")
    dask = run.add_mutually_exclusive_group()
    dask.add_argument("--workers", type=int, metavar="N",
                      help="run the chains on a local Dask cluster of N workers")
    dask.add_argument("--scheduler", metavar="ADDR",
                      help="run the chains on the Dask scheduler at ADDR (e.g. tcp://host:8786)")
    _sampling_options(run)
    run.set_defaults(func=_cmd_run)

    resume = _store_command(sub, "resume", _cmd_resume, "continue an interrupted run",
                            "Continue the run in STORE from its last checkpoint, then print "
                            "the summary and write the maps.")
    resume.add_argument("--chains", metavar="A-B",
                        help="the chain block this process ran (run --chains A-B)")
    _sampling_options(resume)

    _store_command(sub, "summary", _cmd_summary, "print the posterior summary of a run",
                   "Print the posterior table (mean, sd, 95% interval, R-hat, bulk ESS, "
                   "frequentist cross-check) of the committed draws in STORE, and its notes.")

    ext = _store_command(sub, "extend", _cmd_extend, "add draws to a finished run",
                         "Continue every chain of the finished run in STORE for N more "
                         "posterior draws, into the same store: the result is the store of a "
                         "run that asked for them from the start.")
    ext.add_argument("--draws", type=int, required=True, metavar="N",
                     help="posterior draws to add per chain")
    ext.add_argument("--chains", metavar="A-B",
                     help="extend only this chain block (run --chains A-B); blocks extended "
                          "side by side grow the store once")
    _sampling_options(ext)

    ver = _store_command(sub, "verify", _cmd_verify,
                         "check a run's committed chunks against digests",
                         "Check every committed chunk file of STORE against the digest "
                         "recorded when it was committed, and list what is missing or "
                         "corrupt. Exit status 0 when intact, 1 when damaged.")
    ver.add_argument("--quick", action="store_true",
                     help="check that the files exist, without reading them")
    ver.add_argument("--limit", type=int, default=20, metavar="N",
                     help="files listed per kind of damage (default 20)")

    plot = _store_command(sub, "plot", _cmd_plot, "write the maps of a run as PNG",
                          "Write the posterior mean intensity and the exceedance maps "
                          "P(RR > c | data) of the committed draws in STORE.")
    plot.add_argument("--out", metavar="DIR",
                      help="output directory (default: output.maps of the stored config)")

    init = sub.add_parser(
        "init", formatter_class=raw, help="write a commented config for the bei demo",
        description=_para("Write a commented TOML configuration with every key (the bei "
                          "demo; optional keys commented out with their defaults)."),
        epilog=_EXAMPLES)
    init.add_argument("path", metavar="PATH", nargs="?", default=DEFAULT_CONFIG,
                      help=f"file to write (default {DEFAULT_CONFIG})")
    init.add_argument("--force", action="store_true", help="overwrite an existing file")
    init.set_defaults(func=_cmd_init)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``lattice-lgm`` command.

    Parameters
    ----------
    argv : sequence of str, optional
        Arguments (default ``sys.argv[1:]``).

    Returns
    -------
    int
        0 on success, 2 on a usage or input error (printed as ``error: ...`` on stderr), 130
        after Ctrl-C (the run stopped after writing a checkpoint; ``resume`` continues it).
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return args.func(args)
    except LatticeLGMError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        where = getattr(args, "store", None) or "the run's store"
        print(f"interrupted: continue with `lattice-lgm resume {where}`", file=sys.stderr)
        return 130


if __name__ == "__main__":  # python -m lattice_lgm.cli
    sys.exit(main())
