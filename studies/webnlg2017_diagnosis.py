"""Why the first rounds of the reproduced WebNLG 2017 generator fell short of its acceptance line (issue 37: "find out
why before tuning further"): where it loses to the challenge baseline, and whether its outputs loop (docs/webnlg.md,
"Why the first rounds fell short").

    python -m studies.webnlg2017_diagnosis run       # dev decoded again: n-grams blocked (NGRAMS); the last epoch
    python -m studies.webnlg2017_diagnosis report    # -> docs/webnlg2017/diagnosis/results.json -> the block
                                                     #    (--root: the WebNLG release, for the input sizes)

Everything here comes after the test set was decoded once, and nothing here chooses a setting: ``run`` decodes dev
only (the chosen setting of ``RUN/decode/choice.json`` with ``no_repeat_ngram`` n, into ``RUN/decode/<setting>/``;
and the chosen setting from the run's last epoch, ``RUN/checkpoint.pt``, into ``RUN/decode/<setting>-last/``), never
test. ``report`` measures, from the files of ``studies.webnlg2017``:

* overfitting: the dev BLEU of ``best.pt`` (the epoch of the lowest dev loss, the one tested) beside the last
  epoch's, with the chosen decoding: whether keeping the model by dev loss cost BLEU;

* repetition: the share of outputs holding some 4-gram twice, per dev decoding setting, for the committed test
  outputs, and for the first reference of each entry (tokenised as the challenge's scorer does);
* per seen category, the test BLEU of the committed outputs beside the challenge baseline's (the organisers' own
  per-category output files, :data:`BASELINE_BY_CATEGORY`);
* per input size (triples), the dev BLEU of the latest scored round (its chosen decoding) beside its seen test BLEU
  (its committed outputs), with all of the challenge's references and with the first reference alone,
  :func:`by_size`: where the round's dev score does not carry over to test, and how much of that the two splits'
  numbers of references per entry explain. The sizes come
  from the WebNLG release (``--root``); without it, or without that round's run folder, the committed table is kept.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from graph_rma.argtypes import out_dir
from graph_rma.engine import one_line_errors, read_lines
from graph_rma.tasks.defaults import METEOR_CHOICES
from studies import webnlg2017 as base
from studies.pages import page_file, publish, renderer

NGRAMS = (3, 4)  # the chosen setting again on dev, with repeated 3-grams, then 4-grams, blocked
REPEAT = 4  # an output "loops" when it holds some 4-gram twice
RESULTS = Path("docs/webnlg2017/diagnosis")
BLOCK = "webnlg2017-diagnosis"
#: The challenge baseline's test BLEU per seen category: the organisers' multi-bleu.perl output files.
BASELINE_BY_CATEGORY = {
    "Airport": 65.83,
    "Astronaut": 47.65,
    "Building": 51.31,
    "City": 37.31,
    "ComicsCharacter": 42.95,
    "Food": 46.91,
    "Monument": 55.15,
    "SportsTeam": 52.35,
    "University": 57.67,
    "WrittenWork": 61.42,
}
BASELINE_SOURCE = (
    "`eval/bleu3ref-Baseline_<category>.txt` of webnlg-automatic-evaluation-v2 (the organisers' files, in the "
    "abevieiramota/challenge-webnlg snapshot the data card names)"
)


def repeats(tokens: Sequence[str], n: int = REPEAT) -> bool:
    """Whether some ``n``-gram occurs twice in ``tokens``."""
    grams = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
    return len(grams) != len(set(grams))


def looping(lines: Sequence[str], reference: bool = False) -> float:
    """The share (%) of ``lines`` that :func:`repeats`, each tokenised as the challenge's scorer does."""
    from graph_rma.metrics.webnlg2017 import tokenize_webnlg2017

    if not lines:
        return float("nan")
    return 100.0 * sum(repeats(tokenize_webnlg2017(x, reference=reference).split()) for x in lines) / len(lines)


def settings(run: Path) -> List[Dict]:
    """The diagnosis's dev settings: the run's chosen setting (a coverage reward kept) with each of :data:`NGRAMS`
    blocked."""
    choice = base._read(run / "decode" / "choice.json")
    if not choice:
        raise SystemExit(f"{run}: no decoding chosen yet (python -m studies.webnlg2017 choose)")
    chosen = {"beam": choice["beam"], "length_penalty": choice["length_penalty"], **base.extra_decoding(choice)}
    return [{**chosen, "no_repeat_ngram": n} for n in NGRAMS]


