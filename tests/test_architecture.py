"""The package's import graph and module sizes, measured from the code (issue 28).

How: every ``import`` / ``from … import`` statement of every module under ``lattice_lgm/`` is
read with :mod:`ast` (module level and inside functions alike), resolved to the package module
it names (``from .priors import CirculantPrior`` → ``lattice_lgm.priors``), and the strongly
connected components of the resulting graph are the import cycles (Tarjan).  Sizes are lines
per file.

The restructuring is under way: the budgets below are the state reached, and may only shrink.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "lattice_lgm"
#: the size a module should stay under (issue 28: "no module over ~600 lines")
MAX_LINES = 600
#: modules still over MAX_LINES, with their size when the ratchet was set: none may grow past
#: it, none may join the list, and an entry goes when its module is split
OVERSIZE: dict[str, int] = {}


def modules() -> dict[str, Path]:
    out = {}
    for f in sorted(PKG.rglob("*.py")):
        parts = f.relative_to(PKG.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = f
    return out


def imports_of(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """The package modules ``name`` imports (anywhere in the file)."""
    is_pkg = path.name == "__init__.py"
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_pkg else name.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in mods else mod
                       for a in node.names]
        for t in targets:
            while t not in mods and "." in t:
                t = t.rsplit(".", 1)[0]
            if t in mods and t != name:
                out.add(t)
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules importing it runs, as Python runs them.

    Importing ``a.b.c`` first runs the package ``a.b``'s ``__init__``: an edge to each parent
    package the importer is not itself inside (the top package ``lattice_lgm``, the API that
    everything sits under, excepted).  A package's ``__init__`` importing its own modules is
    how a package is built, not a cycle of concerns.
    """
    mods = modules()
    graph = {}
    for m, f in mods.items():
        deps = set()
        for t in imports_of(m, f, mods):
            parts = t.split(".")
            for k in range(2, len(parts) + 1):
                parent = ".".join(parts[:k])
                if parent in mods and not (m == parent or m.startswith(parent + ".")):
                    deps.add(parent)
        graph[m] = {t for t in deps if not t.startswith(m + ".")}
    return graph


def test_the_package_has_no_import_cycle():
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_grows_past_its_budget():
    sizes = {m: len(f.read_text().splitlines()) for m, f in modules().items()}
    over = {m: n for m, n in sizes.items() if n > MAX_LINES}
    joined = sorted(set(over) - set(OVERSIZE))
    grown = {m: (n, OVERSIZE[m]) for m, n in over.items() if m in OVERSIZE and n > OVERSIZE[m]}
    assert not joined, f"modules over {MAX_LINES} lines: {joined}; split them along concerns"
    assert not grown, f"modules grown past their budget (now, budget): {grown}"
    gone = sorted(m for m in OVERSIZE if sizes.get(m, 0) <= MAX_LINES)
    assert not gone, f"{gone} are under {MAX_LINES} lines now: take them out of OVERSIZE"


#: imports of our own modules inside functions (the issue-28 rule allows them for optional
#: dependencies only): the count when the ratchet was set; it may only shrink
LOCAL_PACKAGE_IMPORTS = 14


def local_package_imports() -> dict[str, int]:
    """Per module, ``import``s of lattice_lgm modules made inside a function."""
    out: dict[str, int] = {}
    for m, f in modules().items():
        tree = ast.parse(f.read_text())
        inside: set[int] = set()
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                inside.update(id(x) for x in ast.walk(fn) if x is not fn)
        n = sum(1 for x in ast.walk(tree)
                if id(x) in inside and isinstance(x, ast.ImportFrom)
                and (x.level > 0 or (x.module or "").startswith("lattice_lgm")))
        if n:
            out[m] = n
    return out


def test_imports_of_our_own_modules_inside_functions_do_not_grow():
    per = local_package_imports()
    total = sum(per.values())
    assert total <= LOCAL_PACKAGE_IMPORTS, (
        f"{total} function-local imports of lattice_lgm modules (budget "
        f"{LOCAL_PACKAGE_IMPORTS}): {per}; import at the top of the module, or move the code "
        "to the layer it belongs to")
    assert total > LOCAL_PACKAGE_IMPORTS - 5, (
        f"only {total} left: lower LOCAL_PACKAGE_IMPORTS to {total}")


def _is_njit(dec: ast.expr) -> bool:
    """``@numba.njit``, ``@njit``, ``@numba.jit`` or a call of one (``@numba.njit(...)``)."""
    node = dec.func if isinstance(dec, ast.Call) else dec
    name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
    return name in ("njit", "jit", "vectorize", "guvectorize")


def nested_numba_kernels(source: str) -> list[str]:
    """Numba-compiled functions defined inside a function or class (closures), by name.

    Also counts ``numba.njit(f)`` called inside a function (compiling a closure at run time).
    """
    tree = ast.parse(source)
    out = []
    for outer in ast.walk(tree):
        if not isinstance(outer, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        for x in ast.walk(outer):
            if x is outer:
                continue
            if isinstance(x, ast.FunctionDef) and any(_is_njit(d) for d in x.decorator_list):
                out.append(f"{outer.name}.{x.name}")
            elif isinstance(x, ast.Call) and _is_njit(x) and x.args:
                out.append(f"{outer.name}: {ast.unparse(x)[:40]}")
    return out


def test_one_kernel_strategy_module_level_cached_kernels():
    """Every Numba kernel is module-level and cached on disk (issue 28, decision 98).

    The likelihoods' site functions are chosen inside the kernels by an integer ``kind``
    (``likelihoods._kernels.site_value``); kernels compiled as closures over a likelihood
    were the second strategy (3-4 s of every run's start, issue 26) and may not come back.
    """
    nested = {m: k for m, f in modules().items() if (k := nested_numba_kernels(f.read_text()))}
    assert not nested, f"Numba kernels compiled inside functions or classes: {nested}"
    uncached = []
    for m, f in modules().items():
        for fn in ast.walk(ast.parse(f.read_text())):
            if isinstance(fn, ast.FunctionDef):
                for d in fn.decorator_list:
                    if _is_njit(d) and not (isinstance(d, ast.Call) and any(
                            k.arg == "cache" and getattr(k.value, "value", False)
                            for k in d.keywords)):
                        uncached.append(f"{m}.{fn.name}")
    assert not uncached, f"Numba kernels without cache=True (compiled in every process): " \
                         f"{uncached}"


def test_the_kernel_rule_can_fail():
    """The rule above sees a closure and a run-time compilation."""
    src = ("import numba\n"
           "def make(lik):\n"
           "    @numba.njit(cache=True)\n"
           "    def k(x):\n"
           "        return lik(x)\n"
           "    return k\n"
           "def later(f):\n"
           "    return numba.njit(f)\n")
    assert nested_numba_kernels(src) == ["make.k", "later: numba.njit(f)"]
