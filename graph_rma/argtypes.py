"""Command-line argument types shared by the ``graph-rma`` commands and the example scripts.

Each turns one command-line word into a value or raises :class:`argparse.ArgumentTypeError`, which argparse prints
as one line naming the option (``--epochs: expected a positive integer, got '-1'``) and exits with 2::

    parser.add_argument("--epochs", type=positive_int, default=1000)

They live outside :mod:`graph_rma.cli` so that scripts, which import the library and never the command line, check
their arguments the same way. Nothing here imports torch.
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import List

__all__ = ["nonnegative_float", "nonnegative_int", "out_dir", "out_file", "positive_float", "positive_int",
           "probability", "seed_list"]


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def positive_int(text: str) -> int:
    """An integer >= 1."""
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def nonnegative_int(text: str) -> int:
    """An integer >= 0."""
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


def _float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """A number > 0."""
    value = _float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def nonnegative_float(text: str) -> float:
    """A number >= 0."""
    value = _float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def probability(text: str) -> float:
    """A number in [0, 1)."""
    value = _float(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"expected a probability in [0, 1), got {text!r}")
    return value


def seed_list(text: str) -> List[int]:
    """One word of ``--seeds``: a seed ``N`` or an inclusive range ``A-B``."""
    first, dash, last = text.partition("-")
    try:
        lo, hi = int(first), int(last if dash else first)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a seed (0, 1, ...) or a range such as 0-9, got {text!r}") from None
    if lo < 0 or hi < lo:
        raise argparse.ArgumentTypeError(f"expected seeds >= 0 and a range A-B with A <= B, got {text!r}")
    return list(range(lo, hi + 1))


def out_dir(text: str) -> Path:
    """An output folder: it may exist (as a folder) or not yet; an empty path, or an existing file there or above,
    is refused."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a folder, got an empty path")
    path = Path(text)
    for p in (path, *path.parents):
        if p.exists():
            if not p.is_dir():
                what = "is a file" if p == path else f"is below {p}, which is a file"
                raise argparse.ArgumentTypeError(f"{text} {what}, not a folder")
            break
    return path


def out_file(text: str) -> Path:
    """An output file: an empty path, an existing folder, or a path below a file is refused."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a file, got an empty path")
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder, not a file")
    for p in path.parents:
        if p.exists():
            if not p.is_dir():
                raise argparse.ArgumentTypeError(f"{text} is below {p}, which is a file")
            break
    return path
