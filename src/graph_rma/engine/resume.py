"""Resuming a run: the settings it was started with against the settings it is resumed with.

A run folder holds one run. Resuming it with other settings (a larger model, another learning rate) would either
silently return the old run or mix two configurations in one set of weights, so :func:`check_resume` refuses that
and names every setting that differs; settings that may change on resume (more epochs, decoding options) are
applied, and it returns one line per change so the caller can say so.
"""

from __future__ import annotations

from typing import Any, Iterable, List, Mapping

from .._errors import GraphRMAError

__all__ = ["ResumeMismatchError", "check_resume"]

_MISSING = object()


class ResumeMismatchError(GraphRMAError):
    """A run folder was resumed with settings that differ from its own; :attr:`differences` lists them as
    ``(key, saved value, new value)``."""

    def __init__(self, message: str, differences: List[tuple]) -> None:
        super().__init__(message)
        self.differences = differences


def _show(value: Any) -> str:
    return "(unset)" if value is _MISSING else repr(value)


def check_resume(
    saved: Mapping[str, Any], new: Mapping[str, Any], may_change: Iterable[str] = ("epochs",), where: str = "the run"
) -> List[str]:
    """Compare the settings a run was saved with to those it is resumed with.

    Keys present on one side only count as differences (shown as ``(unset)``).

    Args:
        saved: the settings stored with the run (e.g. the checkpoint's ``config``).
        new: the settings of the call that resumes it.
        may_change: keys whose new value is applied on resume instead of being refused.
        where: names the run in the messages (e.g. the checkpoint's path).

    Returns:
        One line per changed key of ``may_change``, ``"epochs: 8 -> 12"`` (empty when nothing changed).

    Raises:
        ResumeMismatchError: some other key differs; the message lists every such key with both values.
    """
    allowed = set(may_change)
    changed, refused = [], []
    for key in sorted(set(saved) | set(new), key=str):
        old, value = saved.get(key, _MISSING), new.get(key, _MISSING)
        if old == value:
            continue
        (changed if key in allowed else refused).append((key, old, value))
    if refused:
        listed = ", ".join(f"{k} {_show(o)} -> {_show(v)}" for k, o, v in refused)
        raise ResumeMismatchError(
            f"{where} was trained with other settings ({listed}); use the same settings to "
            "resume it, or another output folder for a new run",
            refused,
        )
    return [f"{k}: {_show(o)} -> {_show(v)}" for k, o, v in changed]
