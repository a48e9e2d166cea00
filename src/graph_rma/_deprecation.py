"""Renamed public names, kept working for one release: a module ``__getattr__`` that warns and gives the new object.

Each module that renamed something ends with ``__getattr__ = renamed(__name__, {"OldName": "module:NewName"})``.
An old name is looked up only when the module has no attribute of that name, so the new names cost nothing; the
new object is imported on first use, so an old name never makes a module import more than it did.
"""

from __future__ import annotations

import functools
import importlib
import warnings
from typing import Any, Callable, Dict, TypeVar

__all__ = ["renamed", "renamed_keywords", "warn_renamed"]

F = TypeVar("F", bound=Callable[..., Any])

#: When the old names go (docs/changes.md lists every rename).
REMOVAL = "the next release"


def warn_renamed(old: str, new: str, stacklevel: int = 3) -> None:
    """A ``DeprecationWarning`` saying that ``old`` is now ``new``."""
    warnings.warn(f"{old} is deprecated and goes in {REMOVAL}; use {new}", DeprecationWarning, stacklevel=stacklevel)


def renamed(module: str, names: Dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``module``: ``names`` maps each old name to its new home, ``"pkg.mod:NewName"``.
    Looking an old name up warns (:func:`warn_renamed`) and returns the new object itself."""

    def __getattr__(name: str) -> Any:
        target = names.get(name)
        if target is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        where, new = target.split(":")
        warn_renamed(f"{module}.{name}", f"{where}.{new}")
        return getattr(importlib.import_module(where), new)

    return __getattr__


def renamed_keywords(**names: str) -> Callable[[F], F]:
    """A decorator: the function still takes each old keyword argument (``old="new"``), with a warning."""

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            for old, new in names.items():
                if old in kwargs:
                    if new in kwargs:
                        raise TypeError(f"{fn.__name__}() got both {old}= and its new name {new}=")
                    warn_renamed(f"{fn.__name__}({old}=...)", f"{fn.__name__}({new}=...)")
                    kwargs[new] = kwargs.pop(old)
            return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate
