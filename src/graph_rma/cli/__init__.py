"""``graph-rma <command> ...``: one module per command in this package, each with ``main(argv) -> int``.

The command modules import only argparse and :mod:`graph_rma.tasks.defaults` at the top, and the task (torch, PyG)
when the command runs: ``graph-rma`` and every ``--help`` answer without loading torch.
"""

from __future__ import annotations

import importlib
import pkgutil
import signal
import sys
import threading
from types import ModuleType
from typing import List, Optional


def commands() -> List[str]:
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("graph-rma")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown (not installed)"


def usage() -> str:
    """What ``graph-rma`` alone prints: the commands, one line each."""
    from ._common import command_summary

    names = commands()
    width = max(map(len, names))
    lines = ["usage: graph-rma <command> [options]", "", "commands:"]
    for name in names:
        lines.append(f"  {name:<{width}}  {command_summary(importlib.import_module(f'{__name__}.{name}').__doc__)}")
    lines += ["", "run 'graph-rma <command> --help' for a command's options; 'graph-rma --version' for the version"]
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:  # Ctrl-C while a command's module is imported (before its own handling starts)
        print("graph-rma: interrupted", file=sys.stderr)
        return 130


def _main(argv: Optional[List[str]]) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    names = commands()
    if argv[:1] == ["--version"]:
        return print(f"graph-rma {_version()}") or 0
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in names:
        print(f"graph-rma: unknown command {name!r}; choose from {', '.join(names)}", file=sys.stderr)
        return 2
    preload = () if name == "score" or {"-h", "--help"} & set(rest) else ("torch._dynamo",)
    module = _import_holding_ctrl_c(f"{__name__}.{name}", *preload)
    return int(module.main(rest) or 0)


def _import_holding_ctrl_c(name: str, *preload: str) -> ModuleType:
    """Import ``preload`` (what the command imports later anyway: ``torch._dynamo`` brings Triton) and a command's
    module with Ctrl-C held until the imports end, then raise :class:`KeyboardInterrupt`: an interrupt inside a native
    extension's import (Triton's) aborts the interpreter instead of raising."""
    if threading.current_thread() is not threading.main_thread():
        return importlib.import_module(name)
    held: List[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
    try:
        for heavy in preload:
            importlib.import_module(heavy)
        module = importlib.import_module(name)
    finally:
        signal.signal(signal.SIGINT, previous)
    if held:
        raise KeyboardInterrupt
    return module


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
