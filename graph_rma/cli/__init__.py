"""``graph-rma <command> ...``: one module per command in this package, each with ``main(argv) -> int``."""
from __future__ import annotations

import importlib
import pkgutil
import sys
from typing import List, Optional


def commands() -> List[str]:
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("graph-rma")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown (not installed)"


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    names = commands()
    if argv[:1] == ["--version"]:
        return print(f"graph-rma {_version()}") or 0
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: graph-rma <command> [options]\n\ncommands: " + ", ".join(names))
        print("run 'graph-rma <command> --help' for a command's options")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in names:
        print(f"graph-rma: unknown command {name!r}; choose from {', '.join(names)}", file=sys.stderr)
        return 2
    module = importlib.import_module(f"{__name__}.{name}")
    return int(module.main(rest) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
