"""``graph-rma cora``: the Cora node-classification benchmark (GAT, with and without repulsive attention).

Argument parsing only; the study is :func:`graph_rma.tasks.node_classification.run_study`.

Examples::

    graph-rma cora                          # small default: 3 seeds of ma and svgd (about 2 minutes on 2 cores)
    graph-rma cora --full                   # 20 seeds of every variant
    graph-rma cora --variants ma "svgd:alpha=0.1" --seeds 5 --out runs/cora_try --resume
"""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from ..data.nodes import NODE_DATASETS
from ..data.root import DataNotFoundError
from ..engine import EarlyStopping
from ..tasks.node_classification import DEFAULT_SEEDS, DEFAULT_VARIANTS, FULL_SEEDS, FULL_VARIANTS, run_study


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="graph-rma cora", description=__doc__.split("\n\n")[0].strip("`r\" "),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--variants", nargs="+", default=None, metavar="SPEC",
                   help=f"variant specs (graph_rma.variants); default {' '.join(DEFAULT_VARIANTS)}")
    p.add_argument("--seeds", type=int, default=None, help=f"number of seeds (default {DEFAULT_SEEDS})")
    p.add_argument("--seed", type=int, default=0, help="first seed (seeds are seed, seed+1, ...)")
    p.add_argument("--full", action="store_true",
                   help=f"the full study: {FULL_SEEDS} seeds of every variant ({', '.join(FULL_VARIANTS)})")
    p.add_argument("--out", default="runs/cora", help="output folder (default runs/cora)")
    p.add_argument("--resume", action="store_true", help="skip runs already finished in --out")
    p.add_argument("--dataset", default="Cora", type=str.lower, choices=[n.lower() for n in NODE_DATASETS],
                   help="graph (default cora); the heterophilous ones have 10 fixed splits: seed s uses split s mod 10")
    p.add_argument("--root", default=None, help="data folder of the dataset's family (default $GRAPH_RMA_DATA/planetoid "
                   "for cora/citeseer, $GRAPH_RMA_DATA/pyg for the others)")
    p.add_argument("--epochs", type=int, default=1000)
    p.add_argument("--patience", type=int, default=100)
    p.add_argument("--early-stopping", default="val_acc", choices=EarlyStopping.RULES,
                   help="val_acc: patience on validation accuracy (default); gat: the GAT code's rule (accuracy or "
                        "loss resets the patience, keep the model when both improve)")
    p.add_argument("--lr", type=float, default=0.005)
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--hidden", type=int, default=8)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--out-heads", type=int, default=1)
    p.add_argument("--dropout", type=float, default=0.6, help="dropout on inputs and attention")
    p.add_argument("--v2", action="store_true", help="GATv2 attention")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    p.add_argument("--no-plot", action="store_true")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    variants = args.variants if args.variants is not None else (FULL_VARIANTS if args.full else DEFAULT_VARIANTS)
    n_seeds = args.seeds if args.seeds is not None else (FULL_SEEDS if args.full else DEFAULT_SEEDS)
    for name in ("seeds", "epochs", "patience", "threads"):
        value = n_seeds if name == "seeds" else getattr(args, name)
        if value < 1:
            print(f"graph-rma cora: --{name}: expected a positive integer, got {value}", file=sys.stderr)
            return 2
    try:
        result = run_study(variants, range(args.seed, args.seed + n_seeds), args.out, dataset=args.dataset,
                           root=args.root, resume=args.resume, epochs=args.epochs, patience=args.patience,
                           early_stopping=args.early_stopping, lr=args.lr, weight_decay=args.weight_decay,
                           hidden=args.hidden, heads=args.heads, out_heads=args.out_heads, dropout=args.dropout,
                           v2=args.v2, threads=args.threads, make_plot=not args.no_plot)
    except ValueError as exc:
        print(f"graph-rma cora: {exc}", file=sys.stderr)
        return 2
    except DataNotFoundError as exc:
        print(f"graph-rma cora: {exc}", file=sys.stderr)
        return 1
    if result["summary"]:
        print(result["table"])
        print("wrote " + ", ".join(str(p) for p in result["files"]))
    return 130 if result["interrupted"] else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
