"""Which exceptions end a command or a script with one line: the one classifier shared by the ``graph-rma``
commands (:func:`graph_rma.cli._common.run_command`) and by :func:`graph_rma.engine.one_line_errors` (scripts).

An exception becomes one line when it is a user's mistake that this package raised, told by its type: the package's
own missing-data, missing extra or missing tool errors (exit status 1), :class:`GraphRMAError` (bad input, every
subclass included: 2) and :class:`UsageError` (2); and, raised by this package's code (:func:`raised_by_package`), a
missing resource (``LookupError`` other than ``KeyError``/``IndexError``: 1) or a file-system failure on a named
path (``OSError`` with a file name: 1). Anything else keeps its traceback: a bug (a plain ``ValueError`` included,
wherever it was raised), and every exception raised by code outside the package (the user's own code, or a library
the user called).

Nothing here imports torch (the package's own exception classes are looked up in ``sys.modules``, where they are
once anything could have raised them), so a command classifies a usage error without loading it.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from types import TracebackType
from typing import Optional, Tuple

__all__ = ["GraphRMAError", "UsageError", "classify", "raised_by_package"]

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


class GraphRMAError(ValueError):
    """The package's one exception type for bad input (a value, a file or an option it refuses): one line, exit 2.

    A ``ValueError`` subclass, so code that caught ``ValueError`` keeps working; subclasses may name a kind of
    mistake where callers need to tell them apart."""


class UsageError(Exception):
    """A mistake on the command line found by the command itself (e.g. no trained run in ``--out``): one line,
    exit 2."""


def _library_roots() -> Tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {os.path.abspath(paths[k]) for k in ("stdlib", "platstdlib", "purelib", "platlib") if paths.get(k)}
    return tuple(sorted(r + os.sep for r in roots))


_LIBRARY = _library_roots()


def _where(filename: str) -> str:
    """``"package"``, ``"library"`` (the standard library, an installed package, frozen modules) or ``"user"``."""
    if filename.startswith("<frozen "):
        return "library"
    path = os.path.abspath(filename)
    if path.startswith(_PACKAGE):
        return "package"
    parts = path.split(os.sep)
    if path.startswith(_LIBRARY) or "site-packages" in parts or "dist-packages" in parts:
        return "library"
    return "user"


def raised_by_package(tb: Optional[TracebackType]) -> bool:
    """Whether the exception whose traceback is ``tb`` was raised by this package: walking out from the frame that
    raised it, past the standard library's and installed libraries' frames (a ``json`` or torch error inside the
    package's code), the first other frame is the package's. ``False`` when it is the user's own code (a script,
    a callback the package called, a test)."""
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    for filename in reversed(frames):
        where = _where(filename)
        if where != "library":
            return where == "package"
    return False


def _found(exc: BaseException, module: str, name: str) -> bool:
    loaded = sys.modules.get(module)
    return loaded is not None and isinstance(exc, getattr(loaded, name))


def classify(exc: BaseException, tb: Optional[TracebackType] = None) -> Optional[Tuple[int, str]]:
    """``(exit status, one line)`` when ``exc`` is a user's mistake raised by this package (see the module), else
    ``None``: show the traceback. ``tb``: its traceback (default: ``exc.__traceback__``)."""
    if not isinstance(exc, Exception):  # KeyboardInterrupt, SystemExit
        return None
    tb = exc.__traceback__ if tb is None else tb
    text = str(exc).strip() or type(exc).__name__
    if (
        _found(exc, "graph_rma.data.root", "DataNotFoundError")
        or _found(exc, "graph_rma.engine.optional", "MissingExtraError")
        or _found(exc, "graph_rma.engine.optional", "MissingToolError")
    ):
        return 1, text
    if isinstance(exc, (GraphRMAError, UsageError)):
        return 2, text
    if isinstance(exc, LookupError) and not isinstance(exc, (KeyError, IndexError)) and raised_by_package(tb):
        return 1, text.splitlines()[0]  # a missing resource (NLTK data): its first line
    if isinstance(exc, OSError) and exc.filename is not None and raised_by_package(tb):
        return 1, f"{exc.strerror or exc}: {exc.filename}"  # a file-system failure on a user's path
    return None
