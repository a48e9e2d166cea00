"""The challenge baseline on WebNLG 2017 (issue 37): decoding chosen on dev, the test set decoded once, scored as the
challenge did, the decoded test outputs committed beside the results (docs/webnlg.md, "Reproducing the challenge
baseline").

    python -m studies.webnlg2017 dev       # decode dev with each setting of GRID from RUN/best.pt, score it
    python -m studies.webnlg2017 choose    # the setting with the highest dev BLEU (no test number is read)
    python -m studies.webnlg2017 test      # decode test once with the chosen setting, score it, copy the outputs
    python -m studies.webnlg2017 report    # -> docs/webnlg2017/results.json -> the page's generated block
    python -m studies.webnlg2017 rescore   # score the committed hyp.test.txt again (no model, no decoding)

Each step works on one round of :data:`ROUNDS` (``--round``, default ``ma-s0``, the first): its run folder RUN
(``--run`` overrides it), its results folder RESULTS under docs/ (``--results``) and the grid its decoding is chosen
from (``ma-s0``: GRID; ``v3-s0``, the next round on docs/webnlg.md: DECODE_GRID; ``v4-s0``: COVERAGE_GRID). ``report``
writes the round's ``results.json`` and renders the page's one block from every round's: a dev table each (with the
round's training curves, ``curves.png`` in its results folder, drawn from the per-epoch history its ``results.json``
keeps), one test table with a row per round (naming the training settings its run set over the preset), an acceptance
verdict per round.

RUN is a finished ``graph-rma webnlg train --preset webnlg2017`` run folder; ``dev`` refuses an unfinished one (its
``best.pt`` could still change). Every step writes under ``RUN/decode/`` and resumes: ``dev`` skips the settings already
scored (a setting decoded but not scored is only scored), ``test`` never decodes a second time (a test decode stopped
before its end starts again, with the same setting). Each decode records the SHA-256 of the ``best.pt`` it read, and a
later step refuses results of another ``best.pt``. Scores are :func:`graph_rma.tasks.webnlg.score` with
``scorer="webnlg2017"`` (BLEU as ``multi-bleu.perl -lc``, METEOR 1.5 ``-norm`` when Java is found, TER; ``seen``,
``unseen`` and ``all`` each scored as one corpus).

The rules, written before any run:

* GRID: beam 5 with GNMT length penalty 0.6, 1.0 and 1.4, and beam 10 with 1.0; the run's own ``max_len``.
  DECODE_GRID (the next round's, written 2026-11-26 before its run): GRID, then beam 5 with repeated 3- or 4-grams
  blocked at length penalty 1.0, 1.4 and 1.8. COVERAGE_GRID (round ``v4-s0``'s, amended 2026-11-27 while its run
  trained, before any of its decodes): DECODE_GRID, then beam 5 with repeated 3-grams blocked and a coverage reward
  (``--coverage-reward``) of 0.5 or 1 at length penalty 1.0, 1.4 and 1.8.
* ``choose``: the highest BLEU on all dev entries (the dev split holds seen categories only); ties go to the earlier
  entry of GRID.
* ``test``: once per final run. It refuses to run before ``choose``, when ``best.pt`` is not the one dev was decoded
  from, and with a setting other than the one a test decode of this run (``RUN/decode/test/claim.json``, written
  before decoding) or the committed one (``RESULTS/test.json``) used; the committed test outputs of another
  checkpoint are not overwritten either.

``test`` copies to RESULTS (``--results``, default docs/webnlg2017): ``hyp.test.txt`` (one hypothesis per test entry,
in the order of the release's test file), ``meta.test.tsv`` (per line of it: the entry's ``eid``, category and
``seen`` / ``unseen``) and ``test.json`` (the setting, the checkpoint and the SHA-256 of ``hyp.test.txt``). The
references are not copied: ``rescore`` reads them from the WebNLG release (``--root``, default
``$GRAPH_RMA_DATA/webnlg``), matched by ``eid`` and checked against the category, and scores each subset;
``--export DIR`` also writes each subset's hypotheses and first three references as files for ``graph-rma score
--scorer webnlg2017``, which scores one file and has no notion of subsets.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

from graph_rma.argtypes import device, out_dir, positive_int
from graph_rma.data.root import sha256sum as _sha256
from graph_rma.engine import atomic_write_text, one_line_errors, read_lines, write_json
from graph_rma.tasks.curves import plot_curves
from graph_rma.tasks.defaults import METEOR_CHOICES, WEBNLG_PRESETS
from graph_rma.tasks.generator_config import DECODING_FIELDS
from studies.graph_to_text import PUBLISHED
from studies.pages import page_file, render_page, renderer

#: The decoding settings tried on dev, in order (an earlier entry wins a tie). Written before any run (issue 37).
GRID: List[Dict] = [
    {"beam": 5, "length_penalty": 0.6},
    {"beam": 5, "length_penalty": 1.0},
    {"beam": 5, "length_penalty": 1.4},
    {"beam": 10, "length_penalty": 1.0},
]
#: The next round's grid (and the repulsion study's, :mod:`studies.webnlg2017_evidence`): GRID, then beam 5 with
#: repeated 3-grams or 4-grams blocked at three length penalties (written 2026-11-26, before any run chose from it).
DECODE_GRID: List[Dict] = [
    *GRID,
    *({"beam": 5, "length_penalty": lp, "no_repeat_ngram": n} for n in (3, 4) for lp in (1.0, 1.4, 1.8)),
]
#: Round ``v4-s0``'s grid (amended 2026-11-27, while its run trained and before any of its decodes): DECODE_GRID,
#: then beam 5 with repeated 3-grams blocked and a coverage reward of 0.5 or 1 at three length penalties.
COVERAGE_GRID: List[Dict] = [
    *DECODE_GRID,
    *(
        {"beam": 5, "length_penalty": lp, "no_repeat_ngram": 3, "coverage_reward": reward}
        for reward in (0.5, 1.0)
        for lp in (1.0, 1.4, 1.8)
    ),
]
#: The decoding settings beyond beam and length penalty that a setting may turn on, each with its value when off.
EXTRA_DECODING: Dict[str, Any] = {"no_repeat_ngram": 0, "coverage_reward": 0.0}
SCORER = "webnlg2017"
SUBSETS = ("seen", "unseen", "all")
#: The published row whose seen-category BLEU is the issue's acceptance line.
TARGET = "GCN_EC"
BLOCK = "webnlg2017-results"
PAGE = Path("docs/webnlg.md")
REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Round:
    """One plain run of the reproduction: its training run folder, its committed results folder (under docs/) and
    the grid its decoding is chosen from; ``keep`` is how its ``best.pt`` was kept, as the page says it;
    ``overrides``: the training settings its command sets over the preset (shown in its row until it has run)."""

    run: Path
    results: Path
    grid: Sequence[Dict]
    keep: str
    overrides: Mapping[str, Any] = field(default_factory=dict)


_KEPT_BY_BLEU = "by dev BLEU (`--keep dev_bleu`; dev decoded with beam 5, length penalty 1.8, no repeated 3-gram)"
#: The rounds, in the order they were run; each keeps its row on the page. The second applies the first's
#: diagnosis, the third adds CGE-LW's label smoothing to the second (docs/webnlg.md, "The next round" and "The round
#: after"; each round's rules written before its run started).
ROUNDS: Dict[str, Round] = {
    "ma-s0": Round(Path("runs/webnlg2017/ma-s0"), Path("docs/webnlg2017"), GRID, "by dev loss"),
    "v3-s0": Round(Path("runs/webnlg2017/v3-s0"), Path("docs/webnlg2017/v3-s0"), DECODE_GRID, _KEPT_BY_BLEU),
    "v4-s0": Round(
        Path("runs/webnlg2017/v4-s0"),
        Path("docs/webnlg2017/v4-s0"),
        COVERAGE_GRID,
        _KEPT_BY_BLEU,
        {"label_smoothing": 0.1},
    ),
}
FIRST = "ma-s0"
RUN, RESULTS = ROUNDS[FIRST].run, ROUNDS[FIRST].results
META_HEADER = "line\teid\tcategory\tsubset"
#: What a round's results keep of each epoch of its run's history (the picture's numbers).
CURVE_KEYS = ("epoch", "train_loss", "dev_loss", "lr", "dev_bleu")


def setting_name(setting: Dict) -> str:
    """``beam5-lp1.0`` (``beam5-lp1.4-nr3`` with repeated 3-grams blocked, ``beam5-lp1.4-nr3-cr0.5`` with a
    coverage reward of 0.5 too): the setting's folder under ``RUN/decode``."""
    extra = extra_decoding(setting)
    n, reward = extra.get("no_repeat_ngram"), extra.get("coverage_reward")
    name = f"beam{setting['beam']}-lp{setting['length_penalty']:.1f}" + (f"-nr{n}" if n else "")
    return name + (f"-cr{reward:g}" if reward else "")


