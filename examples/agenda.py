"""GraphWriter on AGENDA with a plain and a repulsive (SVGD) graph-transformer encoder, in one run.

    GRAPH_RMA_DATA=/path/to/data OMP_NUM_THREADS=2 python examples/agenda.py            # CPU default
    python examples/agenda.py --small --out runs/agenda_small   # about a minute: a tiny model, 200 records, 40 decoded
    python examples/agenda.py --preset full --variants ma svgd:alpha=0.1 --out runs/agenda_full   # GPU size

Each variant trains into its own folder OUT/<variant> (resuming if interrupted), decodes the test split and prints
its scores. Under the offline protocol (no AGENDA train file) the scores are not comparable to published ones.
"""

import argparse
import json

import torch

import graph_rma.engine
from graph_rma.argtypes import add_threads_option, out_dir, positive_int, seed
from graph_rma.tasks.agenda import PRESETS, evaluate, load_agenda, train
from graph_rma.tasks.graph_to_text import run_folder
from graph_rma.variants import parse_variant

graph_rma.engine.one_line_errors()  # a mistake or missing data: one line, not a traceback

parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument("--root", default=None)
parser.add_argument("--out", type=out_dir, default="runs/agenda")  # a string: the default is checked too
parser.add_argument("--preset", default="cpu", choices=sorted(PRESETS))
parser.add_argument("--variants", nargs="+", default=["ma", "svgd:alpha=0.1"])
parser.add_argument("--seed", type=seed, default=0)
parser.add_argument("--epochs", type=positive_int, default=None, help="override the preset's number of epochs")
parser.add_argument("--meteor", default="auto", choices=["auto", "meteor-1.5", "nltk", "none"])
parser.add_argument(
    "--small",
    action="store_true",
    help="a first look in about a minute: width 32, one layer, one epoch on the first 200 training "
    "records, 40 test graphs decoded greedily (scores mean nothing at this size)",
)
add_threads_option(parser)  # torch CPU threads: the one default of every command and example
args = parser.parse_args()
torch.set_num_threads(args.threads)
for spec in args.variants:
    parse_variant(spec)  # a misspelt variant: one line now, not after the first variant has trained

config = dict(PRESETS[args.preset], **({"epochs": args.epochs} if args.epochs else {}))
limits = {}
if args.small:
    config.update(hidden=32, layers=1, heads=4, decoder_heads=4, epochs=args.epochs or 1, batch_size=16, beam=1)
    limits = {"max_train": 200, "max_dev": 40}
splits = load_agenda(args.root)
print(splits.description)
if args.small:  # the sizes this run uses, not the data's
    used = {
        k: min(n, len(getattr(splits, k)))
        for k, n in (("train", limits["max_train"]), ("dev", limits["max_dev"]), ("test", 40))
    }
    print(
        f"--small: training on the first {used['train']} of {len(splits.train)} training records, dev loss on the "
        f"first {used['dev']} of {len(splits.dev)}, scores on the first {used['test']} of {len(splits.test)} test "
        f"graphs"
    )
rows = []
for spec in args.variants:
    out = run_folder(args.out, spec)  # one folder per variant: svgd:alpha=0.1 and svgd:alpha=1 never share one
    summary = train(dict(config), out, variant=spec, seed=args.seed, splits=splits, save_every=50, **limits)
    scores = evaluate(
        out, "test", splits=splits, regenerate=True, meteor=args.meteor, **({"limit": 40} if args.small else {})
    )
    rows.append(
        {
            "variant": spec,
            "out": str(out),
            "dev_loss": round(summary["best_dev_loss"], 3),
            **{k: round(v, 2) for k, v in scores.items() if isinstance(v, float)},
            "METEOR_impl": scores.get("METEOR_impl"),
        }
    )
    print(json.dumps(rows[-1]))
keys = [k for k in rows[0] if k != "out"]
print(" | ".join(keys))
for r in rows:
    print(" | ".join(str(r.get(k, "")) for k in keys))
