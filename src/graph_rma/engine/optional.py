r"""Optional dependencies: one function, :func:`require`, imports a module that an extra provides.

``pip install graph-rma`` installs what the main jobs need (training, the Cora benchmark, loading every dataset).
The parts that need more say in one line which extra enables them::

    plots         matplotlib                 pictures (Cora accuracy plot, diagnostics figures)
    text-metrics  pycocoevalcap, rouge-score BLEU / METEOR 1.5 / ROUGE of generated text

A caller whose optional part can be left out (a plot after a benchmark) catches :class:`MissingExtraError` and goes
on; one whose whole job needs the module (scoring generated text) lets the one-line error reach the user.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Optional

__all__ = ["MissingExtraError", "MissingToolError", "require"]


class MissingExtraError(ImportError):
    """An optional dependency is not installed; :attr:`extra` names the extra that installs it."""

    def __init__(self, message: str, module: str, extra: str) -> None:
        super().__init__(message, name=module)
        self.module, self.extra = module, extra

    @property
    def hint(self) -> str:
        """``pip install 'graph-rma[<extra>]'``."""
        return f"pip install 'graph-rma[{self.extra}]'"


def require(module: str, extra: str, what: Optional[str] = None) -> ModuleType:
    """Import ``module`` (dotted name) or raise :class:`MissingExtraError` saying which extra installs it.

    Args:
        module: the module to import, e.g. ``"matplotlib.figure"``.
        extra: the ``graph-rma`` extra that provides it, e.g. ``"plots"``.
        what: what needs it, for the message (default: ``module``'s top-level package is named alone).

    Example::

        figure = require("matplotlib.figure", "plots", "the accuracy plot")
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        missing = getattr(exc, "name", None) or top
        if missing.split(".")[0] != top:
            raise  # the module is installed but one of *its* imports is broken: show that, not a wrong hint
        need = f"{what} needs {top}" if what else f"{top} is not installed"
        raise MissingExtraError(f"{need}: pip install 'graph-rma[{extra}]'", top, extra) from None


class MissingToolError(RuntimeError):
    """A program outside Python that a feature runs (Java for METEOR 1.5) is not installed; the message says how to
    install it or what to use instead."""
