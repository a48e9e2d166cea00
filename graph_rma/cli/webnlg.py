r"""``graph-rma webnlg train|generate|evaluate``: GraphWriter on WebNLG 2017 with plain or repulsive encoder heads.

::

    graph-rma webnlg train    --out runs/webnlg/ma   --variant ma              # CPU default
    graph-rma webnlg train    --out runs/webnlg/svgd --variant svgd:alpha=0.1
    graph-rma webnlg generate --out runs/webnlg/ma   --split test              # hypotheses + all references
    graph-rma webnlg evaluate --out runs/webnlg/ma   --split test              # multi-reference; all/seen/unseen
    graph-rma webnlg train    --preset full --out runs/webnlg/full             # GraphWriter's size; for a GPU

The work is done by :mod:`graph_rma.tasks.webnlg`; this module only parses the command line. Training is the shared
graph-to-text trainer (:func:`graph_rma.tasks.graph_to_text.train`, the same ``checkpoint.pt`` / ``best.pt``, progress
bars and exact resume) on :func:`graph_rma.data.webnlg.load_webnlg_splits`: one training example per (entry,
reference) pair, relations read from their words (open vocabulary), entities copied through ``<ent_i>``
placeholders. Evaluation scores every test entry against **all** its references (BLEU, METEOR, ROUGE of
:func:`graph_rma.metrics.evaluate_generation`, ``tokenize="nltk"``) and reports ``all``, ``seen`` and ``unseen``.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Optional, Sequence

from ..tasks import webnlg as task
from ._generator import add_generator_commands, generation_kwargs, generator_parser, preset_config, train_command


def _parser() -> argparse.ArgumentParser:
    p, sub, common = generator_parser("webnlg", "WebNLG", __doc__)
    add_generator_commands(sub, common, task.PRESETS, "entries", ["dev", "test", "train"], save_every=100)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parser().parse_args(argv)
    progress = not args.quiet
    if args.cmd == "train":
        config = preset_config(args, task.PRESETS)
        return train_command(
            args,
            lambda device: task.train(config, args.out, args.root, args.variant, args.seed, args.max_train,
                                      args.max_dev, args.save_every, progress=progress, device=device),
            lambda device: task.evaluate(args.out, "test", args.root, regenerate=True, progress=progress,
                                         device=device))
    kwargs = generation_kwargs(args, progress)
    if args.cmd == "generate":
        paths = task.generate(args.out, args.split, args.root, **kwargs)
        print(json.dumps({k: str(v) for k, v in paths.items()}))
        return 0
    regenerate = args.regenerate or args.limit is not None
    result = task.evaluate(args.out, args.split, args.root, regenerate=regenerate, meteor=args.meteor, **kwargs)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
