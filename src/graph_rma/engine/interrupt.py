"""Ctrl-C at a safe point: a run that can save itself stops where its state is whole, saved, instead of losing
what it trained since its last periodic save.

Inside :func:`deferred_interrupt` a SIGINT (Ctrl-C, ``timeout -s INT``, a job scheduler's stop) is remembered, not
raised. The loop asks :func:`interrupt_requested` at its safe points (between two epochs), saves and raises
:class:`KeyboardInterrupt` itself; if the block ends with the interrupt still pending (the run finished in the
meantime, and its result was written inside the block), the block raises it on exit. Outside the main thread no
signal handler can be set: the block then holds nothing and Ctrl-C acts at once, as without it.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Dict, Iterator, List

_ACTIVE: List[Dict[str, bool]] = []  # one entry per open block of this thread (the innermost last)


@contextmanager
def deferred_interrupt() -> Iterator[None]:
    """Hold SIGINT until the block's code asks (:func:`interrupt_requested`) or the block ends; then
    :class:`KeyboardInterrupt`. The handler in force before the block is restored on exit."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = {"asked": False}

    def hold(signum, frame) -> None:
        held["asked"] = True

    previous = signal.signal(signal.SIGINT, hold)
    _ACTIVE.append(held)
    try:
        yield
    finally:
        _ACTIVE.pop()
        signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)
    if held["asked"]:
        raise KeyboardInterrupt


def interrupt_requested() -> bool:
    """Whether a SIGINT came while the innermost :func:`deferred_interrupt` block runs (``False`` outside one)."""
    return bool(_ACTIVE) and _ACTIVE[-1]["asked"]
