"""Repulsive encoder heads against the reproduced plain generator on WebNLG 2017 (issue 37, item 4; docs/webnlg.md,
"Repulsion on the reproduced baseline").

    python -m studies.webnlg2017_evidence plan                 # what is done, what is left, and the commands
    python -m studies.webnlg2017_evidence select [ARM INDEX]   # the selection runs (all, or one), resumable
    python -m studies.webnlg2017_evidence choose               # per arm, the lowest dev loss -> OUT/choice.json
    python -m studies.webnlg2017_evidence decoding             # DECODE_GRID on the baseline's dev -> OUT/decoding.json
    python -m studies.webnlg2017_evidence final ARM SEED       # one final run, resumable
    python -m studies.webnlg2017_evidence test ARM SEED        # its test set decoded once, outputs committed
    python -m studies.webnlg2017_evidence report               # -> docs/webnlg2017/evidence/results.json -> the
                                                               #    page's summary and evidence blocks, and
                                                               #    curves.png: the finals' dev BLEU per epoch

Every run is ``graph-rma webnlg train --preset webnlg2017`` in a child process (``OMP_NUM_THREADS=1`` unless set),
so a stopped run resumes from its ``checkpoint.pt`` when the same step is run again; two steps can run at once.
What ``report`` committed (finished selection runs, the choice, the decoding, tested finals) stands for the run
folder on a machine without it: a fresh clone goes on with the finals left.

The rules, written before any run of this study:

* ARMS: the plain arm tries the preset and more dropout (0.4 instead of 0.3); the repulsive arm tries SVGD over
  every encoder layer's heads at two strengths (``svgd:alpha=0.1``, the package's earlier generator setting, and
  ``svgd:alpha=0.01``). Two settings each: an equal tuning budget.
* Selection: each setting trains SELECT_EPOCHS epochs with seed SELECT_SEED (not a final seed); within each arm the
  setting with the lowest dev loss (teacher-forced, the quantity ``best.pt`` is kept by) wins, a tie going to the
  earlier setting. No BLEU and no test file is read.
* Finals: each arm's chosen setting with seeds FINAL_SEEDS, FINAL_EPOCHS epochs each (the baseline's learning rate
  reached its floor, and its dev loss its lowest, well before that), every one a fresh run, ``best.pt`` kept by dev
  BLEU (``--keep dev_bleu``, dev decoded after every epoch with the decoding below; :func:`keeping`).
* Decoding: every final run's test set is decoded once with one setting, the same for both arms, not re-chosen per
  run: the setting of DECODE_GRID with the highest BLEU on all dev entries of the baseline run
  (``runs/webnlg2017/ma-s0``; ties: the earlier setting), written to ``OUT/decoding.json``.
* Report: per arm and subset (seen, unseen, all), BLEU, METEOR and TER as mean and std over the seeds; SVGD minus
  plain paired by seed, mean difference with its standard error, and wins/ties/losses on BLEU. Every setting is
  reported, the selection runs included.

Amended on 2026-11-26, after the selection had started and before any final run or any decoding of this study
(the rules above are the amended ones). Before: decoding held to the baseline's own choice from its GRID (no
blocking of repeated n-grams), and the plain arm's seed-0 final was the baseline run itself when the preset won.
Why: its diagnosis (docs/webnlg.md, "Why the first rounds fell short", on dev) found looping outputs that blocking
repeated n-grams cures, so DECODE_GRID adds blocking to the baseline's GRID; and the baseline run's test set had
already been decoded with the old setting, so no final reuses it: every final's test set is decoded exactly once,
under this rule. The grid was written after the baseline's test score and its diagnosis were read (the test
outputs of the runs it is applied to have not been decoded).

Amended again on 2026-11-26, while the selection ran, before any final run. Before: finals kept ``best.pt`` by dev
loss (the preset's default). Why: its diagnosis (docs/webnlg.md, "Why the first rounds fell short", on dev only) found
that keeping by dev loss stops too early: decoded alike, the baseline run's last epoch scores a higher dev BLEU than
its epoch of lowest dev loss. The plain generator's next round (``v3-s0``) applies the same rule. It is the same for
both arms; selection stays by dev loss (no decoding during selection).

Amended a third time on 2026-11-28, after the seed-0 final of each arm and before any other final. Before: every
final trained ``v3-s0``'s recipe (the preset, ``best.pt`` kept by dev BLEU). Now the finals train the recipe of the
stronger plain round, judged on dev (:func:`recipe`): of RECIPES, the round whose chosen decoding has the highest dev
BLEU (a tie: the earlier round); no test number decides it, and no final runs before every round of RECIPES has its
decoding chosen. On ``v4-s0``'s recipe both arms add its label smoothing (0.1), and every final keeps ``best.pt`` by
dev BLEU decoded with ``v4-s0``'s chosen decoding, which also decodes its test set once; its run folders are
``OUT/final-v4-s0/``, its outputs ``RESULTS/v4-s0/``. The selection (by dev loss, without smoothing) stands, and the
finals of another recipe are reported apart, never pooled. Why: item 4 of issue 37 asks for the evidence on the
reproduced plain generator, which is the strongest plain round (``v4-s0`` adds CGE-LW's label smoothing to
``v3-s0``), and the two rounds are compared on dev only, as each round's decoding is chosen.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from graph_rma.argtypes import out_dir
from graph_rma.engine import mean_std, one_line_errors, paired_comparison, write_json
from graph_rma.tasks.curves import plot_runs
from graph_rma.tasks.defaults import METEOR_CHOICES
from studies import webnlg2017 as baseline
from studies.baselines import settings_name
from studies.pages import mean_std_cell as _ms
from studies.pages import page_file, paired_cell, paired_verdict, publish, renderer, run_child

ARMS: Dict[str, List[Tuple[str, Dict]]] = {
    "plain": [("ma", {}), ("ma", {"dropout": 0.4})],
    "svgd": [("svgd:alpha=0.1", {}), ("svgd:alpha=0.01", {})],
}
#: The decoding settings the baseline run tries on dev for every final (an earlier entry wins a tie): the
#: baseline's GRID, then beam 5 with repeated 3-grams or 4-grams blocked at three length penalties (defined once, in
#: :mod:`studies.webnlg2017`, whose next round chooses from the same grid).
DECODE_GRID = baseline.DECODE_GRID
SELECT_SEED = 100
SELECT_EPOCHS = 10
FINAL_SEEDS = (0, 1, 2)
FINAL_EPOCHS = 20
OUT = Path("runs/webnlg2017/evidence")
RESULTS = Path("docs/webnlg2017/evidence")
PAGE = baseline.PAGE
CURVES = (RESULTS / "curves.png").relative_to("docs").as_posix()  # the finals' dev BLEU per epoch, as linked
BLOCK = "webnlg2017-evidence"
SUMMARY = "webnlg2017-summary"  # the page's first screen
METRICS = ("BLEU", "METEOR", "TER")


#: The plain rounds whose recipe the finals may train (:func:`recipe`), in the order they were run; the first is
#: the recipe of the finals trained before the third amendment (their folders and outputs keep their old places).
RECIPES = ("v3-s0", "v4-s0")

label = settings_name  # ``ma``, ``ma [dropout=0.4]``: a setting as the page names it


def _round_choice(name: str) -> Optional[Dict]:
    """The committed decoding choice of the plain round ``name`` (its ``results.json``), ``None`` before it."""
    return baseline._read(baseline.ROUNDS[name].results / "results.json").get("choice") or None


def recipe_or_none() -> Optional[str]:
    """The round of RECIPES whose recipe the finals train: the highest dev BLEU of its chosen decoding (a tie: the
    earlier round); ``None`` while a round of RECIPES has no decoding chosen."""
    choices = [_round_choice(name) for name in RECIPES]
    if any(c is None for c in choices):
        return None
    return RECIPES[max(range(len(RECIPES)), key=lambda i: (choices[i]["dev_BLEU"], -i))]


def recipe() -> str:
    """:func:`recipe_or_none`, or ``SystemExit`` naming the round whose decoding is not chosen yet."""
    name = recipe_or_none()
    if name is None:
        waiting = [r for r in RECIPES if _round_choice(r) is None]
        raise SystemExit(
            f"the finals' recipe is not decided: {', '.join(waiting)} has no decoding chosen yet (python -m "
            f"studies.webnlg2017 dev, choose and report --round {waiting[0]}, after its training)"
        )
    return name


def _setting(arm: str, index: int) -> Tuple[str, Dict]:
    if arm not in ARMS:
        raise SystemExit(f"arm: unknown arm {arm!r}; choose from {', '.join(ARMS)}")
    if not 0 <= index < len(ARMS[arm]):
        raise SystemExit(f"{arm}: no setting {index}; its settings are 0 to {len(ARMS[arm]) - 1}")
    return ARMS[arm][index]


def select_dir(out: Path, arm: str, index: int) -> Path:
    return out / "select" / f"{arm}-{index}"


def final_dir(out: Path, arm: str, seed: int, recipe: str = RECIPES[0]) -> Path:
    return out / ("final" if recipe == RECIPES[0] else f"final-{recipe}") / f"{arm}-s{seed}"


def final_results(results: Path, arm: str, seed: int, recipe: str = RECIPES[0]) -> Path:
    """Where a final run's test outputs are committed."""
    return (results if recipe == RECIPES[0] else results / recipe) / f"{arm}-s{seed}"