def _describe(setting: Dict) -> str:
    extra = extra_decoding(setting)
    n, reward = extra.get("no_repeat_ngram"), extra.get("coverage_reward")
    text = f"beam {setting['beam']}, length penalty {setting['length_penalty']:.1f}"
    return text + (f", no repeated {n}-gram" if n else "") + (f", coverage reward {reward:g}" if reward else "")


def _read(path: Path) -> Dict:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _best(run: Path) -> Path:
    best = run / "best.pt"
    if not best.is_file():
        raise SystemExit(f"{best}: no such checkpoint; train first (graph-rma webnlg train --preset webnlg2017 ...)")
    return best


def trained(run: Path) -> Optional[List[Dict]]:
    """The epochs of a finished run (``train.json``'s history, every epoch of its configuration), else ``None``."""
    config, train = _read(run / "config.json"), _read(run / "train.json")
    history = train.get("history", [])
    return history if config and len(history) >= config["config"]["epochs"] else None


def finished(run: Path) -> Path:
    """``RUN/best.pt`` of a run that has trained every epoch of its configuration (``train.json`` says so);
    ``SystemExit`` naming what is missing otherwise."""
    best = _best(run)
    config, train = _read(run / "config.json"), _read(run / "train.json")
    if not config:
        raise SystemExit(f"{run / 'config.json'}: missing; {run} is not a run folder of graph-rma webnlg train")
    if trained(run) is None:
        epochs, done = config["config"]["epochs"], len(train.get("history", []))
        state = f"trained {done} of {epochs} epochs" if train else f"no train.json yet (written after epoch {epochs})"
        raise SystemExit(f"{run}: {state}; wait for `graph-rma webnlg train` to finish (its best.pt can still change)")
    return best


