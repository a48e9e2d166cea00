"""``graph-rma node``: node classification on any graph (plain and repulsive heads, under a published protocol).

Each graph has a default protocol, the strong baseline that reproduces a published GAT number on it (Cora,
CiteSeer: gat; the Geom-GCN graphs: ggcn; Platonov et al.'s graphs: platonov-small); --protocol picks another and
the options below override single fields of it. docs/baselines.md has the reproduction table.

Examples::

    graph-rma node --dataset chameleon                  # plain vs SVGD, GGCN protocol, seeds 0-2
    graph-rma node --dataset minesweeper --variants ma --seeds 0-9   # ROC AUC, platonov-small protocol
    graph-rma node --dataset chameleon --protocol gat --v2 --out runs/cham_gat --resume
    graph-rma node --dataset roman_empire               # any graph at $GRAPH_RMA_DATA/pyg/heterophilous_graph/
"""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from ..tasks.defaults import (
    NODE_DATASET_NAMES,
    NODE_DATASET_SVGD,
    NODE_DEFAULT_SEEDS,
    NODE_DEFAULT_VARIANTS,
    NODE_FULL_SEEDS,
    NODE_FULL_VARIANTS,
    node_default_variants,
)
from ..tasks.protocols import EDGES, FEATURES, METRIC_OPTIONS, MODELS, PROTOCOLS, STOPPING, default_protocol
from ._common import (
    Parser,
    UsageError,
    add_seeds,
    description,
    device,
    nonnegative_float,
    out_dir,
    positive_float,
    positive_int,
    probability,
    require_out_dir,
    run_command,
    variant_spec,
)

PROG = "graph-rma node"


