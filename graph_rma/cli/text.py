"""``graph-rma text``: sentence classification (TREC, MR, SST) with plain, regularised, repulsive and DropAttention
heads, on a small Transformer encoder and on Lin et al.'s self-attentive BiLSTM, same seeds for every variant.

Argument parsing only; the benchmark is :func:`graph_rma.tasks.text_classification.run_benchmark`. Outputs under
``--out``: ``results.json`` (every run and the summary), ``runs.csv``, ``summary.csv``, ``accuracy.png`` and, for
one sentence, per-head attention heatmaps (``heads_<dataset>_<model>.png`` / ``.html``).

The default (TREC, both models, six variants, two seeds, six epochs) is sized for a CPU run of about ten minutes
on two cores; ``--full`` adds MR and uses five seeds and 15 epochs.
"""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional

import torch

from ..data.root import DataNotFoundError
from ..models.text import MODELS
from ..tasks.text_classification import MODEL_VARIANTS, VARIANTS, format_table, run_benchmark


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="graph-rma text", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", default=None, help="comma list of trec, mr, sst2, sst1 (default: trec; --full: trec,mr)")
    p.add_argument("--models", default="transformer,selfattn", help=f"comma list of {', '.join(MODELS)}")
    p.add_argument("--variants", default=",".join(VARIANTS),
                   help="comma list of names (" + ", ".join(f"{k}={s}" for k, s in VARIANTS.items())
                        + "; Transformer: " + ", ".join(f"{k[1]}={s}" for k, s in MODEL_VARIANTS.items())
                        + ") or ';'-separated spec strings")
    p.add_argument("--seeds", type=int, default=None, help="number of seeds (default 2, --full 5)")
    p.add_argument("--epochs", type=int, default=None, help="epochs per run (default 6, --full 15)")
    p.add_argument("--full", action="store_true", help="five seeds and 15 epochs")
    p.add_argument("--root", default=None, help="folder holding TREC/, MR/, SST-2/ (default $GRAPH_RMA_DATA/text)")
    p.add_argument("--mr-fold", type=int, default=0, help="MR test fold (sentences i %% 10 == fold)")
    p.add_argument("--sentence", default=None, help="sentence for the attention heatmaps (default: a TREC question)")
    p.add_argument("--out", default="runs/text", help="output folder")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    torch.set_num_threads(max(1, args.threads))
    datasets = (args.datasets or ("trec,mr" if args.full else "trec")).split(",")
    variants = args.variants.split(";") if ";" in args.variants or ":" in args.variants else args.variants.split(",")
    command = "graph-rma text " + " ".join(argv if argv is not None else sys.argv[1:])
    try:
        result = run_benchmark(datasets, args.models.split(","), variants, args.seeds or (5 if args.full else 2),
                               args.out, epochs=args.epochs or (15 if args.full else 6), root=args.root,
                               mr_fold=args.mr_fold, sentence=args.sentence, command=command.strip(),
                               log=lambda line: print(line, flush=True))
    except DataNotFoundError as exc:
        print(f"graph-rma text: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"graph-rma text: {exc}", file=sys.stderr)
        return 2
    print("\n" + format_table(result["summary"]))
    print(f"\nwrote {args.out}/results.json, runs.csv, summary.csv, accuracy.png, heads_*.png/.html "
          f"({result['total_s']:.0f}s)")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
