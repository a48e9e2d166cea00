"""The fields of a task's configuration dataclass: each carries its help text and the kind of value it takes, so that
the command line builds one option per field (:func:`graph_rma.cli._common.add_config_options`) and the dataclass
checks every value once, where it enters (:func:`check_value`, called by its ``__post_init__``).

Used by :class:`graph_rma.tasks.protocols.Protocol` (node classification) and
:class:`graph_rma.tasks.generator_config.GeneratorConfig` (graph to text). Imports neither torch nor PyG.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any, Mapping, Tuple

from .._errors import GraphRMAError

__all__ = ["KINDS", "check_value", "config_field"]

#: the kinds of value a field takes (its ``metadata["kind"]``), checked by :func:`check_value`
KINDS = (
    "choice",
    "bool",
    "positive_int",
    "nonnegative_int",
    "optional_positive_int",
    "probability",
    "positive_float",
    "nonnegative_float",
    "finite_float",
)


def config_field(default: Any, kind: str, help: str, choices: Tuple[str, ...] = (), option: bool = True) -> Any:
    """A dataclass field with its ``metadata``: ``kind`` (one of :data:`KINDS`, or a kind its dataclass checks
    itself), ``help``, ``choices`` (of a ``choice``) and ``option`` (``False``: no command-line option)."""
    return field(default=default, metadata={"kind": kind, "help": help, "choices": choices, "option": option})


def check_value(name: str, value: Any, meta: Mapping[str, Any]) -> None:
    """A one-line ``GraphRMAError`` naming field ``name`` when ``value`` is not of its kind (``meta["kind"]``)."""
    kind = meta["kind"]
    if kind not in KINDS:
        raise TypeError(f"{name}: unknown kind {kind!r} (expected one of {KINDS})")
    if kind == "optional_positive_int":
        if value is None:
            return
        kind = "positive_int"
    number = not isinstance(value, bool) and isinstance(value, (int, float))
    finite = number and value == value and abs(value) != float("inf")
    if kind == "choice" and value not in meta["choices"]:
        raise GraphRMAError(f"{name}: expected one of {meta['choices']}, got {value!r}")
    if kind == "bool" and not isinstance(value, bool):
        raise GraphRMAError(f"{name}: expected True or False, got {value!r}")
    if kind == "positive_int" and (not number or not isinstance(value, int) or value < 1):
        none = "None or " if meta["kind"] == "optional_positive_int" else ""
        raise GraphRMAError(f"{name}: expected {none}a positive integer, got {value!r}")
    if kind == "nonnegative_int" and (not number or not isinstance(value, int) or value < 0):
        raise GraphRMAError(f"{name}: expected an integer >= 0, got {value!r}")
    if kind == "probability" and (not number or not 0 <= value < 1):
        raise GraphRMAError(f"{name}: expected a probability in [0, 1), got {value!r}")
    if kind == "finite_float" and not finite:
        raise GraphRMAError(f"{name}: expected a finite number, got {value!r}")
    if kind in ("positive_float", "nonnegative_float"):
        if not finite or (value <= 0 if kind == "positive_float" else value < 0):
            raise GraphRMAError(
                f"{name}: expected a finite number {'> 0' if kind == 'positive_float' else '>= 0'}, got {value!r}"
            )