def train_command(spec: str, overrides: Dict, seed: int, epochs: int, folder: Path, root=None, quiet=False):
    """The ``graph-rma webnlg train`` command of one run (its options from the preset plus ``overrides``)."""
    cmd = [sys.executable, "-m", "graph_rma.cli", "webnlg", "train", "--preset", "webnlg2017", "--variant", spec]
    cmd += ["--seed", str(seed), "--epochs", str(epochs), "--out", str(folder), "--save-every", "100"]
    for key, value in sorted(overrides.items()):
        cmd += [f"--{key.replace('_', '-')}", str(value)]
    if root is not None:
        cmd += ["--root", str(root)]
    return cmd + (["--quiet"] if quiet else [])


def _train(cmd: List[str], run: Path) -> None:
    if baseline.trained(run) is not None:
        print(f"{run}: trained", file=sys.stderr)
        return
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    print(f"{run}: training ({' '.join(cmd[2:])})", file=sys.stderr, flush=True)
    run_child(cmd, env=env)


def select(out: Path, only: Optional[Tuple[str, int]] = None, root=None, quiet=False) -> None:
    """Train the selection runs (all, or ``only=(arm, index)``), each resumable."""
    todo = [only] if only else [(arm, i) for arm in ARMS for i in range(len(ARMS[arm]))]
    for arm, index in todo:
        spec, overrides = _setting(arm, index)
        folder = select_dir(out, arm, index)
        _train(train_command(spec, overrides, SELECT_SEED, SELECT_EPOCHS, folder, root, quiet), folder)