def last_epoch_folder(run_dir: Path) -> Path:
    """Where dev is decoded from the run's last epoch (``checkpoint.pt``) with the chosen setting."""
    return run_dir / "decode" / f"{base._read(run_dir / 'decode' / 'choice.json')['setting']}-last"


def run(run_dir: Path, root=None, meteor: str = "auto", progress: bool = True, splits=None) -> None:
    """Decode and score dev with each of :func:`settings`, then from the last epoch (resumable: a scored decode is
    skipped)."""
    base.dev(run_dir, root, meteor, progress=progress, splits=splits, settings=settings(run_dir))
    from graph_rma.tasks import webnlg as task

    choice = base._read(run_dir / "decode" / "choice.json")
    folder = last_epoch_folder(run_dir)
    if base._read(folder / f"metrics.dev.{base.SCORER}.json"):
        print(f"{folder.name}: done", file=sys.stderr)
        return
    print(f"{folder.name}: decoding dev from {run_dir / 'checkpoint.pt'}", file=sys.stderr, flush=True)
    task.generate(
        folder,
        "dev",
        root,
        checkpoint=run_dir / "checkpoint.pt",
        beam=choice["beam"],
        length_penalty=choice["length_penalty"],
        **base.every_decoding_option(choice),
        progress=progress,
        splits=splits,
    )
    task.evaluate(folder, "dev", root, meteor=meteor, scorer=base.SCORER)


def _epochs(run_dir: Path) -> Optional[Dict]:
    """best.pt against the last epoch on dev: epoch, dev loss and, with the chosen decoding, dev BLEU and looping."""
    last = base._read(last_epoch_folder(run_dir) / f"metrics.dev.{base.SCORER}.json")
    choice = base._read(run_dir / "decode" / "choice.json")
    history = base.trained(run_dir)
    if not (last and history):
        return None
    chosen = base._read(run_dir / "decode" / choice["setting"] / f"metrics.dev.{base.SCORER}.json")
    rows = []
    for name, epoch, metrics, folder in (
        ("best.pt", choice["checkpoint"]["epoch"], chosen, run_dir / "decode" / choice["setting"]),
        ("checkpoint.pt", history[-1]["epoch"], last, last_epoch_folder(run_dir)),
    ):
        rows.append(
            {
                "checkpoint": name,
                "epoch": epoch,
                "dev_loss": round(history[epoch - 1]["dev_loss"], 4),
                "train_loss": round(history[epoch - 1]["train_loss"], 4),
                "BLEU": round(metrics["all"]["BLEU"], 4),
                "brevity_penalty": round(metrics["all"]["BLEU_bp"], 4),
                "looping": round(looping(read_lines(folder / "hyp.dev.txt")), 2),
            }
        )
    return {"setting": choice["setting"], "rows": rows}


def _dev_row(run_dir: Path, setting: Dict, after_test: bool) -> Optional[Dict]:
    folder = run_dir / "decode" / base.setting_name(setting)
    metrics = base._read(folder / f"metrics.dev.{base.SCORER}.json")
    if not metrics:
        return None
    hyps = read_lines(folder / "hyp.dev.txt")
    return {
        "setting": base.setting_name(setting),
        "description": base._describe(setting),
        "after_test": after_test,
        "BLEU": round(metrics["all"]["BLEU"], 4),
        "brevity_penalty": round(metrics["all"]["BLEU_bp"], 4),
        "looping": round(looping(hyps), 2),
    }


def score_groups(keys: Sequence, hyps: Sequence[str], refs: Sequence[Dict], max_references: int = 3) -> Dict:
    """The entries grouped by their key (``keys[i]`` for entry ``i``; ``None`` leaves it out), each group scored with
    the challenge's BLEU (no METEOR) against the first ``max_references`` references of each entry (the challenge's
    three): key -> (the group's entry indices, its scores), in key order."""
    from graph_rma.metrics.webnlg2017 import score_webnlg2017

    groups: Dict = defaultdict(list)
    for i, key in enumerate(keys):
        if key is not None:
            groups[key].append(i)
    return {
        key: (
            rows,
            score_webnlg2017(
                [hyps[i] for i in rows], [refs[i]["references"] for i in rows], "none", max_references, ter=False
            ),
        )
        for key, rows in sorted(groups.items())
    }


