"""Stop at a safe point: a run that can save itself stops where its state is whole, saved, instead of losing what
it trained since its last periodic save.

Inside :func:`deferred_interrupt` a SIGINT (Ctrl-C, ``timeout -s INT``) or a SIGTERM (``kill``, ``timeout``, a job
scheduler's stop before its kill) is remembered, not acted on. The loop asks :func:`interrupt_requested` at its safe
points (between two epochs, two optimizer steps), saves and raises :class:`KeyboardInterrupt` itself; if the block
ends with the request still pending (the run finished in the meantime, and its result was written inside the block),
the block raises it on exit. Outside the main thread no signal handler can be set: the block then holds nothing and
the signals act at once, as without it.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Dict, Iterator, List

SIGNALS = (signal.SIGINT, signal.SIGTERM)
_DEFAULT = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}  # Python's own
_ACTIVE: List[Dict[str, bool]] = []  # one entry per open block (the innermost last)


@contextmanager
def deferred_interrupt() -> Iterator[None]:
    """Hold SIGINT and SIGTERM until the block's code asks (:func:`interrupt_requested`) or the block ends; then
    :class:`KeyboardInterrupt`. The handlers in force before the block are restored on exit."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = {"asked": False}

    def hold(signum, frame) -> None:
        held["asked"] = True

    previous = {sig: signal.signal(sig, hold) for sig in SIGNALS}
    _ACTIVE.append(held)
    try:
        yield
    finally:
        _ACTIVE.pop()
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else _DEFAULT[sig])
    if held["asked"]:
        raise KeyboardInterrupt


def interrupt_requested() -> bool:
    """Whether SIGINT or SIGTERM came while the innermost :func:`deferred_interrupt` block runs (``False`` outside
    one)."""
    return bool(_ACTIVE) and _ACTIVE[-1]["asked"]