def lowest(history: Sequence[Dict]) -> Dict:
    """The epoch with the lowest dev loss (a tie: the earlier)."""
    return min(history, key=lambda h: (h["dev_loss"], h["epoch"]))


def pick(losses: Sequence[float]) -> int:
    """The index of the lowest dev loss; a tie goes to the earlier setting."""
    return min(range(len(losses)), key=lambda i: (losses[i], i))


def choose(out: Path) -> Dict:
    """Write and return ``OUT/choice.json``: per arm the setting whose selection run reached the lowest dev loss.
    Refuses (``SystemExit``) while a selection run is unfinished; reads no BLEU and no test file."""
    missing = [f"{a} {i}" for a in ARMS for i in range(len(ARMS[a])) if baseline.trained(select_dir(out, a, i)) is None]
    if missing:
        raise SystemExit(
            f"selection runs not finished: {', '.join(missing)} (python -m studies.webnlg2017_evidence "
            "select ARM INDEX)"
        )
    choice: Dict = {"rule": "per arm, the lowest dev loss of its selection runs; a tie: the earlier setting"}
    for arm, settings in ARMS.items():
        best = [lowest(baseline.trained(select_dir(out, arm, i))) for i in range(len(settings))]
        k = pick([b["dev_loss"] for b in best])
        choice[arm] = {
            "index": k,
            "setting": label(*settings[k]),
            "dev_loss": best[k]["dev_loss"],
            "epoch": best[k]["epoch"],
        }
    choice["date"] = baseline._now()
    write_json(out / "choice.json", choice)
    for arm in ARMS:
        print(f"{arm}: {choice[arm]['setting']} (dev loss {choice[arm]['dev_loss']:.4f})")
    return choice


def _committed(results: Path) -> Dict:
    """The study's committed ``results/results.json`` (``{}`` before any report)."""
    return baseline._read(results / "results.json") or {}


def study_choice(out: Path, results: Path = RESULTS) -> Optional[Dict]:
    """``OUT/choice.json``, else the committed choice (a fresh clone continues the study); ``None`` before either."""
    return baseline._read(out / "choice.json") or _committed(results).get("choice")


def chosen(out: Path, arm: str, results: Path = RESULTS) -> int:
    choice = study_choice(out, results)
    if not choice:
        raise SystemExit("no setting chosen: run `python -m studies.webnlg2017_evidence choose` first")
    if arm not in ARMS:
        raise SystemExit(f"arm: unknown arm {arm!r}; choose from {', '.join(ARMS)}")
    return choice[arm]["index"]


def _decided(out: Path, results: Path) -> Optional[Dict]:
    """``OUT/decoding.json``, else the committed decoding (its setting's options from DECODE_GRID), else None."""
    choice = baseline._read(out / "decoding.json")
    if choice:
        return choice
    kept = _committed(results).get("decoding")
    if not kept:
        return None
    grid = {baseline.setting_name(g): g for g in DECODE_GRID}
    return {**kept, **grid[kept["setting"]]}


def study_decoding(out: Path, results: Path = RESULTS, recipe: str = RECIPES[0]) -> Dict:
    """The one decoding of every final of ``recipe``: on the first recipe :func:`_decided` (the run folder's, else
    the committed one), on another that round's own chosen decoding; ``SystemExit`` before it is chosen."""
    if recipe != RECIPES[0]:
        choice = _round_choice(recipe)
        if not choice:
            raise SystemExit(f"{recipe}: its decoding is not chosen yet (python -m studies.webnlg2017 choose)")
        return choice
    choice = _decided(out, results)
    if not choice:
        raise SystemExit(
            f"{out / 'decoding.json'}: the decoding is not chosen yet (python -m studies.webnlg2017_evidence decoding)"
        )
    return choice


def keeping(out: Path, results: Path = RESULTS, recipe: str = RECIPES[0]) -> Dict:
    """The options every final of ``recipe`` trains with beyond its arm's setting: the round's settings over the
    preset (``v4-s0``: label smoothing), ``best.pt`` kept by dev BLEU, dev decoded after every epoch with the
    recipe's decoding (:func:`study_decoding`)."""
    choice = study_decoding(out, results, recipe)
    options = {"keep": "dev_bleu", "beam": choice["beam"], "length_penalty": choice["length_penalty"]}
    return {**baseline.ROUNDS[recipe].overrides, **options, **baseline.extra_decoding(choice)}


def final(out: Path, arm: str, seed: int, root=None, quiet=False, results: Path = RESULTS) -> Path:
    """Train one final run on :func:`recipe` (the arm's chosen setting, ``seed``, the options of :func:`keeping`),
    resumable; the choice and the decoding are the run folder's, else the committed ones (``results/results.json``).
    ``SystemExit`` while the recipe is not decided."""
    if seed not in FINAL_SEEDS:
        raise SystemExit(f"seed: the final seeds are {', '.join(map(str, FINAL_SEEDS))}, not {seed}")
    spec, overrides = ARMS[arm][chosen(out, arm, results)]
    name = recipe()
    folder = final_dir(out, arm, seed, name)
    tested = (name, arm, seed) in _tested(_committed(results))
    if tested and not folder.is_dir():
        raise SystemExit(
            f"{arm} seed {seed}: its test scores are committed ({results / 'results.json'}); not trained again"
        )
    options = {**overrides, **keeping(out, results, name)}
    _train(train_command(spec, options, seed, FINAL_EPOCHS, folder, root, quiet), folder)
    return folder


