"""One-line errors for scripts: :func:`one_line_errors` makes a user's mistake (a bad value, missing data, a missing
extra or tool) end a script with one line on stderr (and Python's exit status for an uncaught exception, 1), as the
``graph-rma`` commands do, while any other exception keeps its traceback (it is a bug)."""

from __future__ import annotations

import os
import sys
from types import TracebackType
from typing import Optional, Type

from .optional import MissingExtraError, MissingToolError

__all__ = ["one_line_errors", "raised_by_package"]


def raised_by_package(tb: Optional[TracebackType]) -> bool:
    """The exception whose traceback is ``tb`` was raised in this package's own code (innermost frame)."""
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and "graph_rma" in tb.tb_frame.f_code.co_filename


def one_line_errors(prog: Optional[str] = None) -> None:
    """Install a ``sys.excepthook`` for the rest of the script (see the module); ``prog`` prefixes the line
    (default: the script's file name)."""
    name = prog or os.path.basename(sys.argv[0] or "script")
    previous = sys.excepthook

    def hook(kind: Type[BaseException], exc: BaseException, tb: Optional[TracebackType]) -> None:
        missing = isinstance(exc, (FileNotFoundError, MissingExtraError, MissingToolError)) or (
            isinstance(exc, LookupError) and raised_by_package(tb)
        )
        if missing or isinstance(exc, ValueError):
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else kind.__name__
            print(f"{name}: {text}", file=sys.stderr)
            return
        previous(kind, exc, tb)

    sys.excepthook = hook
