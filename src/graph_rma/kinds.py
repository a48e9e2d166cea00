"""The kinds of value the package's options take, each checked once: a configuration field checks its value with
:func:`check` (``graph_rma.tasks.config_fields``), a command-line word is parsed and checked by the argument type
built from the same kind (``graph_rma.argtypes``), and a seed is checked by :func:`check_seed` wherever it enters.

Also the one list of early-stopping rules (:data:`EARLY_STOPPING_RULES`, :attr:`graph_rma.engine.EarlyStopping.RULES`),
kept here because the torch-free configurations read it too. Imports neither torch nor PyG.
"""

from __future__ import annotations

import math
import operator
from typing import Any, Callable, Dict, Tuple

from ._errors import GraphRMAError

__all__ = ["EARLY_STOPPING_RULES", "KINDS", "MAX_SEED", "check", "check_seed", "describe", "holds"]

#: the largest seed: torch's generators take seeds below 2**64 (``torch.manual_seed(2**64)`` overflows)
MAX_SEED = 2**64 - 1

#: the early-stopping rules of :class:`graph_rma.engine.EarlyStopping` (a node protocol adds ``val_metric``)
EARLY_STOPPING_RULES: Tuple[str, ...] = ("val_acc", "val_auc", "val_loss", "gat")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


#: kind -> (what a value of it is, in a message; the test a value passes)
_KINDS: Dict[str, Tuple[str, Callable[[Any], bool]]] = {
    "bool": ("True or False", lambda v: isinstance(v, bool)),
    "positive_int": ("a positive integer", lambda v: _is_int(v) and v >= 1),
    "nonnegative_int": ("an integer >= 0", lambda v: _is_int(v) and v >= 0),
    "seed": ("a seed in [0, 2**64 - 1]", lambda v: _is_int(v) and 0 <= v <= MAX_SEED),
    "probability": ("a probability in [0, 1)", lambda v: _is_finite(v) and 0 <= v < 1),
    "positive_float": ("a finite number > 0", lambda v: _is_finite(v) and v > 0),
    "nonnegative_float": ("a finite number >= 0", lambda v: _is_finite(v) and v >= 0),
    "finite_float": ("a finite number", _is_finite),
}

#: the kinds :func:`check` knows; a configuration field's ``choice`` and ``optional_positive_int`` build on them
KINDS: Tuple[str, ...] = tuple(_KINDS)


def describe(kind: str) -> str:
    """What a value of ``kind`` is, as the messages say it (``"a positive integer"``)."""
    return _KINDS[kind][0]


def holds(kind: str, value: Any) -> bool:
    """Whether ``value`` is of ``kind``."""
    return _KINDS[kind][1](value)


def check(name: str, kind: str, value: Any) -> Any:
    """``value`` when it is of ``kind``, else a one-line :class:`~graph_rma.GraphRMAError` naming ``name``
    (``"lr: expected a finite number > 0, got 0"``)."""
    if kind not in _KINDS:
        raise TypeError(f"{name}: unknown kind {kind!r} (expected one of {KINDS})")
    if not holds(kind, value):
        raise GraphRMAError(f"{name}: expected {describe(kind)}, got {value!r}")
    return value


def check_seed(seed: Any, name: str = "seed") -> int:
    """``seed`` as an ``int`` (a NumPy integer is accepted) when it lies in ``[0, MAX_SEED]``, the range torch's
    generators take, else a one-line :class:`~graph_rma.GraphRMAError` naming ``name``."""
    try:
        seed = operator.index(seed)
    except TypeError:
        raise GraphRMAError(f"{name}: expected {describe('seed')}, got {seed!r}") from None
    return check(name, "seed", seed)