def _dataset(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a graph name, got an empty string")
    return text.strip()


def build_parser(prog: str = PROG, doc: Optional[str] = None, default_dataset: Optional[str] = None) -> Parser:
    p = Parser(prog=prog, description=description(doc or __doc__))
    p.add_argument(
        "--variants",
        nargs="+",
        type=variant_spec,
        default=None,
        metavar="SPEC",
        help=f"variant specs (see graph_rma.variants) (default: {' '.join(NODE_DEFAULT_VARIANTS)}; "
        f"--full: {' '.join(NODE_FULL_VARIANTS)}; a graph's own validated SVGD replaces SVGD's spec: "
        + ", ".join(f"{d}: {v}" for d, v in NODE_DATASET_SVGD.items())
        + ")",
    )
    add_seeds(p, f"0-{NODE_DEFAULT_SEEDS - 1}; --full: 0-{NODE_FULL_SEEDS - 1}")
    p.add_argument("--seed", type=int, default=None, help=argparse.SUPPRESS)  # removed; see _run
    p.add_argument("--full", action="store_true", help="the full study: every variant above on 20 seeds")
    p.add_argument("--out", type=out_dir, default=None, help="output folder (default: runs/<dataset>)")
    p.add_argument(
        "--resume",
        action="store_true",
        help="reuse the runs in --out whose settings match these exactly (others are trained again)",
    )
    p.add_argument(
        "--dataset",
        type=_dataset,
        default=default_dataset,
        required=default_dataset is None,
        help="graph: " + ", ".join(NODE_DATASET_NAMES) + ", or any graph in Platonov et al.'s format at "
        "<root>/heterophilous_graph/<name>/raw/<name>.npz; the heterophilous ones have 10 fixed "
        "splits: seed s uses split s mod 10",
    )
    p.add_argument(
        "--root",
        default=None,
        help="data folder of the dataset's family (default: "
        "$GRAPH_RMA_DATA/planetoid for cora/citeseer, $GRAPH_RMA_DATA/pyg for the others)",
    )
    g = p.add_argument_group(
        "protocol", "a named preset; each option below overrides one field of it (default: the preset's value)"
    )
    g.add_argument(
        "--protocol",
        type=str.lower,
        choices=list(PROTOCOLS),
        default=None,
        help="default: the graph's own ("
        + ", ".join(f"{d}: {default_protocol(d)}" for d in ("cora", "chameleon", "minesweeper"))
        + "). "
        + " ".join(f"{name}: {proto.reproduces}." for name, proto in PROTOCOLS.items()),
    )
    g.add_argument(
        "--features",
        choices=FEATURES,
        default=None,
        help="feature normalisation: none or row (each row divided by its sum)",
    )
    g.add_argument(
        "--edges",
        choices=EDGES,
        default=None,
        help="which neighbours a node attends over: as-stored "
        "(its in-links, PyG's convention), reversed (its out-links), undirected (both)",
    )
    loops = g.add_mutually_exclusive_group()
    loops.add_argument(
        "--self-loops",
        dest="self_loops",
        action="store_const",
        const=True,
        default=None,
        help="attention layers add self-loops",
    )
    loops.add_argument(
        "--no-self-loops",
        dest="self_loops",
        action="store_const",
        const=False,
        help="attention layers add no self-loops",
    )
    g.add_argument(
        "--model",
        choices=MODELS,
        default=None,
        help="gat: the 2-layer GAT; residual: Platonov et al.'s "
        "residual blocks (LayerNorm, attention, feed-forward net)",
    )
    g.add_argument("--layers", type=positive_int, default=None, help="residual blocks (model residual)")
    g.add_argument(
        "--hidden",
        type=positive_int,
        default=None,
        help="units per head (gat) or the residual stream's width, all heads together (residual)",
    )
    g.add_argument("--heads", type=positive_int, default=None, help="attention heads (gat: first layer)")
    g.add_argument("--out-heads", type=positive_int, default=None, help="heads of the GAT's output layer")
    g.add_argument("--dropout", type=probability, default=None, help="dropout on features")
    g.add_argument("--attn-dropout", type=probability, default=None, help="dropout on the attention coefficients")
    g.add_argument("--v2", action="store_const", const=True, default=None, help="GATv2 attention")
    g.add_argument(
        "--lean",
        action="store_const",
        const=True,
        default=None,
        help="the memory-lean attention path (same results to float rounding; far less memory per edge, "
        "faster on CPU for large graphs)",
    )
    g.add_argument("--lr", type=positive_float, default=None, help="Adam's learning rate")
    g.add_argument("--weight-decay", type=nonnegative_float, default=None, help="Adam's weight decay")
    g.add_argument("--epochs", type=positive_int, default=None, help="most epochs (full-batch steps) per run")
    g.add_argument("--patience", type=positive_int, default=None, help="epochs without improvement before stopping")
    g.add_argument(
        "--early-stopping",
        choices=STOPPING,
        default=None,
        help="val_metric: the best validation metric (accuracy or ROC AUC); val_loss: the lowest "
        "validation loss; gat: the GAT code's rule (accuracy or loss resets the patience)",
    )
    g.add_argument(
        "--metric", choices=METRIC_OPTIONS, default=None, help="auto: ROC AUC for a binary task, accuracy otherwise"
    )
    for action in g._group_actions:
        if action.dest != "protocol" and "default:" not in (action.help or ""):
            action.help += " (default: the protocol's)"
    p.add_argument("--threads", type=positive_int, default=1, help="torch CPU threads")
    p.add_argument(
        "--device", type=device, default=None, help="cpu, cuda or cuda:N (default: cuda when available, else cpu)"
    )
    p.add_argument("--no-plot", action="store_true", help="no accuracy.png")
    return p


def run(args: argparse.Namespace) -> int:
    """Argument parsing only; the study is graph_rma.tasks.node_classification.run_study."""
    if args.seed is not None:
        raise UsageError("--seed was removed: give the seeds themselves, e.g. --seeds 0 1 2 or --seeds 0-9")
    from ..tasks.node_classification import run_study

    dataset = args.dataset.lower()
    variants = args.variants if args.variants is not None else node_default_variants(dataset, args.full)
    seeds = args.seeds if args.seeds is not None else range(NODE_FULL_SEEDS if args.full else NODE_DEFAULT_SEEDS)
    out = args.out if args.out is not None else require_out_dir(f"runs/{dataset}")  # before any data is read
    result = run_study(
        variants,
        seeds,
        out,
        dataset=args.dataset,
        protocol=args.protocol,
        root=args.root,
        resume=args.resume,
        epochs=args.epochs,
        patience=args.patience,
        early_stopping=args.early_stopping,
        lr=args.lr,
        weight_decay=args.weight_decay,
        hidden=args.hidden,
        heads=args.heads,
        out_heads=args.out_heads,
        layers=args.layers,
        dropout=args.dropout,
        attn_dropout=args.attn_dropout,
        v2=args.v2,
        features=args.features,
        edges=args.edges,
        self_loops=args.self_loops,
        model=args.model,
        metric=args.metric,
        lean=args.lean,
        threads=args.threads,
        make_plot=not args.no_plot,
        device=args.device,
    )
    if result["summary"]:
        c = result["config"]
        print(
            f"{c['dataset']}, protocol {c['protocol']} ({c['model']}, metric {c['metric']}, early stopping "
            f"{c['stop_on']})"
        )
        print(result["table"])
        print("wrote " + ", ".join(str(p) for p in result["files"]))
    return 130 if result["interrupted"] else 0


def main(argv: Optional[List[str]] = None) -> int:
    return run_command(PROG, lambda: run(build_parser().parse_args(argv)))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
