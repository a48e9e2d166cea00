"""What ``graph-rma agenda`` and ``graph-rma webnlg`` share: their parsers and the ``train`` command under torchrun.

Nothing here imports torch or the tasks at the top: the parsers are built from :mod:`graph_rma.tasks.defaults` and,
option by option, from the fields of :class:`graph_rma.tasks.generator_config.GeneratorConfig`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Sequence

from ..tasks.defaults import METEOR_CHOICES, SCORER_HELP, SCORERS
from ..tasks.generator_config import DECODING_FIELDS, generator_fields, resolve_config
from ._common import (
    Parser,
    add_config_options,
    add_threads_option,
    check_trained_run,
    description,
    device,
    format_preset,
    nonnegative_int,
    out_dir,
    positive_int,
    require_out_dir,
    seed,
    variant_spec,
)


def generator_parser(
    name: str,
    label: str,
    doc: str,
    presets: Dict[str, Dict[str, Any]],
    unit: str,
    splits: Sequence[str],
    save_every: int,
    common_options: Optional[Callable] = None,
    preset_help: Optional[Dict[str, str]] = None,
    scorers: bool = False,
):
    """``graph-rma <name>``'s parser with ``train``, ``generate`` and ``evaluate``; returns ``(parser, subparsers,
    common)`` (``common``: the options every subcommand shares, for a further subcommand such as ``heads``).
    ``unit``: what one example is called in the help texts; ``common_options(common)`` adds dataset options;
    ``preset_help``: what each preset is for, shown before its values; ``scorers``: ``evaluate`` takes ``--scorer``
    (:data:`graph_rma.tasks.defaults.SCORERS`)."""
    p = Parser(prog=f"graph-rma {name}", description=description(doc))
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    common = _common_parser(name, label, common_options)

    def brief(cmd: str, what: str) -> str:  # a subcommand's --help: its options, not the parent's whole page again
        return f"graph-rma {name} {cmd}: {what}.\nExamples, run folders and resuming: graph-rma {name} --help"

    what = "train one variant into its run folder (resumes OUT/checkpoint.pt if present)"
    t = sub.add_parser("train", parents=[common], description=brief("train", what), help=what)
    _train_options(t, presets, preset_help or {}, unit, save_every)
    for cmd in ("generate", "evaluate"):
        what = (
            "decode a split with OUT/best.pt"
            if cmd == "generate"
            else "score a split (decoding it first if OUT has no hypotheses for it)"
        )
        g = sub.add_parser(cmd, parents=[common], description=brief(cmd, what), help=what)
        _decode_options(g, splits, unit)
        if cmd == "evaluate":
            g.add_argument(
                "--meteor",
                default="auto",
                choices=METEOR_CHOICES,
                help="METEOR implementation: auto (1.5 if java is found, else nltk), meteor-1.5, nltk, none",
            )
            g.add_argument("--regenerate", action="store_true", help="decode again even if OUT/hyp.SPLIT.txt exists")
            if scorers:
                g.add_argument("--scorer", default="coco", choices=SCORERS, help=SCORER_HELP)
    return p, sub, common


def _common_parser(name: str, label: str, common_options: Optional[Callable]) -> argparse.ArgumentParser:
    """The options every subcommand shares: the variant, the run folder, the data, progress, threads, device."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--variant",
        type=variant_spec,
        default="ma",
        metavar="SPEC",
        help="the variant, e.g. ma, svgd:alpha=0.1, spos:..., dropattn:p=0.1, reg:... (see "
        "graph_rma.variants); without --out it also names the run folder",
    )
    common.add_argument(
        "--out",
        type=out_dir,
        default=None,
        help=f"run folder (default: runs/{name}/<variant>, the spec made a folder name by graph_rma.engine.slug, "
        f"e.g. runs/{name}/ma-138224)",
    )
    common.add_argument("--root", default=None, help=f"{label} folder (default: $GRAPH_RMA_DATA/{name})")
    common.add_argument("--quiet", action="store_true", help="no progress bars")
    add_threads_option(common)
    common.add_argument(
        "--device", type=device, default=None, help="cpu, cuda or cuda:N (default: cuda when available)"
    )
    if common_options is not None:
        common_options(common)
    return common


def _train_options(
    t: argparse.ArgumentParser, presets: Dict[str, Dict[str, Any]], notes: Dict[str, str], unit: str, save_every: int
) -> None:
    """``train``'s options: the preset, the seed, the data limits, the checkpoint interval, one option per field of
    :class:`~graph_rma.tasks.generator_config.GeneratorConfig`, ``--evaluate``."""
    t.add_argument(
        "--preset",
        default="cpu",
        choices=sorted(presets),
        help="the training settings: "
        + "; ".join(format_preset(k, v) + (f" ({notes[k]})" if k in notes else "") for k, v in presets.items()),
    )
    t.add_argument("--seed", type=seed, default=0, help="seed of the weights, batch order and noise")
    t.add_argument(
        "--max-train", type=positive_int, default=None, help=f"use only the first N training {unit} (default: all)"
    )
    t.add_argument(
        "--max-dev",
        type=positive_int,
        default=None,
        help=f"use only the first N dev {unit} for the dev loss (default: all)",
    )
    t.add_argument(
        "--save-every",
        type=nonnegative_int,
        default=save_every,
        help="checkpoint every N optimizer steps (0: at the end of each epoch only)",
    )
    add_config_options(t, generator_fields(), "(default: the preset's)")  # one per field of GeneratorConfig
    t.add_argument("--evaluate", action="store_true", help="after training, decode and score the test split")


