"""``graph-rma score``: score a file of generated texts against one or more reference files.

File formats (UTF-8, one example per line, line i of every file belongs to example i):

* ``--hyp FILE``: one generated text per line.
* ``--ref FILE [--ref FILE2 ...]``: one reference per line and file; several files give several references per
  example (multi-reference, as for WebNLG). An empty line means "no reference from this file for this example" and is
  skipped; every example needs at least one non-empty reference.
* ``--entities FILE``: optional, the input graph's entities per line separated by ``--entity-sep`` (see below), for
  ``entity_coverage``.

Prints the metrics (0-100) and, with ``--json OUT``, writes them as JSON. Every METEOR is printed with the
implementation that produced it (``meteor-1.5`` or ``nltk``; the two are not comparable).

``--scorer coco`` (default) is :func:`graph_rma.metrics.evaluate_generation` (coco-caption BLEU-1..4, METEOR, ROUGE,
entity coverage, repetition; GraphWriter's scorer, used for AGENDA's published numbers); ``--scorer webnlg2017`` is
:func:`graph_rma.metrics.score_webnlg2017`: the WebNLG 2017 challenge's BLEU (``multi-bleu.perl -lc``), METEOR 1.5
``-norm`` and TER on the organisers' tokenisation, against the first three references of each example (it
tokenises the text itself, so ``--tokenize`` and ``--entities`` do not apply).
"""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from ..tasks.defaults import METEOR_CHOICES, SCORER_HELP, SCORERS
from ._common import Parser, UsageError, description, out_file, run_command


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="graph-rma score", description=description(__doc__))
    p.add_argument("--hyp", required=True, help="generated texts, one per line")
    p.add_argument("--ref", required=True, action="append", help="references, one per line (repeat for more)")
    p.add_argument(
        "--entities",
        default=None,
        help="entities per line, separated by --entity-sep, for entity_coverage (default: none)",
    )
    p.add_argument(
        "--entity-sep",
        default=";",
        help="separator of entities in --entities; the spaces around each "
        "entity are stripped, so 'cat ; mat' and 'cat;mat' are the same (AGENDA's ' ; ' works as is)",
    )
    p.add_argument(
        "--meteor",
        default="auto",
        choices=METEOR_CHOICES,
        help="METEOR implementation: auto (1.5 if java is found, else nltk), meteor-1.5, nltk, none",
    )
    p.add_argument(
        "--tokenize",
        default=None,
        choices=("nltk", "split"),
        help="coco scorer: nltk: word_tokenize raw text; split: the text is already tokenised (e.g. AGENDA) "
        "(default: nltk)",
    )
    p.add_argument("--scorer", default="coco", choices=SCORERS, help=SCORER_HELP)
    p.add_argument(
        "--json", type=out_file, default=None, help="write the metrics as JSON to this file (default: print only)"
    )
    return p


def _read(path: str, option: str) -> List[str]:
    from ..engine.files import read_lines  # on use: graph_rma.engine loads torch, which --help must not

    try:
        return read_lines(path)
    except OSError as exc:
        raise UsageError(f"{option} {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{option} {path}: not UTF-8 ({exc.reason} at byte {exc.start})") from None


def _run(args: argparse.Namespace) -> int:
    if args.scorer == "webnlg2017":
        for option, value in (("--tokenize", args.tokenize), ("--entities", args.entities)):
            if value is not None:
                raise UsageError(
                    f"{option}: not used by --scorer webnlg2017 (it tokenises as the challenge did and "
                    "has no entity coverage)"
                )
        if args.meteor == "nltk":
            raise UsageError("--meteor nltk: --scorer webnlg2017 uses METEOR 1.5 only (auto, meteor-1.5 or none)")
    tokenize = args.tokenize or "nltk"
    hyps = _read(args.hyp, "--hyp")
    ref_files = [_read(r, "--ref") for r in args.ref]
    for path, lines in zip(args.ref, ref_files):
        if len(lines) != len(hyps):
            raise UsageError(f"--ref {path} has {len(lines)} lines but --hyp {args.hyp} has {len(hyps)}")
    refs = []
    for i in range(len(hyps)):
        rs = [lines[i] for lines in ref_files if lines[i].strip()]
        if not rs:
            raise UsageError(f"example {i + 1} (line {i + 1}) has no non-empty reference")
        refs.append(rs)
    entities = None
    if args.entities:
        ent_lines = _read(args.entities, "--entities")
        if len(ent_lines) != len(hyps):
            raise UsageError(f"--entities {args.entities} has {len(ent_lines)} lines but --hyp has {len(hyps)}")
        sep = args.entity_sep.strip() or args.entity_sep  # ' ; ' and ';' split alike; a blank separator stays as given
        if not sep:
            raise UsageError("--entity-sep: expected a separator, got an empty string")
        entities = [[e.strip() for e in line.split(sep) if e.strip()] for line in ent_lines]
        if any(line.strip() for line in ent_lines) and all(sep not in line for line in ent_lines):
            print(
                f"warning: no line of --entities {args.entities} contains the separator {sep!r}: each line is "
                f"one entity (give --entity-sep if they are separated otherwise)",
                file=sys.stderr,
            )
    if args.scorer == "webnlg2017":
        from ..metrics.webnlg2017 import score_webnlg2017

        result = score_webnlg2017(hyps, refs, meteor=args.meteor)
        keys = ["BLEU", "METEOR", "TER"]
    else:
        from ..metrics.generation import METRIC_KEYS, evaluate_generation

        result = evaluate_generation(hyps, refs, entities=entities, meteor=args.meteor, tokenize=tokenize)
        result["scorer"], result["tokenize"] = "coco", tokenize
        keys = list(METRIC_KEYS)
    result["num_references"] = sum(len(r) for r in refs)
    for key in keys:
        value = result[key]
        label = f"METEOR ({result['METEOR_impl']})" if key == "METEOR" else key
        print(f"{label:<20} {'n/a' if value is None else f'{value:.2f}'}")
    print(f"{'examples':<20} {result['n']} ({result['num_references']} references)")
    if args.json:
        from ..engine import write_json

        write_json(args.json, result)
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    return run_command("graph-rma score", lambda: _run(build_parser().parse_args(argv)))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
