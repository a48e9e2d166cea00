r"""``graph-rma webnlg train|generate|evaluate``: GraphWriter on WebNLG 2017 with plain or repulsive encoder heads.

Examples::

    graph-rma webnlg train                                  # CPU default, into runs/webnlg/ma-*
    graph-rma webnlg train    --variant svgd:alpha=0.1      # each variant into its own runs/webnlg/<variant>
    graph-rma webnlg generate --split test                  # hypotheses + all references
    graph-rma webnlg evaluate --variant svgd:alpha=0.1      # multi-reference; all/seen/unseen
    graph-rma webnlg evaluate --scorer webnlg2017            # the challenge's BLEU, METEOR and TER
    graph-rma webnlg train    --preset full --out runs/webnlg/full    # GraphWriter's size; for a GPU
    graph-rma webnlg train    --preset webnlg2017 --out runs/webnlg2017/ma-s0   # aimed at the challenge baseline

The work is done by :mod:`graph_rma.tasks.webnlg`; this module only parses the command line. Training is the shared
graph-to-text trainer (:func:`graph_rma.tasks.graph_to_text.train`, the same ``checkpoint.pt`` / ``best.pt``, progress
bars, exact resume and refusal of other settings) on :func:`graph_rma.data.webnlg.load_webnlg_splits`: one training
example per (entry, reference) pair, relations read from their words (open vocabulary), entities copied through
``<ent_i>`` placeholders. Evaluation reports ``all``, ``seen`` and ``unseen``; ``--scorer coco`` (default) scores
every test entry against **all** its references (BLEU, METEOR, ROUGE of :func:`graph_rma.metrics.evaluate_generation`,
``tokenize="nltk"``) into ``OUT/metrics.SPLIT.json``, ``--scorer webnlg2017`` as the challenge did
(:func:`graph_rma.metrics.score_webnlg2017`) into ``OUT/metrics.SPLIT.webnlg2017.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Optional, Sequence

from ..tasks.defaults import WEBNLG_PRESET_HELP, WEBNLG_PRESETS, WEBNLG_SPLITS
from ._common import run_command
from ._generator import (
    generation_kwargs,
    generator_parser,
    preset_config,
    resolve_out,
    rounded,
    train_command,
    trained_checkpoint,
    use_threads,
)

NAME = "webnlg"


def _parser():
    p, _, _ = generator_parser(
        NAME,
        "WebNLG",
        __doc__,
        WEBNLG_PRESETS,
        "entries",
        WEBNLG_SPLITS,
        save_every=100,
        preset_help=WEBNLG_PRESET_HELP,
        scorers=True,
    )
    return p


def _run(args: argparse.Namespace) -> int:
    progress = not args.quiet
    use_threads(args)
    if args.cmd == "train":
        out = resolve_out(args, NAME)
        config = preset_config(args, WEBNLG_PRESETS)
        from ..tasks import webnlg as task

        return train_command(
            args,
            lambda device: task.train(
                config,
                out,
                args.root,
                args.variant,
                args.seed,
                args.max_train,
                args.max_dev,
                args.save_every,
                progress=progress,
                device=device,
            ),
            lambda device: task.evaluate(out, "test", args.root, regenerate=True, progress=progress, device=device),
        )
    trained_checkpoint(args, NAME)  # before any data is read
    from ..tasks import webnlg as task

    kwargs = generation_kwargs(args, progress)
    try:
        if args.cmd == "generate":
            paths = task.generate(args.out, args.split, args.root, **kwargs)
            print(json.dumps({k: str(v) for k, v in paths.items()}))
            return 0
        regenerate = args.regenerate or args.limit is not None
        result = task.evaluate(
            args.out, args.split, args.root, regenerate=regenerate, meteor=args.meteor, scorer=args.scorer, **kwargs
        )
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM while decoding or scoring: nothing half-written, one line
        print(
            f"graph-rma {NAME}: interrupted: {args.out} keeps the outputs of the last {args.cmd} that finished (a "
            f"decode and its metrics are written together, at the end); the same command starts it again",
            file=sys.stderr,
        )
        return 130
    print(json.dumps(rounded(result), indent=2))  # the metrics file in OUT keeps every digit
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run_command(f"graph-rma {NAME}", lambda: _run(_parser().parse_args(argv)))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
