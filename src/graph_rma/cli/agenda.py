r"""``graph-rma agenda train|generate|evaluate|heads``: GraphWriter on AGENDA with plain or repulsive encoder heads.

Examples::

    graph-rma agenda train                                  # CPU default (times: docs/agenda.md), runs/agenda/ma-*
    graph-rma agenda train    --variant svgd:alpha=0.1      # each variant into its own runs/agenda/<variant>
    graph-rma agenda generate --split test --beam 4         # runs/agenda/ma-*: hyp/gold files side by side
    graph-rma agenda evaluate --variant svgd:alpha=0.1      # generate if needed, then score
    graph-rma agenda heads    --variant svgd:alpha=0.1      # how alike the encoder heads are
    graph-rma agenda train    --preset full --out runs/agenda/full    # GraphWriter's size; for a GPU

Training writes ``checkpoint.pt`` (everything needed to resume: weights, optimizer, sampler and RNG states, the
position in the epoch) atomically every ``--save-every`` steps and at the end of every epoch, and ``best.pt``
(weights with the lowest dev loss). Running ``train`` again with the same ``--out`` resumes from ``checkpoint.pt``
and ends with the same weights as an uninterrupted run with the same seed; other settings than the run's are
refused (naming them), except more epochs and the decoding options, which are applied.

The work is done by :mod:`graph_rma.tasks.agenda` (and the shared trainer :mod:`graph_rma.tasks.graph_to_text`);
this module only turns the command line into those calls.

Multi-process training: ``torchrun --nproc_per_node N -m graph_rma.cli agenda train ...`` (gloo on CPU, nccl on GPU,
one GPU per process). ``--batch-size`` stays the *global* batch: each rank takes its shard of every batch, sums its
token NLL and divides by the global batch's token count (times ``1/N``), so DDP's all-reduced gradient is the
single-process gradient; the sampler then runs on identical gradients with identical noise on every rank. Rank 0
alone writes files and shows progress; the checkpoint keeps every rank's RNG state, so resuming with the same ``N``
is exact. Training ends by checking that the replicas are bitwise equal (``replica_sha1`` in ``train.json``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Optional, Sequence

from ..tasks.defaults import AGENDA_PRESETS, AGENDA_SPLITS
from ._common import positive_int, run_command
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

NAME = "agenda"


def _protocol(common: argparse.ArgumentParser) -> None:
    common.add_argument(
        "--protocol",
        default="auto",
        choices=["auto", "official", "offline"],
        help="official: the published train/val/test files; offline (without the train file): train on "
        "fake.train.tsv plus 800 val records, select on the other 200, test on test (not "
        "comparable to published scores); auto: official when the train file exists",
    )


def _parser():
    p, sub, common = generator_parser(
        NAME, "AGENDA", __doc__, AGENDA_PRESETS, "records", AGENDA_SPLITS, save_every=50, common_options=_protocol
    )
    h = sub.add_parser("heads", parents=[common], help="head diversity of OUT/best.pt (parameters and attention)")
    h.add_argument("--split", default="test", choices=list(AGENDA_SPLITS), help="the split")
    h.add_argument("--limit", type=positive_int, default=200, help="graphs used for the attention similarity")
    h.add_argument("--checkpoint", type=Path, default=None, help="the model (default: OUT/best.pt)")
    return p


def _run(args: argparse.Namespace) -> int:
    progress = not args.quiet
    use_threads(args)
    if args.cmd == "train":
        out = resolve_out(args, NAME)
        config = preset_config(args, AGENDA_PRESETS)
        from ..tasks import agenda as task

        return train_command(
            args,
            lambda device: task.train(
                config,
                out,
                args.root,
                args.protocol,
                args.variant,
                args.seed,
                args.max_train,
                args.max_dev,
                args.save_every,
                progress=progress,
                device=device,
            ),
            lambda device: task.evaluate(
                out, "test", args.root, args.protocol, regenerate=True, progress=progress, device=device
            ),
        )
    trained_checkpoint(args, NAME)  # before any data is read
    from ..tasks import agenda as task

    if args.cmd == "heads":
        print(
            json.dumps(
                task.head_diversity(
                    args.out, args.split, args.root, args.protocol, args.limit, args.checkpoint, device=args.device
                )
            )
        )
        return 0
    kwargs = generation_kwargs(args, progress)
    if args.cmd == "generate":
        paths = task.generate(args.out, args.split, args.root, args.protocol, **kwargs)
        print(json.dumps({k: str(v) for k, v in paths.items()}))
        return 0
    regenerate = args.regenerate  # --limit reuses outputs decoded from the same checkpoint with the same settings
    result = task.evaluate(
        args.out, args.split, args.root, args.protocol, regenerate=regenerate, meteor=args.meteor, **kwargs
    )
    print(json.dumps(rounded(result), indent=2))  # OUT/metrics.SPLIT.json keeps every digit
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    return run_command(f"graph-rma {NAME}", lambda: _run(_parser().parse_args(argv)))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
