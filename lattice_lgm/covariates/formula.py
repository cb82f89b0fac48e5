"""The formula spec: ``~ a + b``, interactions ``a:b`` and categorical ``C(name)``."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import (
    InvalidParameterError,
)


# ---------------------------------------------------------------------------------------------
# formula
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Factor:
    """One covariate in a term: a name, categorical if written ``C(name)``.

    Attributes
    ----------
    name : str
        Key into the ``covariates`` mapping.
    categorical : bool
        Dummy (treatment) coded with the first sorted level as reference.
    """

    name: str
    categorical: bool = False

    @property
    def label(self) -> str:
        """The factor as written in a formula: ``name`` or ``C(name)``."""
        return f"C({self.name})" if self.categorical else self.name


@dataclass(frozen=True)
class Term:
    """A model term: the product of one or more factors (``a``, ``a:b``, ``C(s):a``).

    Attributes
    ----------
    factors : tuple of Factor
        In the order written.
    """

    factors: tuple[Factor, ...]

    @property
    def name(self) -> str:
        """The term as written, factors joined by ``:``."""
        return ":".join(f.label for f in self.factors)


_TOKEN = re.compile(r"\s*(?:(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<num>\d+(?:\.\d*)?)"
                    r"|(?P<op>[~+:()\-])|(?P<other>\S))")
_FORMULA_HELP = ("supported: '~ a + b', interactions 'a:b', categorical 'C(name)', and "
                 "'~ 1', '~ 0' or '~ -1' for no covariates (the intercept belongs to the model)")


def _formula_error(formula: str, pos: int, msg: str) -> InvalidParameterError:
    return InvalidParameterError(
        f"formula={formula!r}, position {pos}: {msg}:\n    {formula}\n    {' ' * pos}^\n"
        f"{_FORMULA_HELP}."
    )


def _tokenize(formula: str) -> list[tuple[str, str, int]]:
    tokens = []
    pos = 0
    while pos < len(formula):
        if formula[pos:].strip() == "":
            break
        m = _TOKEN.match(formula, pos)
        assert m is not None  # the pattern matches any non-space character
        kind = m.lastgroup
        assert kind is not None
        tokens.append((kind, m.group(kind), m.start(kind)))
        pos = m.end()
    return tokens


def parse_formula(formula: str) -> list[Term]:
    """Parse a one-sided model formula into ordered terms (Wilkinson & Rogers 1973 notation).

    Parameters
    ----------
    formula : str
        ``"~ elev + grad + elev:grad + C(soil)"``.  Supported: covariate names, ``a:b``
        products (interactions, any number of factors), ``C(name)`` categorical, and ``~ 1``,
        ``~ 0`` or ``~ -1`` meaning no covariates (the intercept is part of the model, so a
        ``1`` term among others is accepted and adds nothing).  ``*``, ``/``, ``**``, function
        calls other than ``C``, numbers and intercept removal among other terms are refused.

    Returns
    -------
    list of Term
        In the order written; empty for ``~ 1``/``~ 0``/``~ -1``.

    Raises
    ------
    InvalidParameterError
        Anything else; the message shows the formula with a caret under the offending token.

    Examples
    --------
    >>> [t.name for t in parse_formula("~ elev + grad + elev:C(soil)")]
    ['elev', 'grad', 'elev:C(soil)']
    """
    if not isinstance(formula, str):
        raise InvalidParameterError(
            f"formula={formula!r} must be a string such as '~ elev + grad'."
        )
    toks = _tokenize(formula)
    if not toks:
        raise _formula_error(formula, 0, "the formula is empty")
    if toks[0][1] != "~":
        tilde = [t for t in toks if t[1] == "~"]
        if tilde:
            raise _formula_error(formula, toks[0][2], "a left-hand side is not supported "
                                 "(the counts are given to the model)")
        raise _formula_error(formula, toks[0][2], "the formula must start with '~'")
    rhs = toks[1:]
    if not rhs:
        raise _formula_error(formula, len(formula), "the right-hand side is empty; write '~ 1' "
                             "for no covariates")
    if [t[1] for t in rhs] in (["1"], ["0"], ["-", "1"]):
        return []

    terms: list[Term] = []
    seen: dict[frozenset[Factor], str] = {}
    i = 0

    def expect_factor(i: int) -> tuple[Factor | None, int]:
        if i >= len(rhs):
            raise _formula_error(formula, len(formula), "expected a covariate name")
        kind, text, pos = rhs[i]
        if kind == "name":
            if text == "C" and i + 1 < len(rhs) and rhs[i + 1][1] == "(":
                if i + 2 >= len(rhs) or rhs[i + 2][0] != "name":
                    at = rhs[i + 2][2] if i + 2 < len(rhs) else len(formula)
                    raise _formula_error(formula, at, "C(...) takes one covariate name")
                if i + 3 >= len(rhs) or rhs[i + 3][1] != ")":
                    at = rhs[i + 3][2] if i + 3 < len(rhs) else len(formula)
                    raise _formula_error(formula, at, "expected ')' closing C(")
                return Factor(rhs[i + 2][1], categorical=True), i + 4
            if i + 1 < len(rhs) and rhs[i + 1][1] == "(":
                raise _formula_error(formula, pos, f"function {text}(...) is not supported "
                                     "(transform the covariate before regridding)")
            return Factor(text), i + 1
        if kind == "num" and text == "1":
            return None, i + 1
        if kind == "num":
            raise _formula_error(formula, pos, f"the number {text!r} is not a term (only "
                                 "'~ 1', '~ 0' and '~ -1' are accepted)")
        if text == "-":
            raise _formula_error(formula, pos, "removing terms or the intercept with '-' is "
                                 "only accepted alone, as '~ -1' (no covariates)")
        raise _formula_error(formula, pos, f"unsupported token {text!r}")

    while True:
        start = rhs[i][2] if i < len(rhs) else len(formula)
        factor, i = expect_factor(i)
        factors: list[Factor] = []
        if factor is not None:
            factors.append(factor)
        while i < len(rhs) and rhs[i][1] == ":":
            if factor is None:
                raise _formula_error(formula, rhs[i][2], "'1' cannot be part of an interaction")
            colon = rhs[i][2]
            nxt, i = expect_factor(i + 1)
            if nxt is None:
                raise _formula_error(formula, colon + 1, "'1' cannot be part of an interaction")
            if nxt in factors:
                raise _formula_error(formula, colon, f"{nxt.label} appears twice in one term")
            factors.append(nxt)
        if factors:
            key = frozenset(factors)
            term = Term(tuple(factors))
            if key in seen:
                raise _formula_error(formula, start, f"term {term.name!r} repeats "
                                     f"{seen[key]!r}")
            seen[key] = term.name
            terms.append(term)
        if i >= len(rhs):
            break
        _, text, pos = rhs[i]
        if text == "-":
            raise _formula_error(formula, pos, "removing terms or the intercept with '-' is "
                                 "not supported (the intercept belongs to the model)")
        if text != "+":
            raise _formula_error(formula, pos, f"unsupported token {text!r} (expected '+' or "
                                 "':')" + ("; write a + b + a:b for a*b" if text == "*" else ""))
        i += 1
        if i >= len(rhs):
            raise _formula_error(formula, len(formula), "expected a term after '+'")
    return terms