def _checkpoint(best: Path) -> Dict:
    """What a decode records of the checkpoint it read: its path, SHA-256, epoch and dev loss."""
    from graph_rma.engine import load_checkpoint

    ck = load_checkpoint(best)
    return {"path": str(best), "sha256": _sha256(best), "epoch": ck["epoch"], "dev_loss": ck["dev_loss"]}


def _decode(folder: Path, split: str, setting: Dict, best: Path, args: Dict) -> None:
    """Decode ``split`` into ``folder`` (unless ``decoded.<split>.json`` is there: done) and score it (unless its
    metrics file is there); ``decoded.<split>.json`` records the decode (setting, checkpoint, time, threads)."""
    import torch

    from graph_rma.engine import resolve_device
    from graph_rma.tasks import webnlg as task

    record, metrics = folder / f"decoded.{split}.json", task.metrics_path(folder, split, SCORER)
    if not record.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        metrics.unlink(missing_ok=True)  # scores of an earlier decode, if any, are not this one's
        start = time.perf_counter()
        task.generate(
            folder,
            split,
            args["root"],
            checkpoint=best,
            beam=setting["beam"],
            length_penalty=setting["length_penalty"],
            **every_decoding_option(setting),
            progress=args["progress"],
            splits=args["splits"](),
            device=args["device"],
        )
        seconds = round(time.perf_counter() - start, 1)
        decoded = _read(folder / f"decode.{split}.json")  # generate's: beam, max_len, length penalty, entries
        write_json(
            record,
            {
                "setting": setting_name(setting),
                **{k: decoded[k] for k in ("beam", "length_penalty", "max_len", "entries")},
                "no_repeat_ngram": decoded.get("no_repeat_ngram", 0),
                **extra_decoding(decoded),
                "checkpoint": args["checkpoint"](),
                "seconds": seconds,
                "threads": torch.get_num_threads(),
                "device": str(resolve_device(args["device"])),
                "torch": torch.__version__,
                "machine": platform.machine(),
                "date": _now(),
            },
        )
    if not metrics.is_file():
        task.evaluate(folder, split, args["root"], meteor=args["meteor"], scorer=SCORER)  # scores the file above


def _args(best: Path, root, meteor: str, threads: int, device: Optional[str], progress: bool, splits) -> Dict:
    """What :func:`_decode` needs; the data and the checkpoint's record are read on first use, once."""
    import torch

    torch.set_num_threads(threads)
    cache: Dict = {"splits": splits, "checkpoint": None}

    def load():
        from graph_rma.data.webnlg import load_webnlg_splits

        if cache["splits"] is None:
            cache["splits"] = load_webnlg_splits(root)
        return cache["splits"]

    def checkpoint():
        if cache["checkpoint"] is None:
            cache["checkpoint"] = _checkpoint(best)
        return cache["checkpoint"]

    return {
        "root": root,
        "meteor": meteor,
        "device": device,
        "progress": progress,
        "splits": load,
        "checkpoint": checkpoint,
    }


def dev(
    run: Path,
    root=None,
    meteor: str = "auto",
    threads: int = 1,
    device: Optional[str] = None,
    progress: bool = True,
    splits=None,
    settings: Optional[Sequence[Dict]] = None,
) -> None:
    """Decode and score the dev split with every setting of ``settings`` (default :data:`GRID`) not yet scored,
    each into ``RUN/decode/<setting>/`` (``hyp.dev.txt``, ``metrics.dev.webnlg2017.json``, ``decoded.dev.json``,
    ...)."""
    best = finished(run)
    sha = _sha256(best)
    todo = []
    for setting in GRID if settings is None else settings:
        folder = run / "decode" / setting_name(setting)
        record = _read(folder / "decoded.dev.json")
        if record and record["checkpoint"]["sha256"] != sha:
            raise SystemExit(
                f"{folder}: decoded from another {best.name} (epoch {record['checkpoint']['epoch']}); remove "
                f"{run / 'decode'} to decode dev again from this one"
            )
        if record and (folder / f"metrics.dev.{SCORER}.json").is_file():
            print(f"{setting_name(setting)}: done", file=sys.stderr)
        else:
            todo.append(setting)
    if not todo:
        return
    args = _args(best, root, meteor, threads, device, progress, splits)
    for setting in todo:
        print(f"{setting_name(setting)}: decoding dev", file=sys.stderr, flush=True)
        _decode(run / "decode" / setting_name(setting), "dev", setting, best, args)


