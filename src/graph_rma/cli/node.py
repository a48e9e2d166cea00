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
from ..tasks.protocols import PROTOCOLS, default_protocol, protocol_fields
from ._common import (
    Parser,
    UsageError,
    add_config_options,
    add_seeds,
    add_threads_option,
    description,
    device,
    out_dir,
    require_out_dir,
    run_command,
    variant_spec,
)

PROG = "graph-rma node"


def _dataset(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a graph name, got an empty string")
    return text.strip()


def add_protocol_options(group: argparse._ActionsContainer) -> None:
    """One option per field of :class:`~graph_rma.tasks.protocols.Protocol` (:func:`protocol_fields`), generated
    from its metadata (:func:`~graph_rma.cli._common.add_config_options`): ``--<name with dashes>`` with the field's
    help, its choices or the argument type of its kind; a bool field is the pair ``--x`` / ``--no-x``. Every default
    is ``None``: the protocol's value."""
    add_config_options(group, protocol_fields())


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
        help="reuse the runs in --out whose settings match these exactly (others are trained again) and continue a "
        "run cut short from its last save",
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
    add_protocol_options(g)
    for action in g._group_actions:
        if action.dest != "protocol" and "default:" not in (action.help or ""):
            action.help += " (default: the protocol's)"
    add_threads_option(p)
    p.add_argument(
        "--device", type=device, default=None, help="cpu, cuda or cuda:N (default: cuda when available, else cpu)"
    )
    p.add_argument("--no-plot", action="store_true", help="no accuracy.png")
    return p


def run(args: argparse.Namespace) -> int:
    """Argument parsing only; the study is graph_rma.tasks.node_classification.run_study."""
    if args.seed is not None:
        raise UsageError("--seed was removed: give the seeds themselves, e.g. --seeds 0 1 2 or --seeds 0-9")
    from ..data.nodes import canonical_name
    from ..tasks.node_classification import run_study
    from ..tasks.protocols import protocol_note, resolve_protocol

    dataset = args.dataset.lower()
    variants = args.variants if args.variants is not None else node_default_variants(dataset, args.full)
    seeds = args.seeds if args.seeds is not None else range(NODE_FULL_SEEDS if args.full else NODE_DEFAULT_SEEDS)
    out = args.out if args.out is not None else require_out_dir(f"runs/{dataset}")  # before any data is read
    # the preset (the graph's own without --protocol) with its per-graph settings and the options given over it
    overrides = {f.name: getattr(args, f.name) for f in protocol_fields()}
    graph = canonical_name(args.dataset, args.root)
    protocol = resolve_protocol(args.protocol, graph, overrides)
    note = protocol_note(args.protocol, graph)  # a preset tuned per graph, without settings for this one
    if note is not None:
        print(note, file=sys.stderr)
    result = run_study(
        protocol,
        variants,
        seeds,
        out,
        resume=args.resume,
        device=args.device,
        dataset=args.dataset,
        root=args.root,
        threads=args.threads,
        make_plot=not args.no_plot,
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
