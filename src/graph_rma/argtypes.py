"""Command-line argument types shared by the ``graph-rma`` commands and the example scripts.

Each turns one command-line word into a value or raises :class:`argparse.ArgumentTypeError`, which argparse prints
as one line naming the option (``--epochs: expected a positive integer, got '-1'``) and exits with 2::

    parser.add_argument("--epochs", type=positive_int, default=1000)

They live outside :mod:`graph_rma.cli` so that scripts, which import the library and never the command line, check
their arguments the same way. Nothing here imports torch at import time (:func:`device` does when a CUDA device is
named, to check that it exists), so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
from typing import Any, Callable, List, Optional

from . import kinds
from ._errors import GraphRMAError

__all__ = [
    "DEFAULT_THREADS",
    "MAX_SEED",
    "MAX_SEEDS",
    "SeedsAction",
    "add_threads_option",
    "device",
    "nonnegative_float",
    "nonnegative_int",
    "out_dir",
    "out_file",
    "positive_float",
    "positive_int",
    "probability",
    "require_out_dir",
    "seed",
    "seed_list",
]

#: torch's CPU threads in every ``graph-rma`` command and example (``--threads``): one, so that a run repeats to the
#: last digit (the order of a sum over threads changes its rounding) and runs side by side on a shared machine do not
#: slow each other down; on an idle machine more threads are faster.
DEFAULT_THREADS = 1

#: the largest seed (:data:`graph_rma.kinds.MAX_SEED`)
MAX_SEED = kinds.MAX_SEED
#: the most seeds one ``--seeds`` may name (each is a training run; a range beyond this is a typo, and its list
#: would not fit in memory)
MAX_SEEDS = 100_000


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def _float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def _of_kind(kind: str, parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """The argument type of ``kind`` (:mod:`graph_rma.kinds`): the word parsed by ``parse``, then the kind's one
    check; a word that fails it is argparse's one line (``expected a positive integer, got '-1'``)."""

    def arg(text: str) -> Any:
        value = parse(text)
        if not kinds.holds(kind, value):
            raise argparse.ArgumentTypeError(f"expected {kinds.describe(kind)}, got {text!r}")
        return value

    arg.__name__ = arg.__qualname__ = kind
    arg.__doc__ = f"{kinds.describe(kind)[0].upper()}{kinds.describe(kind)[1:]} (:mod:`graph_rma.kinds`)."
    return arg


positive_int = _of_kind("positive_int", _int)
nonnegative_int = _of_kind("nonnegative_int", _int)
positive_float = _of_kind("positive_float", _float)
nonnegative_float = _of_kind("nonnegative_float", _float)
probability = _of_kind("probability", _float)
seed = _of_kind("seed", nonnegative_int)  # a negative word is told as "an integer >= 0", as every count is
seed.__doc__ = "One seed: an integer in ``[0, MAX_SEED]`` (the range torch's generators accept)."


def seed_list(text: str) -> List[int]:
    """One word of ``--seeds``: a seed ``N`` or an inclusive range ``A-B`` (seeds in ``[0, MAX_SEED]``, at most
    :data:`MAX_SEEDS` of them)."""
    first, dash, last = text.partition("-")
    try:
        lo, hi = int(first), int(last if dash else first)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a seed (0, 1, ...) or a range such as 0-9, got {text!r}") from None
    if lo < 0 or hi < lo:
        raise argparse.ArgumentTypeError(f"expected seeds >= 0 and a range A-B with A <= B, got {text!r}")
    if hi > MAX_SEED:
        raise argparse.ArgumentTypeError(f"expected seeds in [0, 2**64 - 1] (torch's seed range), got {text!r}")
    if hi - lo + 1 > MAX_SEEDS:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_SEEDS} seeds, got {text!r} ({hi - lo + 1} seeds)")
    return list(range(lo, hi + 1))