def collect(run_dir: Path = base.RUN, results: Path = RESULTS, committed_outputs: Path = base.RESULTS) -> Dict:
    """The diagnosis's numbers; without the run folder, the committed ``results/results.json`` is kept."""
    test_refs = run_dir / "decode" / "test" / "refs.test.json"
    if not test_refs.is_file():
        print(f"{test_refs}: not here; the committed diagnosis is kept", file=sys.stderr)
        return base._read(results / "results.json") or {"dev": [], "references": None, "test": None, "epochs": None}
    dev = [r for s in base.GRID if (r := _dev_row(run_dir, s, False))]
    dev += [r for s in settings(run_dir) if (r := _dev_row(run_dir, s, True))]
    dev_refs = json.loads((run_dir / "decode" / base.setting_name(base.GRID[0]) / "refs.dev.json").read_text())
    refs = json.loads(test_refs.read_text(encoding="utf-8"))
    hyps = read_lines(committed_outputs / "hyp.test.txt")
    meta = base.read_meta(committed_outputs / "meta.test.tsv")
    if [m["eid"] for m in meta] != [r["eid"] for r in refs]:
        raise SystemExit(f"{committed_outputs}: the committed outputs are not those of {run_dir}")
    seen_category = [r["category"] if r["seen"] else None for r in refs]
    categories = [
        {
            "category": category,
            "entries": len(rows),
            "BLEU": round(s["BLEU"], 4),
            "brevity_penalty": round(s["BLEU_bp"], 4),
            "looping": round(looping([hyps[i] for i in rows]), 2),
            "baseline_BLEU": BASELINE_BY_CATEGORY.get(category),
        }
        for category, (rows, s) in score_groups(seen_category, hyps, refs).items()
    ]
    seen = [i for i, r in enumerate(refs) if r["seen"]]
    return {
        "dev": dev,
        "references": {
            "dev": round(looping([r["references"][0] for r in dev_refs], reference=True), 2),
            "test_seen": round(looping([refs[i]["references"][0] for i in seen], reference=True), 2),
        },
        "test": {"looping_seen": round(looping([hyps[i] for i in seen]), 2), "categories": categories},
        "epochs": _epochs(run_dir) or base._read(results / "results.json").get("epochs"),
    }


def by_size(run_dir: Path, outputs: Path, root=None) -> Dict:
    """Dev BLEU (the chosen decoding's dev outputs under ``run_dir/decode``) and seen test BLEU (the committed outputs
    in ``outputs``) per input size, the number of triples of each entry (from the WebNLG release at ``root``): scored
    against the challenge's references (up to three per entry; their mean number per entry beside it) and against the
    first reference of each entry alone (one each on both splits, so that the two splits' numbers of references do not
    enter the comparison); the last row, size ``"all"``, every seen entry; a size without entries in a split has
    ``None``."""
    from graph_rma.data.webnlg import load_webnlg

    choice = base._read(run_dir / "decode" / "choice.json")
    if not choice:
        raise SystemExit(f"{run_dir}: no decoding chosen yet (python -m studies.webnlg2017 choose)")
    folder = run_dir / "decode" / choice["setting"]
    dev_refs = json.loads((folder / "refs.dev.json").read_text(encoding="utf-8"))
    test_refs = json.loads((run_dir / "decode" / "test" / "refs.test.json").read_text(encoding="utf-8"))
    meta = base.read_meta(outputs / "meta.test.tsv")
    splits = {}
    for split, refs, hyps in (
        ("dev", dev_refs, read_lines(folder / "hyp.dev.txt")),
        ("test", test_refs, read_lines(outputs / "hyp.test.txt")),
    ):
        entries = load_webnlg(split, root)
        eids = [r["eid"] for r in (meta if split == "test" else refs)]
        if [e.eid for e in entries] != [r["eid"] for r in refs] or eids != [r["eid"] for r in refs]:
            raise SystemExit(f"{run_dir}: its {split} outputs are not those of the WebNLG release read")
        sizes = [len(entry.triples) if ref["seen"] else None for entry, ref in zip(entries, refs)]
        splits[split] = _group_scores(sizes, hyps, refs)
        splits[split] |= _group_scores(["all" if ref["seen"] else None for ref in refs], hyps, refs)
    absent = {"entries": 0, "references": None, "BLEU": None, "BLEU_first_reference": None}
    absent |= {"entities_named": None, "entities_named_first_reference": None}
    rows = []
    for size in [*sorted((set(splits["dev"]) | set(splits["test"])) - {"all"}), "all"]:
        row: Dict = {"size": size}
        for split in ("dev", "test"):
            row.update({f"{split}_{key}": value for key, value in splits[split].get(size, absent).items()})
        rows.append(row)
    return {"setting": choice["setting"], "rows": rows}


