"""``graph-rma text``: sentence classification (TREC, MR, SST) with plain and repulsive heads, over variants and seeds.

Two models (a small Transformer encoder and Lin et al.'s self-attentive BiLSTM), every variant on the same seeds.
Outputs under --out: results.json (every run and the summary), runs.csv, summary.csv, accuracy.png and, for one
sentence, per-head attention heatmaps (heads_<dataset>_<model>.png / .html).

The default (TREC, both models, six variants, seeds 0-1, six epochs) is sized for a CPU run of about ten minutes
on two cores; --full adds MR and uses seeds 0-4 and 15 epochs.

Examples::

    graph-rma text
    graph-rma text --datasets trec mr --models transformer --variants ma svgd "svgd:alpha=0.5,eps=1" --seeds 0-4
"""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from ..tasks.defaults import TEXT_DATASETS, TEXT_DEFAULT, TEXT_FULL, TEXT_MODEL_VARIANTS, TEXT_MODELS, TEXT_VARIANTS
from ._common import (
    Parser,
    add_seeds,
    add_threads_option,
    description,
    device,
    nonnegative_int,
    out_dir,
    positive_int,
    run_command,
    variant_spec,
)

PROG = "graph-rma text"


def build_parser() -> Parser:
    p = Parser(prog=PROG, description=description(__doc__))
    p.add_argument(
        "--datasets",
        nargs="+",
        default=None,
        metavar="NAME",
        help=f"datasets among {', '.join(TEXT_DATASETS)} (default: {' '.join(TEXT_DEFAULT['datasets'])}; "
        f"--full: {' '.join(TEXT_FULL['datasets'])})",
    )
    p.add_argument(
        "--models", nargs="+", default=list(TEXT_MODELS), metavar="NAME", help=f"models among {', '.join(TEXT_MODELS)}"
    )
    p.add_argument(
        "--variants",
        nargs="+",
        default=list(TEXT_VARIANTS),
        metavar="NAME|SPEC",
        help="named variants ("
        + ", ".join(f"{k}={s}" for k, s in TEXT_VARIANTS.items())
        + "; on the Transformer "
        + ", ".join(f"{k[1]}={s}" for k, s in TEXT_MODEL_VARIANTS.items())
        + ") or variant specs (see graph_rma.variants)",
    )
    add_seeds(p, f"0-{TEXT_DEFAULT['seeds'] - 1}; --full: 0-{TEXT_FULL['seeds'] - 1}")
    p.add_argument(
        "--epochs",
        type=positive_int,
        default=None,
        help=f"epochs per run (default: {TEXT_DEFAULT['epochs']}; --full: {TEXT_FULL['epochs']})",
    )
    p.add_argument("--full", action="store_true", help="the full benchmark (see --datasets, --seeds, --epochs)")
    p.add_argument("--root", default=None, help="folder holding TREC/, MR/, SST-2/ (default: $GRAPH_RMA_DATA/text)")
    p.add_argument("--mr-fold", type=nonnegative_int, default=0, help="MR's test fold: sentences i %% 10 == fold")
    p.add_argument(
        "--sentence",
        default=None,
        help="sentence of the attention heatmaps (default: a TREC question on TREC, else the first test sentence)",
    )
    p.add_argument(
        "--heads",
        type=positive_int,
        default=None,
        help="attention heads of every model (the self-attentive model's r; the Transformer's heads must "
        "divide its width 64); default: each model's own (4)",
    )
    p.add_argument("--out", type=out_dir, default="runs/text", help="output folder")
    add_threads_option(p)
    p.add_argument(
        "--device", type=device, default=None, help="cpu, cuda or cuda:N (default: cuda when available, else cpu)"
    )
    return p


def _variants(parser: Parser, values: List[str]) -> List[str]:
    """Names of :data:`TEXT_VARIANTS` or spec strings, one per word; a parser error names a bad one."""
    words = list(values)
    for w in words:
        if w not in TEXT_VARIANTS:
            try:
                variant_spec(w)
            except argparse.ArgumentTypeError as exc:
                parser.error(f"argument --variants: {exc}")
    return words


def _run(args: argparse.Namespace) -> int:
    """Argument parsing only; the benchmark is graph_rma.tasks.text_classification.run_benchmark."""
    import torch

    from ..tasks.text_classification import format_table, run_benchmark

    torch.set_num_threads(args.threads)
    preset = TEXT_FULL if args.full else TEXT_DEFAULT
    command = "graph-rma text " + " ".join(args.argv)
    result = run_benchmark(
        args.datasets or preset["datasets"],
        args.models,
        args.variants,
        args.seeds if args.seeds is not None else preset["seeds"],
        args.out,
        epochs=args.epochs or preset["epochs"],
        root=args.root,
        mr_fold=args.mr_fold,
        sentence=args.sentence,
        command=command.strip(),
        log=lambda line: print(line, flush=True),
        model_kwargs={m: {"heads": args.heads} for m in args.models} if args.heads else None,
        device=args.device,
    )
    print("\n" + format_table(result["summary"]))
    print(f"\nwrote {', '.join(str(f) for f in result['files'])} ({result['total_s']:.0f}s)")
    return 0


def _parse(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(argv if argv is not None else sys.argv[1:])
    if args.datasets is not None:
        for d in args.datasets:
            if d.lower().replace("-", "") not in TEXT_DATASETS:
                parser.error(f"argument --datasets: unknown dataset {d!r}; choose from {', '.join(TEXT_DATASETS)}")
    for m in args.models:
        if m not in TEXT_MODELS:
            parser.error(f"argument --models: unknown model {m!r}; choose from {', '.join(TEXT_MODELS)}")
    args.variants = _variants(parser, args.variants)
    return args


def main(argv: Optional[List[str]] = None) -> int:
    return run_command(PROG, lambda: _run(_parse(argv)))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