def _decode_options(g: argparse.ArgumentParser, splits: Sequence[str], unit: str) -> None:
    """What ``generate`` and ``evaluate`` share: the split, the model, the decoding settings (the fields of
    :data:`~graph_rma.tasks.generator_config.DECODING_FIELDS`), the batch size and the limit."""
    g.add_argument("--split", default="test", choices=list(splits), help="the split")
    g.add_argument("--checkpoint", type=Path, default=None, help="the model (default: OUT/best.pt)")
    decoding = [f for f in generator_fields() if f.name in DECODING_FIELDS]
    add_config_options(g, decoding, "(default: the run's)")  # --beam, --max-len, --length-penalty, ...
    g.add_argument("--batch-size", type=positive_int, default=32, help=f"{unit} decoded at once")
    g.add_argument("--limit", type=positive_int, default=None, help=f"only the first N {unit} (default: all)")


def use_threads(args: argparse.Namespace) -> None:
    """``torch.set_num_threads(args.threads)``: what every subcommand does first."""
    import torch

    torch.set_num_threads(args.threads)


def resolve_out(args: argparse.Namespace, name: str) -> Path:
    """``--out``, else ``runs/<name>/<variant>`` (:func:`graph_rma.tasks.graph_to_text.run_folder`)."""
    if args.out is None:
        from ..tasks.graph_to_text import run_folder

        args.out = require_out_dir(run_folder(Path("runs") / name, args.variant))  # a given --out: its type checked it
    return args.out


def rounded(obj: Any, digits: int = 2) -> Any:
    """``obj`` (a result dict) with every float rounded to ``digits`` decimals, for printing; the files keep every
    digit. Scores (0-100) are printed with 2 decimals, as ``graph-rma score`` prints them."""
    if isinstance(obj, float):
        return round(obj, digits)
    if isinstance(obj, dict):
        return {k: rounded(v, digits) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [rounded(v, digits) for v in obj]
    return obj


def trained_checkpoint(args: argparse.Namespace, name: str) -> Path:
    """The checkpoint ``generate``/``evaluate``/``heads`` read; a one-line error naming ``train`` when it is missing."""
    out = resolve_out(args, name)
    train = (
        f"graph-rma {name} train --out {out}"
        if args.variant == "ma"
        else f"graph-rma {name} train --variant {args.variant} --out {out}"
    )
    return check_trained_run(out, args.checkpoint, f"graph-rma {name}", train)


def preset_config(args: argparse.Namespace, presets: Dict[str, Dict[str, Any]]) -> Dict[str, Any]:
    """The chosen preset with every option given on the command line put over it, validated by
    :class:`~graph_rma.tasks.generator_config.GeneratorConfig` (a bad value: one line naming the setting); the
    trainer's mapping."""
    overrides = {f.name: getattr(args, f.name, None) for f in generator_fields() if f.metadata["option"]}
    return resolve_config(presets[args.preset], overrides)


def generation_kwargs(args: argparse.Namespace, progress: bool) -> Dict[str, Any]:
    """The decoding options of ``generate`` / ``evaluate`` as keyword arguments of the tasks' ``generate``."""
    return dict(
        checkpoint=args.checkpoint,
        **{name: getattr(args, name) for name in DECODING_FIELDS},  # GeneratorConfig's decoding fields
        batch_size=args.batch_size,
        limit=args.limit,
        progress=progress,
        device=args.device,
    )


def train_command(
    args: argparse.Namespace, run: Callable[[Any], Dict[str, Any]], evaluate_run: Callable[[Any], Dict[str, Any]]
) -> int:
    """``train`` (and ``--evaluate``) in one process, or under ``torchrun`` in each of its processes: the process
    group is set up from torchrun's variables, each rank gets its own device, rank 0 prints and evaluates. Stopped
    by Ctrl-C or SIGTERM (the trainer saves first, in one process): one line on stderr saying where it is saved, and
    exit status 130."""
    from ..engine.distributed import cleanup, init_from_env

    if args.evaluate:  # a missing text-metrics extra is said before training, not after it
        from ..metrics.generation import require_text_metrics

        require_text_metrics()
    info = init_from_env(device=args.device)
    device = str(info.device) if info.distributed else args.device
    try:
        summary = run(device)
        if info.rank == 0:
            print(
                json.dumps(
                    rounded({"out": str(args.out), **{k: summary[k] for k in ("variant", "best_dev_loss", "steps")}}, 4)
                )
            )
            if args.evaluate:
                print(json.dumps(rounded(evaluate_run(device))))
    except KeyboardInterrupt:
        if info.rank == 0:
            print(_stopped_note(Path(args.out)), file=sys.stderr)
        return 130
    finally:
        cleanup()
    return 0


def _stopped_note(out: Path) -> str:
    """The line a stopped ``train`` ends with: where its last save is, and that the same command continues."""
    saved = out / "checkpoint.pt"
    if saved.is_file():
        return f"interrupted: saved in {saved}; the same command continues from there"
    return f"interrupted before the first save ({saved}); the same command starts the run again"


__all__ = [
    "generation_kwargs",
    "generator_parser",
    "preset_config",
    "resolve_out",
    "rounded",
    "train_command",
    "trained_checkpoint",
    "use_threads",
]