def _group_scores(keys: Sequence, hyps: Sequence[str], refs: Sequence[Dict]) -> Dict:
    """Per group of :func:`score_groups`: its entries, their mean number of the challenge's references, its BLEU
    against those and against the first reference of each entry alone, and the share of its input entities that its
    outputs and its first references name (:func:`entities_named`)."""
    from graph_rma.metrics.webnlg2017 import MAX_REFERENCES

    first = score_groups(keys, hyps, refs, max_references=1)
    return {
        key: {
            "entries": len(group),
            "references": round(sum(min(len(refs[i]["references"]), MAX_REFERENCES) for i in group) / len(group), 2),
            "BLEU": round(scores["BLEU"], 4),
            "BLEU_first_reference": round(first[key][1]["BLEU"], 4),
            "entities_named": round(entities_named([hyps[i] for i in group], [refs[i]["entities"] for i in group]), 2),
            "entities_named_first_reference": round(
                entities_named([refs[i]["references"][0] for i in group], [refs[i]["entities"] for i in group], True),
                2,
            ),
        }
        for key, (group, scores) in score_groups(keys, hyps, refs).items()
    }


def entities_named(texts: Sequence[str], entities: Sequence[Sequence[str]], reference: bool = False) -> float:
    """The share (0-100) of the entries' input entities whose words stand, in order and side by side, in the entry's
    text (:func:`graph_rma.metrics.generation.entity_coverage`), entity and text tokenised alike, as the challenge's
    scorer tokenises a submission (or, ``reference=True``, a reference): a paraphrased mention does not count."""
    from graph_rma.metrics.generation import entity_coverage
    from graph_rma.metrics.webnlg2017 import tokenize_webnlg2017 as tokenize

    return entity_coverage(
        [tokenize(text, reference).split() for text in texts],
        [[tokenize(entity, reference).split() for entity in group] for group in entities],
    )