def pick(scores: Sequence[float]) -> int:
    """The index of the highest score; a tie goes to the earlier index."""
    return max(range(len(scores)), key=lambda i: (scores[i], -i))


def dev_scores(run: Path, grid: Sequence[Dict] = GRID) -> List[Optional[Dict]]:
    """Per setting of ``grid``: its dev record and scores (``{"record", "metrics"}``), ``None`` if not scored."""
    rows: List[Optional[Dict]] = []
    for setting in grid:
        folder = run / "decode" / setting_name(setting)
        record, metrics = _read(folder / "decoded.dev.json"), _read(folder / f"metrics.dev.{SCORER}.json")
        rows.append({"record": record, "metrics": metrics} if record and metrics else None)
    return rows


def choose(run: Path, grid: Sequence[Dict] = GRID, to: Optional[Path] = None) -> Dict:
    """Write (to ``to``, default ``RUN/decode/choice.json``) and return the setting of ``grid`` (default
    :data:`GRID`) with the highest BLEU on all dev entries (ties: the earlier). Refuses (``SystemExit``) while a
    setting is not scored or when one was decoded from another ``best.pt`` than the run's. Reads no test file."""
    sha = _sha256(_best(run))
    rows = dev_scores(run, grid)
    missing = [setting_name(s) for s, r in zip(grid, rows) if r is None]
    if missing:
        raise SystemExit(f"dev not scored for {', '.join(missing)}: run `python -m studies.webnlg2017 dev` first")
    other = [setting_name(s) for s, r in zip(grid, rows) if r["record"]["checkpoint"]["sha256"] != sha]
    if other:
        raise SystemExit(f"{', '.join(other)}: decoded from another best.pt than {run / 'best.pt'}; run `dev` again")
    scores = [r["metrics"]["all"]["BLEU"] for r in rows]
    best = pick(scores)
    choice = {
        "setting": setting_name(grid[best]),
        **grid[best],
        "dev_BLEU": scores[best],
        "rule": "the highest BLEU on all dev entries; ties: the earlier setting of the grid",
        "checkpoint": rows[best]["record"]["checkpoint"],
        "date": _now(),
    }
    write_json(to or run / "decode" / "choice.json", choice)
    print(f"chosen: {choice['setting']} (dev BLEU {scores[best]:.2f})")
    return choice


def decode_test(
    run: Path,
    results: Path = RESULTS,
    root=None,
    meteor: str = "auto",
    threads: int = 1,
    device: Optional[str] = None,
    progress: bool = True,
    splits=None,
) -> Dict:
    """Decode the test split once with the chosen setting into ``RUN/decode/test/``, score it, and copy
    ``hyp.test.txt``, ``meta.test.tsv`` and ``test.json`` to ``results``; returns the scores. Rerun, it decodes
    nothing again (it scores, then copies). Refuses (``SystemExit``, before any decoding) without ``choice.json``,
    when its options are not the setting it names, when ``best.pt`` is not the one dev was decoded from, and when
    this run's test was decoded (or is being decoded), here or in ``results``, with another setting."""
    choice = _read(run / "decode" / "choice.json")
    if not choice:
        raise SystemExit("no setting chosen: run `python -m studies.webnlg2017 choose` first")
    if setting_name(choice) != choice["setting"]:
        raise SystemExit(
            f"{run / 'decode' / 'choice.json'}: names {choice['setting']} but its options decode "
            f"{setting_name(choice)}; not decoded"
        )
    best = _best(run)
    sha = _sha256(best)
    if choice["checkpoint"]["sha256"] != sha:
        raise SystemExit(f"{best}: not the checkpoint dev was decoded from (epoch {choice['checkpoint']['epoch']})")
    folder = run / "decode" / "test"
    for where in (folder / "claim.json", results / "test.json"):
        record = _read(where)
        if record and record.get("checkpoint", {}).get("sha256") != sha:
            raise SystemExit(
                f"{where}: holds the test decode of another checkpoint ({record.get('checkpoint', {}).get('path')}); "
                "give this run its own --results folder (and --run)"
            )
        if record and record.get("setting") != choice["setting"]:
            raise SystemExit(
                f"{where}: the test set was decoded with {record.get('setting')}; one test decode per final run "
                f"(chosen now: {choice['setting']})"
            )
    if not (folder / "claim.json").is_file():  # before the first hypothesis exists: no other setting after this
        folder.mkdir(parents=True, exist_ok=True)
        write_json(folder / "claim.json", {"setting": choice["setting"], "checkpoint": choice["checkpoint"]})
    setting = {k: choice[k] for k in ("beam", "length_penalty")}
    setting.update(extra_decoding(choice))
    _decode(folder, "test", setting, best, _args(best, root, meteor, threads, device, progress, splits))
    record = _read(folder / "decoded.test.json")
    refs = json.loads((folder / "refs.test.json").read_text(encoding="utf-8"))
    meta = [META_HEADER] + [
        f"{i + 1}\t{r['eid']}\t{r['category']}\t{'seen' if r['seen'] else 'unseen'}" for i, r in enumerate(refs)
    ]
    results.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(folder / "hyp.test.txt", results / "hyp.test.txt")
    atomic_write_text(results / "meta.test.tsv", "\n".join(meta) + "\n")
    config = _read(run / "config.json")
    write_json(
        results / "test.json",
        {
            **record,
            "run": str(run),
            "variant": config.get("variant"),
            "seed": config.get("seed"),
            "hyp_sha256": _sha256(results / "hyp.test.txt"),
        },
    )
    scores = _read(folder / f"metrics.test.{SCORER}.json")
    print(f"wrote {results / 'hyp.test.txt'}, {results / 'meta.test.tsv'} and {results / 'test.json'}")
    for subset in SUBSETS:
        print(f"{subset:<7} {_scores_line(scores[subset])}")
    return scores