class SeedsAction(argparse.Action):
    """``--seeds 0 1 2``, ``--seeds 0-9`` or both mixed (``nargs="+", type=seed_list``): one flat list without
    repeats, at most :data:`MAX_SEEDS` long. The same grammar in every command and script::

        parser.add_argument("--seeds", nargs="+", type=seed_list, action=SeedsAction, default=[0, 1, 2])
    """

    def __call__(self, parser, namespace, values, option_string=None):
        seeds = [s for chunk in values for s in chunk]
        if len(seeds) > MAX_SEEDS:
            parser.error(f"argument {option_string}: expected at most {MAX_SEEDS} seeds, got {len(seeds)}")
        if len(set(seeds)) != len(seeds):
            parser.error(f"argument {option_string}: a seed is given twice in {' '.join(map(str, seeds))}")
        setattr(namespace, self.dest, seeds)


def device(text: str) -> str:
    """``cpu``, ``cuda`` or ``cuda:N``; a CUDA device must exist (torch is imported only to check that)."""
    name = text.strip().lower()
    kind, colon, index = name.partition(":")
    if kind not in ("cpu", "cuda") or (colon and (kind != "cuda" or not index.isdigit())):
        raise argparse.ArgumentTypeError(f"expected cpu, cuda or cuda:N, got {text!r}")
    if kind == "cuda":
        import torch  # only when a CUDA device is asked for: --help and CPU runs stay without this check

        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise argparse.ArgumentTypeError(f"{text!r} asked for, but this torch build sees no CUDA device")
        if colon and int(index) >= count:
            raise argparse.ArgumentTypeError(
                f"{text!r} asked for, but this machine has {count} CUDA device(s): cuda:0 to cuda:{count - 1}"
            )
    return name


def _not_writable(text: str, existing: Path) -> Optional[str]:
    """Why nothing can be created in folder ``existing`` (the nearest existing folder of path ``text``), or None."""
    if os.access(existing, os.W_OK | os.X_OK):
        return None
    where = "is" if Path(text) == existing else f"would be created in {existing}, which is"
    return f"{text} {where} not writable"


def _out_dir_problem(text: str) -> Optional[str]:
    if not str(text).strip():
        return "expected a folder, got an empty path"
    path = Path(text)
    for p in (path, *path.parents):
        if p.exists():
            if not p.is_dir():
                what = "is a file" if p == path else f"is below {p}, which is a file"
                return f"{text} {what}, not a folder"
            return _not_writable(str(text), p)
    return None


def out_dir(text: str) -> Path:
    """An output folder: it may exist (as a folder) or not yet. Refused before anything runs: an empty path, an
    existing file there or above, and a folder that cannot be written (the folder itself when it exists, else the
    nearest existing folder above it, where it would be created: read-only or without write permission)."""
    problem = _out_dir_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return Path(text)


def require_out_dir(path, option: str = "--out") -> Path:
    """:func:`out_dir`'s checks for a folder the command chose itself (a default such as ``runs/<dataset>``):
    ``ValueError("--out: ...")`` naming ``option`` when it cannot be an output folder."""
    problem = _out_dir_problem(str(path))
    if problem:
        raise GraphRMAError(f"{option}: {problem}")
    return Path(path)


def out_file(text: str) -> Path:
    """An output file: an empty path, an existing folder, a path below a file, and a file whose folder (or the
    nearest existing folder above it) cannot be written are refused."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a file, got an empty path")
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder, not a file")
    for p in path.parents:
        if p.exists():
            if not p.is_dir():
                raise argparse.ArgumentTypeError(f"{text} is below {p}, which is a file")
            problem = _not_writable(str(p), p)  # written through a temporary file beside it: the folder counts
            if problem:
                raise argparse.ArgumentTypeError(f"{text} cannot be written: {problem}")
            break
    return path


def add_threads_option(parser: argparse.ArgumentParser) -> None:
    """``--threads N`` (default :data:`DEFAULT_THREADS`), the same option in every command and example; the caller
    applies it with ``torch.set_num_threads(args.threads)``."""
    parser.add_argument(
        "--threads",
        type=positive_int,
        default=DEFAULT_THREADS,
        help=f"torch CPU threads (default: {DEFAULT_THREADS}, as in every graph-rma command and example: results "
        f"repeat exactly and parallel runs do not slow each other; on an idle machine more are faster)",
    )