def render_diagnosis(data: Dict) -> str:
    if not data.get("test"):
        return "Not run yet (`python -m studies.webnlg2017_diagnosis run`, then `report`)."
    lines = [
        f'Dev, every decoding setting of the run (outputs holding some {REPEAT}-gram twice: "looping"):',
        "",
        "| decoding setting | when | dev BLEU | brevity penalty | looping outputs |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for r in data["dev"]:
        when = "after the test decode (diagnosis; never chosen)" if r["after_test"] else "the grid, before test"
        lines.append(
            f"| {r['description']} | {when} | {r['BLEU']:.2f} | {r['brevity_penalty']:.3f} | {r['looping']:.1f}% |"
        )
    epochs = data.get("epochs")
    if epochs:
        lines += [
            "",
            f"The kept model against the last epoch, dev decoded with the chosen setting (`{epochs['setting']}`):",
            "",
            "| checkpoint | epoch | train loss | dev loss | dev BLEU | brevity penalty | looping outputs |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for r in epochs["rows"]:
            lines.append(
                f"| `{r['checkpoint']}` | {r['epoch']} | {r['train_loss']:.3f} | {r['dev_loss']:.3f} | "
                f"{r['BLEU']:.2f} | {r['brevity_penalty']:.3f} | {r['looping']:.1f}% |"
            )
    refs, test = data["references"], data["test"]
    lines += [
        "",
        f"Looping in the references (the first of each entry): {refs['dev']:.1f}% on dev, {refs['test_seen']:.1f}% "
        f"on the seen test entries; in the committed test outputs (seen entries): {test['looping_seen']:.1f}%.",
        "",
        "Seen test entries per category, the committed outputs beside the challenge baseline's:",
        "",
        "| category | entries | BLEU, ours | BLEU, challenge baseline | ours − baseline | brevity penalty, ours | "
        "looping outputs, ours |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for c in test["categories"]:
        b = c["baseline_BLEU"]
        diff = "–" if b is None else f"{c['BLEU'] - b:+.2f}"
        lines.append(
            f"| {c['category']} | {c['entries']} | {c['BLEU']:.2f} | {'–' if b is None else f'{b:.2f}'} | {diff} | "
            f"{c['brevity_penalty']:.3f} | {c['looping']:.1f}% |"
        )
    sizes = data.get("by_size")
    if sizes:
        lines += [
            "",
            f"Round `{sizes['round']}`, dev (its chosen decoding, `{sizes['setting']}`) against its seen test entries "
            "(its committed outputs), per input size:",
            "",
            "| triples | dev entries | references per entry | dev BLEU | dev BLEU, first reference | seen test entries "
            "| references per entry | seen test BLEU | seen test BLEU, first reference | test − dev | "
            "test − dev, first reference |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for r in sizes["rows"]:
            cells = [str(r["size"])]
            for split in ("dev", "test"):
                cells += [str(r[f"{split}_entries"]), _number(r[f"{split}_references"])]
                cells += [_number(r[f"{split}_BLEU"]), _number(r[f"{split}_BLEU_first_reference"])]
            for key in ("BLEU", "BLEU_first_reference"):
                dev, test = r[f"dev_{key}"], r[f"test_{key}"]
                cells.append("–" if dev is None or test is None else f"{test - dev:+.2f}")
            lines.append(f"| {' | '.join(cells)} |")
        lines += [
            "",
            "The same entries, the share of their input entities named (an entity's words standing in the text in "
            "order, as they are; the first reference paraphrases some of them):",
            "",
            "| triples | dev outputs | dev first reference | seen test outputs | seen test first reference |",
            "| ---: | ---: | ---: | ---: | ---: |",
        ]
        for r in sizes["rows"]:
            keys = [f"{split}_entities_named{which}" for split in ("dev", "test") for which in ("", "_first_reference")]
            lines.append(f"| {r['size']} | {' | '.join(_percent(r[k]) for k in keys)} |")
    lines += [
        "",
        f"The baseline's column: {BASELINE_SOURCE}. Generated by `python -m studies.webnlg2017_diagnosis report` from "
        "[webnlg2017/diagnosis/results.json](webnlg2017/diagnosis/results.json).",
    ]
    return "\n".join(lines)


def _number(value: Optional[float]) -> str:
    return "–" if value is None else f"{value:.2f}"


def _percent(value: Optional[float]) -> str:
    return "–" if value is None else f"{value:.1f}%"


BLOCKS = {BLOCK: render_diagnosis}
render = renderer(BLOCKS)  # render(page_text, results): the page with its generated block rendered from results


def latest_by_size(root=None) -> Optional[Dict]:
    """:func:`by_size` of the latest round whose test set is scored (:func:`studies.webnlg2017.latest`), named
    (``"round"``); ``None`` when there is none, or its run folder or the WebNLG release is not here."""
    from graph_rma.data.root import DataNotFoundError

    name = base.latest(base.committed())
    if name is None or not (base.ROUNDS[name].run / "decode" / "test" / "refs.test.json").is_file():
        return None
    try:
        return {"round": name, **by_size(base.ROUNDS[name].run, base.ROUNDS[name].results, root)}
    except DataNotFoundError as err:
        print(f"{err}; the committed table per input size is kept", file=sys.stderr)
        return None


def report(run_dir: Path = base.RUN, page: Path = base.PAGE, results: Path = RESULTS, root=None) -> Dict:
    """The diagnosis written to ``results/results.json`` and the page's block; the table per input size is the
    latest scored round's (:func:`latest_by_size`), or the committed one where that cannot be measured here."""
    data = collect(run_dir, results)
    sizes = latest_by_size(root) or (base._read(results / "results.json") or {}).get("by_size")
    if sizes:
        data["by_size"] = sizes
    publish(page, data, BLOCKS, results / "results.json")
    return data


def main(argv=None) -> int:
    one_line_errors()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("step", choices=["run", "report"])
    p.add_argument("--run", type=out_dir, default=base.RUN, help=f"the finished run (default: {base.RUN})")
    p.add_argument("--results", type=out_dir, default=RESULTS, help=f"committed results (default: {RESULTS})")
    p.add_argument("--page", type=page_file, default=base.PAGE, help=f"report: the page (default: {base.PAGE})")
    p.add_argument("--root", default=None, help="WebNLG folder (default: $GRAPH_RMA_DATA/webnlg)")
    p.add_argument("--meteor", default="auto", choices=[m for m in METEOR_CHOICES if m != "nltk"])
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    a = p.parse_args(argv)
    if a.step == "run":
        run(a.run, a.root, a.meteor, not a.quiet)
    else:
        report(a.run, a.page, a.results, a.root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
