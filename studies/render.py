"""Every generated block from the committed results files: the results pages in docs/, the benchmarks page and the
results summary of the README and the docs home.

    python -m studies.render           # rewrites each page whose generated blocks are not what its results give
    python -m studies.render --check   # writes nothing: names each page that differs, exit status 1 if one does

Run from the repository root. Each page's blocks are its driver's renderers (``python -m studies.<driver> report``
writes the results file, then the same blocks), benchmarks/README.md's are ``benchmarks.report``'s, and the summary
is :mod:`studies.summary`; docs/webnlg.md has :mod:`studies.graph_to_text`'s blocks and :mod:`studies.webnlg2017`'s
(from docs/webnlg2017/results.json); the README's expected quick-start output is :mod:`studies.quickstart`'s (from
docs/quickstart/: the quick start run as a script, and examples/quickstart_vs_stock.py's seeds). Not rendered here:
docs/where-it-helps/, the earlier sweep's tables, which its driver writes from its runs (no results file is
committed for them).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Callable, Dict, List

from benchmarks import report as bench
from graph_rma import GraphRMAError
from graph_rma.engine import one_line_errors
from graph_rma.engine.blocks import render_blocks, splice
from studies import (
    authors_update,
    baselines,
    calibration,
    cora,
    diagnostics,
    graph_to_text,
    metrics,
    quickstart,
    summary,
    text,
    webnlg2017,
    webnlg2017_diagnosis,
    webnlg2017_evidence,
)

REPO = Path(__file__).resolve().parents[1]


def _results(page: str) -> Dict:
    return json.loads((REPO / "docs" / page / "results.json").read_text())


def renderers() -> Dict[str, Callable[[str], str]]:
    """Each page (its path in the repository) with its renderer: the page's text -> the text with every generated
    block rendered from the committed results."""
    pages: Dict[str, Callable[[str], str]] = {
        "docs/baselines.md": lambda t: baselines.render(t, _results("baselines")),
        "docs/cora.md": lambda t: cora.render(t, _results("cora")),
        "docs/calibration.md": lambda t: calibration.render(t, _results("calibration")),
        "docs/text.md": lambda t: text.render(t, _results("text")),
        "docs/diagnostics.md": lambda t: diagnostics.render(t, _results("diagnostics")),
        "docs/metrics.md": lambda t: metrics.render(t, _results("metrics")),
        "docs/authors-update.md": lambda t: authors_update.render(t, _results("authors-update")),
        "benchmarks/README.md": lambda t: render_blocks(t, bench.load(), bench.BLOCKS),
        "README.md": lambda t: splice(
            splice(t, summary.BLOCK, summary.render_summary(summary.load(), "docs/")),
            quickstart.BLOCK,
            quickstart.render_committed("docs/"),
        ),
        "docs/index.md": lambda t: splice(t, summary.BLOCK, summary.render_summary(summary.load(), "")),
    }
    for task in graph_to_text.TASKS:
        pages[f"docs/{task}.md"] = lambda t, task=task: graph_to_text.render(task, t, _results(task))
    webnlg = pages["docs/webnlg.md"]  # its challenge-baseline block is studies.webnlg2017's, from docs/webnlg2017/
    pages["docs/webnlg.md"] = lambda t: webnlg2017_evidence.render(
        webnlg2017_diagnosis.render(
            webnlg2017.render(webnlg(t), webnlg2017.committed()), _results("webnlg2017/diagnosis")
        ),
        _results("webnlg2017/evidence"),
    )
    return pages


def render_all(check: bool = False) -> List[str]:
    """The pages whose text is not what their results render to; rewritten unless ``check``. Every page is rendered
    before any is written, so an error leaves every file as it was."""
    changed = {}
    for name, render in renderers().items():
        path = REPO / name
        old = path.read_text(encoding="utf-8")
        try:
            new = render(old)
        except GraphRMAError as exc:  # a page without one of its blocks: name the page
            raise GraphRMAError(f"{name}: {exc}") from None
        if new != old:
            changed[path] = new
    if not check:
        for path, new in changed.items():
            path.write_text(new, encoding="utf-8")
    return [str(p.relative_to(REPO)) for p in changed]


def main(argv=None) -> int:
    one_line_errors()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check", action="store_true", help="write nothing; exit status 1 when a page differs")
    a = p.parse_args(argv)
    changed = render_all(check=a.check)
    for name in changed:
        print(f"{'differs' if a.check else 'wrote'}: {name}")
    if not changed:
        print("every page is what its results render to")
    return 1 if a.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
