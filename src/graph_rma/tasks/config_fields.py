"""The fields of a task's configuration dataclass: each carries its help text and the kind of value it takes, so that
the command line builds one option per field (:func:`graph_rma.cli._common.add_config_options`) and the dataclass
checks every value once, where it enters (:func:`check_value`, called by its ``__post_init__``).

Used by :class:`graph_rma.tasks.protocols.Protocol` (node classification) and
:class:`graph_rma.tasks.generator_config.GeneratorConfig` (graph to text). Imports neither torch nor PyG.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any, Mapping, Tuple

from .. import kinds
from .._errors import GraphRMAError

__all__ = ["KINDS", "check_value", "config_field"]

#: the kinds of value a field takes (its ``metadata["kind"]``), checked by :func:`check_value`: the value kinds of
#: :mod:`graph_rma.kinds` (which the command line's argument types are built from), ``choice`` (one of the field's
#: ``choices``) and ``optional_positive_int`` (``None`` or a positive integer)
KINDS = ("choice", "optional_positive_int") + tuple(k for k in kinds.KINDS if k != "seed")


def config_field(default: Any, kind: str, help: str, choices: Tuple[str, ...] = (), option: bool = True) -> Any:
    """A dataclass field with its ``metadata``: ``kind`` (one of :data:`KINDS`, or a kind its dataclass checks
    itself), ``help``, ``choices`` (of a ``choice``) and ``option`` (``False``: no command-line option)."""
    return field(default=default, metadata={"kind": kind, "help": help, "choices": choices, "option": option})


def check_value(name: str, value: Any, meta: Mapping[str, Any]) -> None:
    """A one-line ``GraphRMAError`` naming field ``name`` when ``value`` is not of its kind (``meta["kind"]``)."""
    kind = meta["kind"]
    if kind not in KINDS:
        raise TypeError(f"{name}: unknown kind {kind!r} (expected one of {KINDS})")
    if kind == "choice":
        if value not in meta["choices"]:
            raise GraphRMAError(f"{name}: expected one of {meta['choices']}, got {value!r}")
    elif kind == "optional_positive_int":
        if value is not None and not kinds.holds("positive_int", value):
            raise GraphRMAError(f"{name}: expected None or {kinds.describe('positive_int')}, got {value!r}")
    else:
        kinds.check(name, kind, value)