def _recipe_of(final: Dict) -> str:
    """The recipe a final entry of the results was trained on (entries from before the third amendment: the first)."""
    return final.get("recipe", RECIPES[0])


def _tested(committed: Dict) -> set:
    """(recipe, arm, seed) of every final whose test scores are committed."""
    return {(_recipe_of(r), r["arm"], r["seed"]) for r in committed.get("finals", [])}


def decoding(out: Path, base: Path = baseline.RUN, **decode) -> Dict:
    """Decode and score the baseline run's dev split with every setting of DECODE_GRID not yet scored (under
    ``BASE/decode/``, resumable), then write and return ``OUT/decoding.json``: the setting with the highest BLEU on
    all dev entries. Reads no test file."""
    baseline.dev(base, settings=DECODE_GRID, **decode)
    return baseline.choose(base, DECODE_GRID, to=out / "decoding.json")


def decode_final(out: Path, arm: str, seed: int, results: Path = RESULTS, **decode) -> Dict:
    """Decode a final run of :func:`recipe` once with its decoding (:func:`study_decoding`), score it and copy its
    outputs to :func:`final_results` (:func:`studies.webnlg2017.decode_test`, which refuses a second setting)."""
    name = recipe()
    run = final_dir(out, arm, seed, name)
    best = baseline.finished(run)
    choice = study_decoding(out, results, name)
    keys = ("setting", "beam", "length_penalty")
    record = baseline._read(run / "decode" / "choice.json")
    if record and record["setting"] != choice["setting"]:
        raise SystemExit(f"{run / 'decode' / 'choice.json'}: {record['setting']}, not the study's {choice['setting']}")
    if not record:
        write_json(
            run / "decode" / "choice.json",
            {
                **{k: choice.get(k, 0) for k in keys},
                **baseline.every_decoding_option(choice),
                "dev_BLEU": None,
                "rule": f"the decoding of the finals' recipe ({name}), chosen on dev, the same for every final run",
                "checkpoint": baseline._checkpoint(best),
                "date": baseline._now(),
            },
        )
    return baseline.decode_test(run, final_results(results, arm, seed, name), **decode)


def _selection(out: Path, committed: Dict) -> List[Dict]:
    kept = {(r["arm"], r["index"]): r for r in committed.get("selection", [])}
    rows = []
    for arm, settings in ARMS.items():
        for i, (spec, overrides) in enumerate(settings):
            history = baseline.trained(select_dir(out, arm, i))
            if history is None:
                rows.append(
                    kept.get((arm, i)) or {"arm": arm, "index": i, "setting": label(spec, overrides), "dev_loss": None}
                )
                continue
            best = lowest(history)
            # the median: robust to the load of a shared machine
            seconds = _timed(history) or [h["seconds"] for h in history]
            rows.append(
                {
                    "arm": arm,
                    "index": i,
                    "setting": label(spec, overrides),
                    "dev_loss": round(best["dev_loss"], 4),
                    "epoch": best["epoch"],
                    "epochs": len(history),
                    "seconds_per_epoch": round(statistics.median(seconds), 1),
                }
            )
    return rows


def collect(out: Path = OUT, results: Path = RESULTS, base: Path = baseline.RUN) -> Dict:
    """The study's results: the selection runs, the choice and every final run's test scores. What a machine does
    not hold (a run folder, a decode) keeps its entry of the committed ``results/results.json``."""
    committed = baseline._read(results / "results.json")
    data: Dict = {
        "selection": _selection(out, committed),
        "choice": study_choice(out, results),
        "decoding": _decoding(baseline._read(out / "decoding.json"), base) or committed.get("decoding"),
        "recipes": {name: (_round_choice(name) or {}).get("dev_BLEU") for name in RECIPES},
        "recipe": recipe_or_none(),
        "finals": [],
    }
    kept = {(_recipe_of(r), r["arm"], r["seed"]): r for r in committed.get("finals", [])}
    for name in RECIPES:
        for arm in ARMS:
            if data["choice"]:
                data["finals"] += _collect_finals(out, results, name, arm, data["choice"][arm]["index"], kept)
    return data


def _collect_finals(out: Path, results: Path, name: str, arm: str, index: int, kept: Dict) -> List[Dict]:
    """The final runs of one recipe and arm with test scores: from their run folders, else as committed; a final
    whose test set was decoded with another setting than the recipe's is left out (said on stderr)."""
    finals = []
    try:
        want = study_decoding(out, results, name).get("setting")
    except SystemExit:
        want = None
    for seed in FINAL_SEEDS:
        run = final_dir(out, arm, seed, name)
        folder = run / "decode" / "test"
        record = baseline._read(folder / "decoded.test.json")
        scores = baseline._read(folder / f"metrics.test.{baseline.SCORER}.json")
        if not (record and scores):
            entry = kept.get((name, arm, seed))
            if entry and _decoded_as(entry["decoding"], want, f"{name} {arm} seed {seed}"):
                finals.append({"recipe": name, **entry})
            continue
        if not _decoded_as(record["setting"], want, str(folder)):
            continue
        history = baseline._read(run / "train.json").get("history", [])
        where = final_results(results, arm, seed, name)
        finals.append(
            {
                "recipe": name,
                "arm": arm,
                "seed": seed,
                "setting": label(*ARMS[arm][index]),
                "run": str(run),
                "epochs_trained": len(history),
                "best_epoch": record["checkpoint"]["epoch"],
                "decoding": record["setting"],
                "scores": {s: baseline._rounded({m: scores[s][m] for m in (*METRICS, "n")}) for s in baseline.SUBSETS},
                "hyp": str(where / "hyp.test.txt"),
                "history": baseline.curve_history(history),  # the picture's numbers
                "threads": record["threads"],
                "torch": record["torch"],
                "date": record["date"],
            }
        )
    return finals


