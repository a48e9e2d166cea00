"""One-line errors for scripts: :func:`one_line_errors`, a helper a script calls once at its top, makes a user's
mistake that this package raised (a bad value, missing data, a missing extra or tool) end the script with one line
on stderr (and Python's exit status for an uncaught exception, 1), as the ``graph-rma`` commands do. Every other
exception keeps its traceback: a bug, and any exception the package did not raise (the script's own code, or a
library it calls). The commands and this helper share one classifier (``graph_rma._errors.classify``)."""

from __future__ import annotations

import os
import sys
from types import TracebackType
from typing import Optional, Type

from .._errors import classify, raised_by_package

__all__ = ["one_line_errors", "raised_by_package"]


def one_line_errors(prog: Optional[str] = None) -> None:
    """A helper for scripts: install a ``sys.excepthook`` for the rest of the script (see the module); ``prog``
    prefixes the line (default: the script's file name). Not for libraries or notebooks: it replaces the
    interpreter's hook for the whole process (it passes on to the previous hook every exception it does not shorten,
    so the script's own errors keep their tracebacks); Ctrl-C ends the script with one line::

        import graph_rma.engine

        graph_rma.engine.one_line_errors()  # a mistake raised by graph_rma: one line; the script's own: a traceback
    """
    name = prog or os.path.basename(sys.argv[0] or "script")
    previous = sys.excepthook

    def hook(kind: Type[BaseException], exc: BaseException, tb: Optional[TracebackType]) -> None:
        if isinstance(exc, KeyboardInterrupt):  # Ctrl-C: one line (Python still ends the process by SIGINT)
            print(f"{name}: interrupted", file=sys.stderr)
            return
        verdict = classify(exc, tb)
        if verdict is None:
            previous(kind, exc, tb)
        else:
            print(f"{name}: {verdict[1]}", file=sys.stderr)

    sys.excepthook = hook