def _scores_line(s: Dict) -> str:
    meteor = "n/a" if s.get("METEOR") is None else f"{s['METEOR']:.2f}"
    return f"BLEU {s['BLEU']:.2f}  METEOR {meteor}  TER {s['TER']:.2f}  ({s['n']} entries)"


def curve_history(history: Sequence[Dict]) -> List[Dict]:
    """What results keep of a run's per-epoch history for its training curves (:data:`CURVE_KEYS`), rounded to 4
    digits but the learning rate (halved down to 1e-5)."""
    return [{k: h[k] if k == "lr" else _rounded(h[k]) for k in CURVE_KEYS if k in h} for h in history]


def _rounded(obj, digits: int = 4):
    if isinstance(obj, float):
        return round(obj, digits)
    if isinstance(obj, dict):
        return {k: _rounded(v, digits) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_rounded(v, digits) for v in obj]
    return obj


def not_run(grid: Sequence[Dict] = GRID) -> Dict:
    """The results before any step has run."""
    rows = [{"setting": setting_name(s), **s, "dev": None, "decode": None} for s in grid]
    return {"grid": rows, "choice": None, "test": None, "conditions": None}


def every_decoding_option(record: Dict) -> Dict:
    """Every setting of :data:`EXTRA_DECODING` of ``record``, its default where ``record`` has none (what a decode is
    called with, so that no option the setting names is dropped)."""
    return {k: record.get(k, off) for k, off in EXTRA_DECODING.items()}


def extra_decoding(record: Dict) -> Dict:
    """The settings of :data:`EXTRA_DECODING` that ``record`` (a setting, a choice or a decode's record) turns on,
    e.g. ``{"no_repeat_ngram": 3}``; ``{}`` when it turns none on (the results of such a setting are written as
    before those settings existed)."""
    return {k: record[k] for k, off in EXTRA_DECODING.items() if record.get(k, off) != off}


def collect(run: Path, results: Path = RESULTS, grid: Sequence[Dict] = GRID) -> Dict:
    """The results of ``RUN/decode/`` (dev scores per setting of ``grid``, the choice, the test scores, the
    conditions). A run folder without ``decode/`` (nothing run, or a machine that does not hold the run) keeps the
    committed ``results/results.json`` (the not-run results when there is none)."""
    if not (run / "decode").is_dir():
        committed = _read(results / "results.json")
        print(f"{run / 'decode'}: nothing decoded; the committed results are kept", file=sys.stderr)
        return committed or not_run(grid)
    out = not_run(grid)
    keys = ("setting", "beam", "length_penalty", "max_len", "entries", "seconds", "threads", "device", "date")
    for entry, row in zip(out["grid"], dev_scores(run, grid)):
        if row is not None:
            entry["dev"] = _rounded(row["metrics"]["all"])
            entry["decode"] = {k: row["record"][k] for k in keys if k != "setting"}
    choice = _read(run / "decode" / "choice.json")
    if choice:
        out["choice"] = {k: choice[k] for k in ("setting", "beam", "length_penalty", "dev_BLEU", "rule", "date")}
        out["choice"].update(extra_decoding(choice))
        out["choice"]["dev_BLEU"] = round(out["choice"]["dev_BLEU"], 4)
    folder = run / "decode" / "test"
    record, scores = _read(folder / "decoded.test.json"), _read(folder / f"metrics.test.{SCORER}.json")
    if record and scores:
        out["test"] = {
            **{k: record[k] for k in keys},
            **extra_decoding(record),
            "scores": {s: _rounded(scores[s]) for s in SUBSETS},
            "hyp": "hyp.test.txt",
            "meta": "meta.test.tsv",
        }
    records = [r for r in [record] + [row["record"] for row in dev_scores(run, grid) if row] if r]
    if records:
        config, train = _read(run / "config.json"), _read(run / "train.json")
        r = records[0]
        out["conditions"] = {
            "run": str(run),
            "variant": config.get("variant"),
            "seed": config.get("seed"),
            "config": config.get("config"),
            "data": config.get("data"),
            "epochs_trained": len(train.get("history", [])),
            "best_epoch": r["checkpoint"]["epoch"],
            "best_dev_loss": round(r["checkpoint"]["dev_loss"], 4),
            "checkpoint_sha256": r["checkpoint"]["sha256"],
            "torch": r["torch"],
            "threads": r["threads"],
            "device": r["device"],
            "machine": r["machine"],
            "date": _now(),
        }
        out["history"] = curve_history(train.get("history", []))
    return out


