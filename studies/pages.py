"""What every study driver shares to write its page: generated blocks spliced between markers.

A page's generated block sits between ``<!-- name:start -->`` and ``<!-- name:end -->``; everything outside the
markers is prose kept by hand. The drivers render the blocks from their committed results file, so a page is
always what its results render to (the tests check it).
"""
from __future__ import annotations


def splice(text: str, name: str, block: str) -> str:
    """``text`` with the lines between ``<!-- name:start -->`` and ``<!-- name:end -->`` replaced by ``block``."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    if start not in text or end not in text:
        raise ValueError(f"the page has no generated block {name!r} (markers {start} ... {end})")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{block}\n{end}{tail}"


def block(text: str, name: str) -> str:
    """The generated block ``name`` of a page (without its markers)."""
    return text.split(f"<!-- {name}:start -->", 1)[1].split(f"<!-- {name}:end -->", 1)[0]