def _decoded_as(setting: str, want: Optional[str], what: str) -> bool:
    """Whether a final's test decode used its recipe's decoding ``want`` (True while none is chosen)."""
    if want is None or setting == want:
        return True
    print(f"{what}: the test set was decoded with {setting}, not the recipe's {want}; left out", file=sys.stderr)
    return False


def _decoding(choice: Dict, base: Path) -> Optional[Dict]:
    """What the report keeps of ``OUT/decoding.json``, with the dev BLEU of every setting of DECODE_GRID (from the
    baseline run's decodes)."""
    if not choice:
        return None
    rows = baseline.dev_scores(base, DECODE_GRID)
    grid = [
        {"setting": baseline.setting_name(g), "BLEU": None if r is None else round(r["metrics"]["all"]["BLEU"], 4)}
        for g, r in zip(DECODE_GRID, rows)
    ]
    return {**{k: choice[k] for k in ("setting", "dev_BLEU", "rule")}, "grid": grid}


def not_run() -> Dict:
    return {
        "selection": _selection(Path("/nonexistent"), {}),
        "choice": None,
        "decoding": None,
        "recipes": {},
        "recipe": None,
        "finals": [],
    }


def main_recipe(data: Dict) -> str:
    """The recipe whose finals are the evidence: the decided one (``data["recipe"]``), else the first of RECIPES."""
    return data.get("recipe") or RECIPES[0]


def per_arm(data: Dict, subset: str, metric: str, recipe: Optional[str] = None) -> Dict[str, Dict[int, float]]:
    """Per arm, ``{seed: value}`` of ``metric`` on ``subset`` over the final runs in ``data`` of ``recipe``
    (default: :func:`main_recipe`; the finals of another recipe are never pooled with them)."""
    out: Dict[str, Dict[int, float]] = {arm: {} for arm in ARMS}
    name = recipe or main_recipe(data)
    for f in (f for f in data["finals"] if _recipe_of(f) == name):
        value = f["scores"][subset][metric]
        if value is not None:
            out[f["arm"]][f["seed"]] = value
    return out


def render_evidence(data: Dict) -> str:
    choice = data.get("choice")
    lines = [
        f"Selection (seed {SELECT_SEED}, {SELECT_EPOCHS} epochs; within each arm the lowest dev loss wins):",
        "",
        "| arm | setting | lowest dev loss (epoch) | seconds per epoch (median) | chosen |",
        "| --- | --- | ---: | ---: | --- |",
    ]
    for r in data["selection"]:
        mark = "yes" if choice and choice[r["arm"]]["index"] == r["index"] else ""
        if r["dev_loss"] is None:
            lines.append(f"| {r['arm']} | `{r['setting']}` | not run yet | | |")
        else:
            lines.append(
                f"| {r['arm']} | `{r['setting']}` | {r['dev_loss']:.4f} ({r['epoch']}) | "
                f"{r['seconds_per_epoch']:.0f} | {mark} |"
            )
    dec = data.get("decoding")
    lines += [
        "",
        f"Decoding of the finals on `{RECIPES[0]}`'s recipe, one setting for every final, chosen on the "
        "baseline run's dev (the highest BLEU):",
        "",
    ]
    if dec:
        lines += ["| decoding setting | dev BLEU | chosen |", "| --- | ---: | --- |"]
        for g in dec["grid"]:
            bleu = "–" if g["BLEU"] is None else f"{g['BLEU']:.2f}"
            lines.append(f"| `{g['setting']}` | {bleu} | {'yes' if g['setting'] == dec['setting'] else ''} |")
    else:
        grid = ", ".join(f"`{baseline.setting_name(g)}`" for g in DECODE_GRID)
        lines.append(f"Not chosen yet (the grid: {grid}).")
    lines += ["", _recipe_line(data)]
    main = main_recipe(data)
    lines += _finals_lines(data, main)
    for name in RECIPES:
        if name != main and any(_recipe_of(f) == name for f in data["finals"]):
            lines += ["", f"On `{name}`'s recipe, apart (not the finals' recipe; never pooled with them):"]
            lines += _finals_lines(data, name)
    lines.append("")
    if any(f.get("history") for f in data["finals"]):
        lines += [
            "Dev BLEU per epoch of every final run scored so far (dev decoded with the study's setting; `best.pt` is "
            "each run's highest):",
            "",
            f"![dev BLEU per epoch of the final runs]({CURVES})",
            "",
        ]
    lines.append(
        "Generated by `python -m studies.webnlg2017_evidence report` from "
        "[webnlg2017/evidence/results.json](webnlg2017/evidence/results.json)."
    )
    return "\n".join(lines)


def _recipe_line(data: Dict) -> str:
    """Which round's recipe the finals train, from the rounds' dev BLEU (:func:`recipe_or_none`)."""
    dev = data.get("recipes") or {}
    scores = [f"`{n}` {dev[n]:.2f}" if dev.get(n) is not None else f"`{n}` not chosen yet" for n in RECIPES]
    head = "The finals' recipe, the plain round whose chosen decoding has the higher dev BLEU (" + ", ".join(scores)
    name = data.get("recipe")
    if name is None:
        return head + "): not decided; no final trains until it is."
    extra = baseline.ROUNDS[name].overrides
    added = ", ".join(f"{k.replace('_', ' ')} {v:g}" for k, v in extra.items())
    how = f"both arms add {added}, and " if added else ""
    return head + f"): `{name}`; {how}every final is decoded with `{name}`'s chosen decoding."


