"""What ``graph-rma agenda`` and ``graph-rma webnlg`` share: their parsers and the ``train`` command under torchrun."""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Callable, Dict, Sequence

from ..engine.distributed import cleanup, init_from_env


def generator_parser(name: str, label: str, doc: str):
    """``graph-rma <name>``'s parser, its subcommand action and the options every subcommand shares."""
    p = argparse.ArgumentParser(prog=f"graph-rma {name}", description=doc.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--out", type=Path, default=Path(f"runs/{name}/ma"), help="run folder")
    common.add_argument("--root", default=None, help=f"{label} folder (default $GRAPH_RMA_DATA/{name})")
    common.add_argument("--quiet", action="store_true", help="no progress bars")
    common.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    return p, sub, common


def add_generator_commands(sub, common: argparse.ArgumentParser, presets: Dict[str, Dict[str, Any]], unit: str,
                           splits: Sequence[str], save_every: int) -> None:
    """The ``train``, ``generate`` and ``evaluate`` subcommands shared by ``graph-rma agenda`` and ``graph-rma webnlg``
    (``unit``: what one example is called in the help texts)."""
    t = sub.add_parser("train", parents=[common], help="train (resumes from OUT/checkpoint.pt if present)")
    t.add_argument("--preset", default="cpu", choices=sorted(presets))
    t.add_argument("--variant", default="ma",
                   help="ma, svgd:alpha=0.1, spos:..., dropattn:p=0.1, reg:... (see graph_rma.variants)")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--max-train", type=int, default=None, help=f"use only the first N training {unit}")
    t.add_argument("--max-dev", type=int, default=None, help=f"use only the first N dev {unit} for the dev loss")
    t.add_argument("--save-every", type=int, default=save_every, help="checkpoint every N optimizer steps (0: per epoch)")
    for key in ("hidden", "layers", "heads", "epochs", "batch_size", "min_freq", "max_target_len", "beam", "max_len"):
        t.add_argument("--" + key.replace("_", "-"), type=int, default=None)
    for key in ("lr", "dropout", "attention_dropout", "clip", "momentum", "length_penalty"):
        t.add_argument("--" + key.replace("_", "-"), type=float, default=None)
    t.add_argument("--optimizer", choices=["adam", "sgd"], default=None)
    t.add_argument("--evaluate", action="store_true", help="after training, decode and score the test split")
    for name in ("generate", "evaluate"):
        g = sub.add_parser(name, parents=[common], help=f"{name} a split with OUT/best.pt")
        g.add_argument("--split", default="test", choices=list(splits))
        g.add_argument("--checkpoint", type=Path, default=None)
        g.add_argument("--beam", type=int, default=None, help="beam size (1 = greedy); default from training config")
        g.add_argument("--max-len", type=int, default=None)
        g.add_argument("--length-penalty", type=float, default=None)
        g.add_argument("--batch-size", type=int, default=32)
        g.add_argument("--limit", type=int, default=None, help=f"only the first N {unit}")
        if name == "evaluate":
            g.add_argument("--meteor", default="auto", choices=["auto", "meteor-1.5", "nltk", "none"])
            g.add_argument("--regenerate", action="store_true", help="decode again even if OUT/hyp.SPLIT.txt exists")


def preset_config(args: argparse.Namespace, presets: Dict[str, Dict[str, Any]]) -> Dict[str, Any]:
    """The chosen preset with every option given on the command line put over it."""
    config = dict(presets[args.preset])
    for key in list(config):
        val = getattr(args, key, None)
        if val is not None:
            config[key] = val
    return config


def generation_kwargs(args: argparse.Namespace, progress: bool) -> Dict[str, Any]:
    """The decoding options of ``generate`` / ``evaluate`` as keyword arguments of the tasks' ``generate``."""
    return dict(checkpoint=args.checkpoint, beam=args.beam, max_len=args.max_len, length_penalty=args.length_penalty,
                batch_size=args.batch_size, limit=args.limit, progress=progress, device=args.device)


def train_command(args: argparse.Namespace, run: Callable[[Any], Dict[str, Any]],
                  evaluate_run: Callable[[Any], Dict[str, Any]]) -> int:
    """``train`` (and ``--evaluate``) in one process, or under ``torchrun`` in each of its processes: the process
    group is set up from torchrun's variables, each rank gets its own device, rank 0 prints and evaluates."""
    info = init_from_env(device=args.device)
    device = str(info.device) if info.distributed else args.device
    try:
        summary = run(device)
        if info.rank == 0:
            print(json.dumps({k: summary[k] for k in ("variant", "best_dev_loss", "steps")}))
            if args.evaluate:
                print(json.dumps(evaluate_run(device)))
    finally:
        cleanup()
    return 0
