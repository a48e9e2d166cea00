"""``graph-rma cora``: node classification with GAT, plain and repulsive heads, over variants and seeds.

Examples::

    graph-rma cora                          # small default: seeds 0-2 of ma and svgd (about 2 minutes on 2 cores)
    graph-rma cora --full                   # seeds 0-19 of every variant
    graph-rma cora --variants ma "svgd:alpha=0.1" --seeds 0-4 --out runs/cora_try --resume
"""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from ..tasks.defaults import (EARLY_STOPPING_RULES, NODE_DATASET_NAMES, NODE_DATASET_SVGD, NODE_DEFAULT_SEEDS,
                              NODE_DEFAULT_VARIANTS, NODE_FULL_SEEDS, NODE_FULL_VARIANTS, node_default_variants)
from ._common import (Parser, UsageError, add_seeds, description, nonnegative_float, out_dir, positive_float, positive_int,
                      probability, run_command, variant_spec)

PROG = "graph-rma cora"


def build_parser() -> Parser:
    p = Parser(prog=PROG, description=description(__doc__))
    p.add_argument("--variants", nargs="+", type=variant_spec, default=None, metavar="SPEC",
                   help=f"variant specs (see graph_rma.variants) (default: {' '.join(NODE_DEFAULT_VARIANTS)}; "
                        f"--full: {' '.join(NODE_FULL_VARIANTS)}; a graph's own validated SVGD replaces SVGD's spec: "
                        + ", ".join(f"{d}: {v}" for d, v in NODE_DATASET_SVGD.items()) + ")")
    add_seeds(p, f"0-{NODE_DEFAULT_SEEDS - 1}; --full: 0-{NODE_FULL_SEEDS - 1}")
    p.add_argument("--seed", type=int, default=None, help=argparse.SUPPRESS)  # removed; see _run
    p.add_argument("--full", action="store_true", help="the full study: every variant above on 20 seeds")
    p.add_argument("--out", type=out_dir, default="runs/cora", help="output folder")
    p.add_argument("--resume", action="store_true",
                   help="reuse the runs in --out whose settings match these exactly (others are trained again)")
    p.add_argument("--dataset", default="cora", type=str.lower, choices=[n.lower() for n in NODE_DATASET_NAMES],
                   help="graph; the heterophilous ones have 10 fixed splits: seed s uses split s mod 10")
    p.add_argument("--root", default=None, help="data folder of the dataset's family (default: "
                   "$GRAPH_RMA_DATA/planetoid for cora/citeseer, $GRAPH_RMA_DATA/pyg for the others)")
    p.add_argument("--epochs", type=positive_int, default=1000, help="most epochs per run")
    p.add_argument("--patience", type=positive_int, default=100, help="epochs without improvement before stopping")
    p.add_argument("--early-stopping", default="val_acc", choices=EARLY_STOPPING_RULES,
                   help="val_acc: patience on validation accuracy; gat: the GAT code's rule (accuracy or loss "
                        "resets the patience, keep the model when both improve)")
    p.add_argument("--lr", type=positive_float, default=0.005, help="Adam's learning rate")
    p.add_argument("--weight-decay", type=nonnegative_float, default=5e-4, help="Adam's weight decay")
    p.add_argument("--hidden", type=positive_int, default=8, help="hidden units per head")
    p.add_argument("--heads", type=positive_int, default=8, help="heads of the first layer")
    p.add_argument("--out-heads", type=positive_int, default=1, help="heads of the output layer")
    p.add_argument("--dropout", type=probability, default=0.6, help="dropout on inputs and attention")
    p.add_argument("--v2", action="store_true", help="GATv2 attention")
    p.add_argument("--threads", type=positive_int, default=1, help="torch CPU threads")
    p.add_argument("--no-plot", action="store_true", help="no accuracy.png")
    return p


def _run(args: argparse.Namespace) -> int:
    """Argument parsing only; the study is graph_rma.tasks.node_classification.run_study."""
    if args.seed is not None:
        raise UsageError("--seed was removed: give the seeds themselves, e.g. --seeds 0 1 2 or --seeds 0-9")
    from ..tasks.node_classification import run_study

    variants = args.variants if args.variants is not None else node_default_variants(args.dataset, args.full)
    seeds = args.seeds if args.seeds is not None else range(NODE_FULL_SEEDS if args.full else NODE_DEFAULT_SEEDS)
    result = run_study(variants, seeds, args.out, dataset=args.dataset, root=args.root, resume=args.resume,
                       epochs=args.epochs, patience=args.patience, early_stopping=args.early_stopping, lr=args.lr,
                       weight_decay=args.weight_decay, hidden=args.hidden, heads=args.heads,
                       out_heads=args.out_heads, dropout=args.dropout, v2=args.v2, threads=args.threads,
                       make_plot=not args.no_plot)
    if result["summary"]:
        print(result["table"])
        print("wrote " + ", ".join(str(p) for p in result["files"]))
    return 130 if result["interrupted"] else 0


def main(argv: Optional[List[str]] = None) -> int:
    return run_command(PROG, lambda: _run(build_parser().parse_args(argv)))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
