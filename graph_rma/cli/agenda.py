r"""``graph-rma agenda train|generate|evaluate``: GraphWriter on AGENDA with plain or repulsive encoder heads.

::

    graph-rma agenda train    --out runs/agenda/ma   --variant ma             # CPU default (< 15 min on 2 cores)
    graph-rma agenda train    --out runs/agenda/svgd --variant svgd:alpha=0.1
    graph-rma agenda generate --out runs/agenda/ma   --split test --beam 4    # hyp/gold files side by side
    graph-rma agenda evaluate --out runs/agenda/ma   --split test             # generate if needed, then score
    graph-rma agenda heads    --out runs/agenda/svgd                          # how alike the encoder heads are
    graph-rma agenda train    --preset full --out runs/agenda/full            # GraphWriter's size; for a GPU

Training writes ``checkpoint.pt`` (everything needed to resume: weights, optimizer, sampler and RNG states, the
position in the epoch) atomically every ``--save-every`` steps and at the end of every epoch, and ``best.pt``
(weights with the lowest dev loss). Running ``train`` again with the same ``--out`` resumes from ``checkpoint.pt``
and ends with the same weights as an uninterrupted run with the same seed.

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

from ..tasks import agenda as task
from ._generator import add_generator_commands, generation_kwargs, generator_parser, preset_config, train_command


def _parser() -> argparse.ArgumentParser:
    p, sub, common = generator_parser("agenda", "AGENDA", __doc__)
    common.add_argument("--protocol", default="auto", choices=["auto", "official", "offline"])
    add_generator_commands(sub, common, task.PRESETS, "records", ["dev", "val", "test", "train"], save_every=50)
    h = sub.add_parser("heads", parents=[common], help="head diversity of OUT/best.pt (parameters and attention)")
    h.add_argument("--split", default="test", choices=["dev", "val", "test", "train"])
    h.add_argument("--limit", type=int, default=200, help="graphs used for the attention similarity")
    h.add_argument("--checkpoint", type=Path, default=None)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parser().parse_args(argv)
    progress = not args.quiet
    if args.cmd == "train":
        config = preset_config(args, task.PRESETS)
        return train_command(
            args,
            lambda device: task.train(config, args.out, args.root, args.protocol, args.variant, args.seed,
                                      args.max_train, args.max_dev, args.save_every, progress=progress, device=device),
            lambda device: task.evaluate(args.out, "test", args.root, args.protocol, regenerate=True,
                                         progress=progress, device=device))
    if args.cmd == "heads":
        print(json.dumps(task.head_diversity(args.out, args.split, args.root, args.protocol, args.limit,
                                             args.checkpoint, device=args.device)))
        return 0
    kwargs = generation_kwargs(args, progress)
    if args.cmd == "generate":
        paths = task.generate(args.out, args.split, args.root, args.protocol, **kwargs)
        print(json.dumps({k: str(v) for k, v in paths.items()}))
        return 0
    regenerate = args.regenerate or args.limit is not None
    result = task.evaluate(args.out, args.split, args.root, args.protocol, regenerate=regenerate, meteor=args.meteor,
                           **kwargs)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