def target() -> float:
    """The acceptance line: the seen-category BLEU of :data:`TARGET`'s published row (studies.graph_to_text)."""
    return next(s["BLEU seen"] for system, s, _ in PUBLISHED["webnlg"] if system.startswith(TARGET))


def acceptance(results: Dict) -> Optional[bool]:
    """Whether our seen-category test BLEU reaches :func:`target`; ``None`` before the test set is scored."""
    test = results.get("test")
    return None if not test else test["scores"]["seen"]["BLEU"] >= target()


def committed(rounds: Dict[str, Round] = ROUNDS) -> Dict[str, Dict]:
    """Each round's committed ``results.json`` (under the repository), by round name; a round without one (nothing
    decoded yet) has its not-run results."""
    return {name: _read(REPO / r.results / "results.json") or not_run(r.grid) for name, r in rounds.items()}


def latest(rounds: Dict[str, Dict]) -> Optional[str]:
    """The last round (in :data:`ROUNDS`' order) whose test set is scored; ``None`` before any is."""
    scored = [name for name in ROUNDS if rounds.get(name, {}).get("test")]
    return scored[-1] if scored else None


def folder(name: str) -> str:
    """Round ``name``'s results folder as the page links it (relative to docs/)."""
    return ROUNDS[name].results.relative_to("docs").as_posix()