def _finals_lines(data: Dict, name: str) -> List[str]:
    """The finals table, the plain arm against the target, the paired table and the verdict, for recipe ``name``."""
    choice = data.get("choice")
    seeds = ", ".join(map(str, FINAL_SEEDS))
    lines = [
        "",
        f"Finals on `{name}`'s recipe (seeds {seeds}; the test set decoded once per run; mean ± std over the seeds "
        "done):",
        "",
        "| arm | setting | seeds done | BLEU seen | BLEU unseen | BLEU all | METEOR all | TER all |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for arm in ARMS:
        if not choice:
            lines.append(f"| {arm} | not chosen yet | 0 | | | | | |")
            continue
        cells = [
            _ms(per_arm(data, s, m, name)[arm].values())
            for m, s in (("BLEU", "seen"), ("BLEU", "unseen"), ("BLEU", "all"), ("METEOR", "all"), ("TER", "all"))
        ]
        done = len(per_arm(data, "all", "BLEU", name)[arm])
        lines.append(
            f"| {arm} | `{choice[arm]['setting']}` | {done} of {len(FINAL_SEEDS)} | " + " | ".join(cells) + " |"
        )
    lines += ["", _plain_against_target(data, name)] if choice else []
    lines += [
        "",
        "SVGD minus plain, paired by seed (mean difference ± standard error; W/T/L: seeds where SVGD is "
        "higher / equal / lower; for TER lower is better):",
        "",
        "| subset | BLEU | W/T/L (BLEU) | METEOR | TER |",
        "| --- | ---: | --- | ---: | ---: |",
    ]
    paired = paired_scores(data, name)
    for subset in baseline.SUBSETS:
        row = paired[subset]
        b = row["BLEU"]

        def cell(pc):
            if pc["n"] == 0:
                return "–"
            return f"{pc['mean']:+.2f} ± {pc['se']:.2f}" if pc["n"] > 1 else f"{pc['mean']:+.2f} (one seed)"

        wtl = f"{b['wins']}/{b['ties']}/{b['losses']}" if b["n"] else "–"
        lines.append(f"| {subset} | {cell(b)} | {wtl} | {cell(row['METEOR'])} | {cell(row['TER'])} |")
    n, main = paired["all"]["BLEU"]["n"], main_recipe(data)
    if name != main and n < len(FINAL_SEEDS):  # a recipe the finals left: its seeds are not trained any further
        return lines + ["", f"Stopped at {n} of {len(FINAL_SEEDS)} seeds paired: the finals train `{main}`'s recipe."]
    return lines + ["", _verdict_line(paired)]


def paired_scores(data: Dict, recipe: Optional[str] = None) -> Dict[str, Dict[str, Dict]]:
    """Per subset and metric of METRICS, SVGD minus plain paired by seed
    (:func:`graph_rma.engine.paired_comparison`) over the finals of ``recipe`` (default :func:`main_recipe`)."""
    out: Dict[str, Dict[str, Dict]] = {}
    for subset in baseline.SUBSETS:
        out[subset] = {}
        for m in METRICS:
            arms = per_arm(data, subset, m, recipe)
            out[subset][m] = paired_comparison(arms["plain"], arms["svgd"])
    return out


def _verdict_line(paired: Dict[str, Dict[str, Dict]]) -> str:
    """The study's verdict once every seed is paired (``paired``: :func:`paired_scores`): per subset, the paired BLEU
    difference and whether it is noise (within 2 standard errors, the rule of every results page), then each METEOR
    or TER difference that is not noise, with its direction (TER: lower is better); before that, how many seeds are
    paired."""
    n = paired["all"]["BLEU"]["n"]
    if n < len(FINAL_SEEDS):
        return (
            f"Not decided: {n} of {len(FINAL_SEEDS)} seeds paired so far "
            "(`python -m studies.webnlg2017_evidence plan` lists what is left)."
        )
    each = "; ".join(f"{s} {paired_cell(row['BLEU'])}, {paired_verdict(row['BLEU'])}" for s, row in paired.items())
    line = f"SVGD minus plain BLEU over {n} paired seeds (a difference within 2 standard errors is noise): {each}."
    beyond = []
    for m, sign in (("METEOR", 1), ("TER", -1)):  # sign: +1 where higher is better
        for s, row in paired.items():
            pc = row[m]
            verdict = paired_verdict(dict(pc, mean=sign * pc["mean"]))
            if verdict != "within noise":
                better = "better" if verdict == "a gain" else "worse"
                beyond.append(f"{m} {s} {pc['mean']:+.2f} ± {pc['se']:.2f} ({better} with SVGD)")
    return line + (f" Beyond noise in the other metrics: {', '.join(beyond)}." if beyond else "")


def render_summary(data: Dict) -> str:
    """The page's first screen: the reproduced plain generator's test BLEU over its seeds against the acceptance
    line, and what repulsive encoder heads do to it (the verdict of :func:`_verdict_line`), on the finals' recipe."""
    choice = data.get("choice")
    tail = (
        " Details, every setting and the rules: [Repulsion on the reproduced baseline]"
        "(#repulsion-on-the-reproduced-baseline). Generated by `python -m studies.webnlg2017_evidence report` from "
        "[webnlg2017/evidence/results.json](webnlg2017/evidence/results.json)."
    )
    plain = {s: per_arm(data, s, "BLEU")["plain"] for s in baseline.SUBSETS}
    if not choice or not plain["all"]:
        return "**Summary.** The repulsion evidence on the reproduced generator has no final run scored yet." + tail
    k = len(plain["all"])
    cells = " / ".join(_ms(plain[s].values()) for s in baseline.SUBSETS)
    target = _acceptance(data)[1]
    paired = paired_scores(data)
    n = paired["all"]["BLEU"]["n"]
    repulsion = (
        f"not decided yet, {n} of {len(FINAL_SEEDS)} seeds paired." if n < len(FINAL_SEEDS) else _verdict_line(paired)
    )
    return (
        f"**Summary.** The reproduced plain generator (`--preset webnlg2017` on `{main_recipe(data)}`'s recipe, "
        f"test set scored as the 2017 challenge did) scores BLEU seen / unseen / all {cells} over {k} seed"
        f"{'s' if k > 1 else ''}; against {baseline.TARGET}'s published seen BLEU {baseline.target():g}, {target}. "
        f"Repulsive encoder heads against it (`{choice['svgd']['setting']}`, each arm's setting chosen on dev from "
        f"{len(ARMS['svgd'])}): {repulsion}" + tail
    )


def _acceptance(data: Dict, recipe: Optional[str] = None) -> Tuple[Optional[float], str]:
    """The plain arm's mean seen-category test BLEU over its seeds (of ``recipe``, default :func:`main_recipe`) and
    its verdict against the acceptance line of the reproduction (:func:`studies.webnlg2017.target`, itself a mean
    over 3 seeds), decided once every seed is in; ``(None, "not decided, ...")`` before."""
    seen = per_arm(data, "seen", "BLEU", recipe)["plain"]
    if len(seen) < len(FINAL_SEEDS):
        return None, f"not decided, {len(seen)} of {len(FINAL_SEEDS)} seeds scored"
    m = mean_std(list(seen.values()))[0]
    return m, f"**{'met' if m >= baseline.target() else 'not met'}** ({m - baseline.target():+.2f})"


def _plain_against_target(data: Dict, recipe: Optional[str] = None) -> str:
    """The sentence of :func:`_acceptance` on the page."""
    seen = per_arm(data, "seen", "BLEU", recipe)["plain"]
    line = f"{baseline.TARGET}'s published seen BLEU {baseline.target():g} (a mean over 3 seeds)"
    m, verdict = _acceptance(data, recipe)
    if m is None:
        return f"The plain arm against {line}: {verdict}."
    return f"The plain arm against {line}: {_ms(seen.values())} over its {len(seen)} seeds, {verdict}."


BLOCKS = {SUMMARY: render_summary, BLOCK: render_evidence}
render = renderer(BLOCKS)  # render(page_text, results): the page with its generated blocks rendered from results


def report(out: Path = OUT, page: Path = PAGE, results: Path = RESULTS, base: Path = baseline.RUN) -> Dict:
    """Write ``results/results.json`` from :func:`collect` and render the page's block from it (a page without
    the block writes nothing)."""
    data = collect(out, results, base)
    publish(page, data, BLOCKS, results / "results.json")
    runs = [
        (f"{f['arm']} seed {f['seed']}, {_recipe_of(f)}", f["arm"], f["history"])
        for f in data["finals"]
        if f.get("history")
    ]
    if runs:
        plot_runs(runs, results / "curves.png", "dev_bleu")
    return data


def _epoch_seconds(out: Path) -> Optional[float]:
    """The median seconds per epoch of the finished selection runs (their epochs not marked ``seconds_partial``);
    ``None`` before any has finished."""
    seconds = [
        t for a in ARMS for i in range(len(ARMS[a])) for t in _timed(baseline.trained(select_dir(out, a, i)) or [])
    ]
    return statistics.median(seconds) if seconds else None


def _timed(history: List[Dict]) -> List[float]:
    """A training history's seconds per epoch, leaving out an epoch resumed from an older checkpoint
    (``seconds_partial``: it timed only its part after the resume)."""
    return [h["seconds"] for h in history if not h.get("seconds_partial")]


def _progress(run: Path) -> Tuple[int, List[Dict]]:
    """A run's finished epochs and their history so far: ``train.json``'s when it has finished, else one read of its
    ``checkpoint.pt`` (none before: ``(0, [])``)."""
    from graph_rma.engine import load_checkpoint

    done = baseline.trained(run)
    if done is not None:
        return len(done), done
    if not (run / "checkpoint.pt").is_file():
        return 0, []
    checkpoint = load_checkpoint(run / "checkpoint.pt")
    return checkpoint["epoch"], checkpoint.get("history", [])


def _decode_seconds(histories: Iterable[List[Dict]]) -> Optional[float]:
    """The median seconds of a final's dev decode (``dev_bleu_seconds``) over the finals' epochs so far
    (``histories``: one list per final); ``None`` before any."""
    seconds = [h["dev_bleu_seconds"] for history in histories for h in history if "dev_bleu_seconds" in h]
    return statistics.median(seconds) if seconds else None


def _left(
    done: int, epochs: int, seconds: Optional[float], decodes: bool = False, decode: Optional[float] = None
) -> str:
    """A training step's comment: how far its run is (``done`` of ``epochs`` epochs) and, from ``seconds`` per
    epoch, about how long its training has left (``decodes``: a final's dev decode after every epoch comes on top,
    ``decode`` seconds each once measured)."""
    notes = [f"{done} of {epochs} epochs trained"] if done else []
    if seconds is not None:
        each = seconds + (decode if decodes and decode is not None else 0.0)
        notes.append(f"about {(epochs - done) * each / 3600:.1f} h left at {seconds:.0f} s per epoch")
        if decodes:
            notes[-1] += (
                f" and {decode:.0f} s per dev decode" if decode is not None else ", plus a dev decode per epoch"
            )
    return f"  # {'; '.join(notes)}" if notes else ""


def plan(out: Path = OUT, results: Path = RESULTS) -> List[str]:
    """The steps left, in order, as commands (nothing when the study is complete); the decoding's step is
    independent of the selection and comes first while it is left. A training step says how far its run is and,
    once a selection run has finished, about how long is left (its median seconds per epoch, on this machine; for a
    final, the median epoch of the finals here once any has trained one, plus the median dev decode of the finals so
    far). What is committed in ``results/results.json`` (a finished selection run, the choice, the decoding, a
    final's test scores) counts as done: a fresh clone goes on from there. The finals are those of :func:`recipe`,
    seed by seed (every arm's seed 0, then seed 1, ...), each run's test decode after its training; while the recipe
    is not decided, the last step is the round's report that decides it."""
    me = "python -m studies.webnlg2017_evidence"
    committed = _committed(results)
    first = [] if _decided(out, results) else [f"OMP_NUM_THREADS=1 {me} decoding"]
    kept_seconds = [r["seconds_per_epoch"] for r in committed.get("selection", []) if r.get("seconds_per_epoch")]
    seconds = _epoch_seconds(out) or (statistics.median(kept_seconds) if kept_seconds else None)
    selected = {(r["arm"], r["index"]) for r in committed.get("selection", []) if r.get("epochs") == SELECT_EPOCHS}
    left = [
        f"OMP_NUM_THREADS=1 {me} select {a} {i}" + _left(_progress(select_dir(out, a, i))[0], SELECT_EPOCHS, seconds)
        for a in ARMS
        for i in range(len(ARMS[a]))
        if baseline.trained(select_dir(out, a, i)) is None and (a, i) not in selected
    ]
    if left:
        return first + left
    if not study_choice(out, results):
        return first + [f"{me} choose"]
    name = recipe_or_none()
    if name is None:
        waiting = next(r for r in RECIPES if _round_choice(r) is None)
        return first + [
            f"python -m studies.webnlg2017 report --round {waiting}  # after its training, dev and choose: the "
            "finals' recipe is decided then"
        ]
    finals = {(arm, seed): _progress(final_dir(out, arm, seed, name)) for arm in ARMS for seed in FINAL_SEEDS}
    left, decode = first, _decode_seconds(history for _, history in finals.values())
    timed = [t for _, history in finals.values() for t in _timed(history)]
    seconds = statistics.median(timed) if timed else seconds  # the finals' own epochs, once any are here
    tested = _tested(committed)
    for seed in FINAL_SEEDS:  # seed by seed, every arm's: finals that span days finish as paired seeds
        for arm in ARMS:
            run = final_dir(out, arm, seed, name)
            if (name, arm, seed) in tested and not run.is_dir():
                continue
            if baseline.trained(run) is None:
                note = _left(finals[arm, seed][0], FINAL_EPOCHS, seconds, decodes=True, decode=decode)
                left.append(f"OMP_NUM_THREADS=1 {me} final {arm} {seed}{note}")
            elif not (run / "decode" / "test" / "decoded.test.json").is_file():
                left.append(f"OMP_NUM_THREADS=1 {me} test {arm} {seed}")
    return left + [f"{me} report"]


def main(argv=None) -> int:
    one_line_errors()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("step", choices=["plan", "select", "choose", "decoding", "final", "test", "report"])
    p.add_argument("arm", nargs="?", choices=list(ARMS), help="select, final, test: the arm")
    p.add_argument("number", nargs="?", type=int, help="select: the setting's index; final, test: the seed")
    p.add_argument("--out", type=out_dir, default=OUT, help=f"the study's run folder (default: {OUT})")
    p.add_argument("--results", type=out_dir, default=RESULTS, help=f"committed results (default: {RESULTS})")
    p.add_argument("--page", type=page_file, default=PAGE, help=f"report: the page (default: {PAGE})")
    p.add_argument("--root", default=None, help="WebNLG folder (default: $GRAPH_RMA_DATA/webnlg)")
    p.add_argument(
        "--meteor",
        default="auto",
        choices=[m for m in METEOR_CHOICES if m != "nltk"],
        help="decoding, test: METEOR 1.5",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    a = p.parse_args(argv)
    if a.step in ("final", "test") and (a.arm is None or a.number is None):
        p.error(f"{a.step} needs ARM and SEED, e.g. `{a.step} svgd 0`")
    if a.step == "select" and (a.arm is None) != (a.number is None):
        p.error("select takes both ARM and INDEX (one run) or neither (every selection run)")
    if a.step == "plan":
        for line in plan(a.out, a.results) or ["nothing left: the study is complete"]:
            print(line)
    elif a.step == "select":
        select(a.out, (a.arm, a.number) if a.arm else None, a.root, a.quiet)
    elif a.step == "choose":
        choose(a.out)
    elif a.step == "decoding":
        decoding(a.out, root=a.root, meteor=a.meteor, progress=not a.quiet)
    elif a.step == "final":
        final(a.out, a.arm, a.number, a.root, a.quiet, a.results)
    elif a.step == "test":
        decode_final(a.out, a.arm, a.number, a.results, root=a.root, meteor=a.meteor, progress=not a.quiet)
    else:
        report(a.out, a.page, a.results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
