"""Generated blocks of a Markdown page: the one page writer shared by the study drivers (``studies/``) and the
benchmarks' report (``benchmarks/``), which therefore import neither each other.

A page's generated block sits between ``<!-- name:start -->`` and ``<!-- name:end -->``; everything outside the
markers is prose kept by hand.
"""

from __future__ import annotations

from typing import Callable, Dict

from .._errors import GraphRMAError

__all__ = ["block", "render_blocks", "splice"]


def splice(text: str, name: str, block: str) -> str:
    """``text`` with the lines between ``<!-- name:start -->`` and ``<!-- name:end -->`` replaced by ``block``.

    Raises:
        GraphRMAError: the page has no such markers.
    """
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    if start not in text or end not in text:
        raise GraphRMAError(f"the page has no generated block {name!r} (markers {start} ... {end})")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{block}\n{end}{tail}"


def block(text: str, name: str) -> str:
    """The generated block ``name`` of a page (without its markers)."""
    return text.split(f"<!-- {name}:start -->", 1)[1].split(f"<!-- {name}:end -->", 1)[0]


def render_blocks(text: str, results: Dict, blocks: Dict[str, Callable[[Dict], str]]) -> str:
    """``text`` with each generated block ``name`` replaced by ``blocks[name](results)``."""
    for name, fn in blocks.items():
        text = splice(text, name, fn(results))
    return text