def _dev_lines(name: str, results: Dict) -> List[str]:
    """A round's dev table (its grid, each setting's dev BLEU, the chosen one) and its choice."""
    choice = results.get("choice")
    lines = [
        f"Dev of `{name}`, `best.pt` kept {ROUNDS[name].keep}. Its decoding is chosen here; every dev entry is of a "
        "seen category:",
        "",
        "| decoding setting | dev BLEU (`--scorer webnlg2017`) | entries | decoding time | chosen |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for g in results["grid"]:
        mark = "yes" if choice and choice["setting"] == g["setting"] else ""
        if g["dev"] is None:
            lines.append(f"| {_describe(g)} | not run yet | | | {mark} |")
        else:
            lines.append(
                f"| {_describe(g)} | {g['dev']['BLEU']:.2f} | {g['dev']['n']:,} | "
                f"{g['decode']['seconds'] / 60:.1f} min | {mark} |"
            )
    done = sum(g["dev"] is not None for g in results["grid"])
    if choice:
        chosen = f"Chosen: {_describe(choice)} ({choice['rule']})."
    else:
        chosen = (
            f"Chosen: not yet ({done} of {len(results['grid'])} settings scored on dev; "
            f"`python -m studies.webnlg2017 choose --round {name}` picks once all are)."
        )
    lines += ["", chosen, ""]
    if results.get("history"):
        lines += [
            f"Training curves of `{name}` (per epoch, from its run's `train.json`; the star: the epoch `best.pt` "
            "holds):",
            "",
            f"![training curves of {name}]({folder(name)}/curves.png)",
            "",
        ]
    return lines


def _test_row(name: str, results: Dict) -> str:
    test, cond = results.get("test"), results.get("conditions")
    variant, seed = (f"`{cond['variant']}`", f", seed {cond['seed']}") if cond else ("plain", "")
    options = "".join(
        f" --{k.replace('_', '-')} {v}"
        for k, v in (trained_over_preset(cond["config"]) if cond else ROUNDS[name].overrides).items()
    )
    ours = f"ours, `{name}`: GraphWriter, {variant} encoder heads, `--preset webnlg2017{options}`{seed}"
    if not test:
        return f"| {ours} | not run yet |" + " |" * (len(SUBSETS) * 3 - 1) + " |"
    s = test["scores"]
    cells = ["n/a" if s[sub][m] is None else f"{s[sub][m]:.2f}" for m in ("BLEU", "METEOR", "TER") for sub in SUBSETS]
    where = folder(name)
    source = (
        f"{_describe(test)}; decoded outputs [{where}/hyp.test.txt]({where}/hyp.test.txt) and "
        f"[{where}/meta.test.tsv]({where}/meta.test.tsv)"
    )
    return f"| {ours} | " + " | ".join(cells) + f" | {source} |"


def trained_over_preset(config: Mapping[str, Any]) -> Dict[str, Any]:
    """The training settings of a run's ``config`` that differ from the ``webnlg2017`` preset (decoding settings and
    ``keep`` left out: the round's row and dev table say those)."""
    preset = WEBNLG_PRESETS["webnlg2017"]
    skip = (*DECODING_FIELDS, "keep")
    return {k: v for k, v in config.items() if k not in skip and preset.get(k) != v}


def _acceptance(name: str, results: Dict) -> str:
    met = acceptance(results)
    if met is None:
        return f"`{name}` not decided, its test set has not been decoded"
    seen = results["test"]["scores"]["seen"]["BLEU"]
    return f"`{name}` **{'met' if met else 'not met'}** ({seen:.2f}, {seen - target():+.2f})"


def _conditions(name: str, results: Dict) -> str:
    cond, test = results.get("conditions"), results.get("test")
    if not cond:
        return f"`{name}`: nothing decoded yet."
    done = [g for g in results["grid"] if g["dev"] is not None]
    decode = f"dev decoded in {sum(g['decode']['seconds'] for g in done) / 60:.1f} min over {len(done)} settings"
    if test:
        decode += f", test in {test['seconds'] / 60:.1f} min on {test['date']}"
    return (
        f"`{name}`: run `{cond['run']}` (`{cond['variant']}`, seed {cond['seed']}, {cond['epochs_trained']} of "
        f"{cond['config']['epochs']} epochs trained, `best.pt` from epoch {cond['best_epoch']}, dev loss "
        f"{cond['best_dev_loss']:.3f}); {decode}; torch {cond['torch']}, {cond['machine']} {cond['device']}, "
        f"{cond['threads']} thread(s)."
    )


def render_results(rounds: Dict[str, Dict]) -> str:
    """The block: each round's dev table, then one test table (a row per round, then the published rows), the
    acceptance per round and each round's conditions. ``rounds``: results by round name (:data:`ROUNDS`' order)."""
    lines = [line for name, results in rounds.items() for line in _dev_lines(name, results)]
    columns = [f"{m} {s}" for m in ("BLEU", "METEOR", "TER") for s in SUBSETS]
    lines += [
        "Test (each round's test set decoded once, with its chosen setting), beside the published rows of the table "
        "above:",
        "",
        "| system | " + " | ".join(columns) + " | source |",
        "| --- |" + " ---: |" * len(columns) + " --- |",
        *(_test_row(name, results) for name, results in rounds.items()),
    ]
    for system, scores, source in PUBLISHED["webnlg"]:
        cells = [f"{scores[c]:g}" if c in scores else "-" for c in columns]
        lines.append(f"| {system} | " + " | ".join(cells) + f" | {source} |")
    verdicts = "; ".join(_acceptance(name, results) for name, results in rounds.items())
    folders = [folder(name) for name in rounds]
    files = " and ".join(f"[{f}/results.json]({f}/results.json)" for f in folders)
    lines += [
        "",
        f"Acceptance (issue 37): our seen-category test BLEU at least {TARGET}'s {target():g}: {verdicts}.",
        "",
        f"Generated by `python -m studies.webnlg2017 report --round NAME` from {files}:",
        "",
        *(f"- {_conditions(name, results)}" for name, results in rounds.items()),
    ]
    return "\n".join(lines)


BLOCKS = {BLOCK: render_results}
render = renderer(BLOCKS)  # render(page_text, rounds): the page with its generated block rendered from every round


def report(name: str = FIRST, page: Path = PAGE, run: Optional[Path] = None, results: Optional[Path] = None) -> Dict:
    """Write round ``name``'s ``results.json`` (in ``results``, default the round's folder) from :func:`collect` of
    its ``run`` (default the round's), and render the page's block from it and the other rounds' committed results;
    the page is rendered first, so a page without the block writes nothing."""
    r = ROUNDS[name]
    results = r.results if results is None else results
    data = collect(r.run if run is None else run, results, r.grid)
    text = render_page(page, {**committed(), name: data}, render)
    write_json(results / "results.json", data)
    if data.get("history"):
        keep = (data["conditions"]["config"] or {}).get("keep", "dev_loss")
        plot_curves(data["history"], results / "curves.png", keep=keep, name=name)
    page.write_text(text, encoding="utf-8")
    print(f"wrote {page} and {results / 'results.json'}")
    return data


def read_meta(path: Path) -> List[Dict]:
    """The rows of ``meta.test.tsv``: ``{"eid", "category", "seen"}`` per line of ``hyp.test.txt``."""
    lines = read_lines(path)
    if not lines or lines[0] != META_HEADER:
        raise SystemExit(f"{path}: expected the header {META_HEADER!r}")
    rows = []
    for k, line in enumerate(lines[1:], start=1):
        number, eid, category, subset = line.split("\t")
        if int(number) != k or subset not in ("seen", "unseen"):
            raise SystemExit(f"{path}, line {k + 1}: expected line {k} and seen or unseen, got {line!r}")
        rows.append({"eid": eid, "category": category, "seen": subset == "seen"})
    return rows


def rescore(results: Path = RESULTS, root=None, meteor: str = "auto", export: Optional[Path] = None) -> Dict:
    """The committed ``hyp.test.txt`` scored again with the challenge's scorer (seen, unseen, all): each line's
    references are those of its ``eid`` in the WebNLG test set (``root``), whose category must be the one
    ``meta.test.tsv`` names. ``export``: also write ``hyp.SUBSET.txt`` and ``ref{1,2,3}.SUBSET.txt`` (the first
    three references, a blank line where an entry has fewer) per subset there, for ``graph-rma score``."""
    from graph_rma.data.webnlg import load_webnlg
    from graph_rma.tasks import webnlg as task

    if not (results / "hyp.test.txt").is_file():
        raise SystemExit(f"{results / 'hyp.test.txt'}: no test outputs yet (`python -m studies.webnlg2017 test`)")
    hyps = read_lines(results / "hyp.test.txt")
    meta = read_meta(results / "meta.test.tsv")
    if len(hyps) != len(meta):
        raise SystemExit(f"{results}: hyp.test.txt has {len(hyps)} lines, meta.test.tsv {len(meta)} rows")
    entries = {e.eid: e for e in load_webnlg("test", root)}
    refs = []
    for k, m in enumerate(meta, start=1):
        e = entries.get(m["eid"])
        if e is None or e.category != m["category"] or e.seen != m["seen"]:
            raise SystemExit(f"meta.test.tsv line {k}: no test entry {m['eid']} of category {m['category']}")
        refs.append({"references": e.references, "entities": e.entities, "seen": m["seen"]})
    scores = task.score(hyps, refs, meteor=meteor, scorer=SCORER)
    if export is not None:
        export.mkdir(parents=True, exist_ok=True)
        for subset in SUBSETS:
            keep = [i for i, r in enumerate(refs) if subset == "all" or r["seen"] == (subset == "seen")]
            atomic_write_text(export / f"hyp.{subset}.txt", "".join(hyps[i] + "\n" for i in keep))
            for j in range(3):
                lines = [refs[i]["references"][j] if j < len(refs[i]["references"]) else "" for i in keep]
                atomic_write_text(export / f"ref{j + 1}.{subset}.txt", "".join(x + "\n" for x in lines))
    return scores


def _compare(scores: Dict, committed: Dict) -> List[str]:
    """The scores (of :func:`rescore`) that differ from the committed results' test scores."""
    test = (committed or {}).get("test")
    if not test:
        return ["the committed results have no test scores"]
    diffs = []
    for subset in SUBSETS:
        for m in ("BLEU", "METEOR", "TER", "n"):
            new, old = _rounded(scores[subset][m]), test["scores"][subset][m]
            if new is not None and new != old:
                diffs.append(f"{subset} {m}: {new} (committed {old})")
    return diffs


def main(argv=None) -> int:
    one_line_errors()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("step", choices=["dev", "choose", "test", "report", "rescore"])
    p.add_argument(
        "--round",
        default=FIRST,
        choices=list(ROUNDS),
        help=f"the round: its run, results folder and decoding grid (default: {FIRST}; the module lists them)",
    )
    p.add_argument("--run", type=out_dir, default=None, help="the finished training run (default: the round's)")
    p.add_argument("--results", type=out_dir, default=None, help="the committed results folder (default: the round's)")
    p.add_argument("--page", type=page_file, default=PAGE, help=f"report: the page (default: {PAGE})")
    p.add_argument("--root", default=None, help="WebNLG folder (default: $GRAPH_RMA_DATA/webnlg)")
    p.add_argument(
        "--meteor",
        default="auto",
        choices=[m for m in METEOR_CHOICES if m != "nltk"],
        help="METEOR 1.5: auto (when java is found), meteor-1.5, none",
    )
    p.add_argument("--threads", type=positive_int, default=1, help="dev, test: torch threads (default: 1)")
    p.add_argument(
        "--device", type=device, default=None, help="dev, test: cpu or cuda[:N] (default: cuda when available)"
    )
    p.add_argument("--export", type=out_dir, default=None, help="rescore: write per-subset files for graph-rma score")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    a = p.parse_args(argv)
    if a.step == "report":  # argparse leaves a default unchecked: a missing page is one line, and nothing is written
        try:
            page_file(str(a.page))
        except argparse.ArgumentTypeError as exc:
            p.error(f"argument --page: {exc}")
    r = ROUNDS[a.round]
    run, results = a.run or r.run, a.results or r.results
    decode = dict(root=a.root, meteor=a.meteor, threads=a.threads, device=a.device, progress=not a.quiet)
    if a.step == "dev":
        dev(run, settings=r.grid, **decode)
    elif a.step == "choose":
        choose(run, r.grid)
    elif a.step == "test":
        decode_test(run, results, **decode)
    elif a.step == "report":
        report(a.round, a.page, run, results)
    else:
        scores = rescore(results, a.root, a.meteor, a.export)
        for subset in SUBSETS:
            print(f"{subset:<7} {_scores_line(scores[subset])}")
        diffs = _compare(scores, _read(results / "results.json"))
        print("differs from results.json: " + "; ".join(diffs) if diffs else "the same as results.json")
        if a.export is not None:
            refs = " ".join(f"--ref {a.export}/ref{j}.SUBSET.txt" for j in (1, 2, 3))
            print(
                f"per subset (SUBSET: seen, unseen, all): graph-rma score --scorer webnlg2017 "
                f"--hyp {a.export}/hyp.SUBSET.txt {refs}"
            )
        return 1 if diffs else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
