"""``graph-rma cora``: node classification with GAT, plain and repulsive heads, over variants and seeds.

The main job's short form of ``graph-rma node`` with ``--dataset cora`` as default (every option of ``graph-rma
node`` works here too; Cora's protocol is the GAT paper's).

Examples::

    graph-rma cora                          # small default: seeds 0-2 of ma and svgd
    graph-rma cora --full                   # seeds 0-19 of every variant
    graph-rma cora --variants ma "svgd:alpha=0.1" --seeds 0-4 --out runs/cora_try --resume
"""

from __future__ import annotations

import sys
from typing import List, Optional

from ._common import run_command
from .node import build_parser as _node_parser
from .node import run

PROG = "graph-rma cora"


def build_parser():
    return _node_parser(PROG, __doc__, default_dataset="cora")


def main(argv: Optional[List[str]] = None) -> int:
    return run_command(PROG, lambda: run(build_parser().parse_args(argv)))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
