"""Strong baselines first: reproduce published GAT numbers, then measure repulsion against them.

    python -m studies.baselines reproduce [ROW ...]  # plain GAT per row of the reproduction table (resumable)
    python -m studies.baselines select-small         # platonov-small's size, chosen on minesweeper validation
    python -m studies.baselines select               # evidence: k settings per arm on the selection seeds
    python -m studies.baselines final                # evidence: each arm's choice on the final seeds 0-9
    python -m studies.baselines plan                 # evidence: the runs left per setting, and about how long
    python -m studies.baselines report               # results -> docs/baselines/results.json -> the page's tables
                                                     #   (and evidence.png there: every entry's paired differences)

Every step resumes (finished runs are kept under --out, default runs/baselines, and skipped when rerun; the run in
progress continues from its last save); stop it at any time and run the same command again. The rules (grid,
selection, seeds) are in docs/baselines.md, written before the final runs. Rows of the reproduction table:
``DATASET:PROTOCOL`` (e.g. ``chameleon:ggcn``). ``--jobs N`` runs N (setting, seed) runs of ``select`` or ``final``
at once, each in its own process (on a GPU, many small runs share it).
"""

from __future__ import annotations

import argparse
import importlib
import json
import signal
import statistics
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Dict, FrozenSet, Iterable, List, Optional, Sequence, Tuple

from graph_rma import GraphRMAError
from graph_rma.argtypes import SeedsAction, out_dir, positive_int, seed_list
from graph_rma.engine import CheckpointError, load_checkpoint, mean_std, one_line_errors, paired_comparison, write_json
from graph_rma.engine.figures import new_figure, save_png
from graph_rma.tasks.node_classification import run_study, upgrade_metrics
from graph_rma.tasks.protocols import resolve_protocol
from studies.pages import (
    check_defaults,
    mean_std_cell,
    page_file,
    paired_cell,
    render_page,
    renderer,
    stop_if_interrupted,
)

FINAL_SEEDS = list(range(10))  # seed s trains on split s: the published protocol's 10 splits
SELECT_SEEDS = [100, 101, 102]  # splits 0-2, other initialisations: no final seed is ever used to choose

# (dataset, protocol): published GAT (mean, std or None), citation; a row of our own has no published mean (None)
REPRODUCE: Dict[Tuple[str, str], Tuple[Optional[float], Optional[float], str]] = {
    ("chameleon", "ggcn"): (60.26, 2.50, "Yan et al., ICDM 2022, Table 1"),
    ("squirrel", "ggcn"): (40.72, None, "Yan et al., ICDM 2022, Table 1"),
    ("actor", "ggcn"): (27.44, None, "Yan et al., ICDM 2022, Table 1"),
    ("texas", "ggcn"): (52.16, None, "Yan et al., ICDM 2022, Table 1"),
    ("wisconsin", "ggcn"): (49.41, None, "Yan et al., ICDM 2022, Table 1"),
    ("cornell", "ggcn"): (61.89, None, "Yan et al., ICDM 2022, Table 1"),
    ("minesweeper", "platonov-small"): (92.01, 0.68, "Platonov et al., ICLR 2023 (their notebooks/results.ipynb)"),
    ("tolokers", "platonov-small"): (83.70, 0.47, "Platonov et al., ICLR 2023 (their notebooks/results.ipynb)"),
    ("chameleon_filtered", "platonov-small"): (39.21, 3.08, "Platonov et al., ICLR 2023, filtered-graphs table"),
    # Luo et al.'s tuned classic GAT (single head, residual map, BatchNorm): the 2024 state of the art for a plain GAT
    ("minesweeper", "luo"): (97.73, 0.73, "Luo et al., NeurIPS 2024, heterophilous-graphs table, GAT*"),
    ("chameleon_filtered", "luo"): (
        44.13,
        4.17,
        "Luo et al., NeurIPS 2024, heterophilous-graphs table, GAT* (their 'chameleon' is the filtered graph)",
    ),
    # not in Luo et al.'s paper or run script (issue 34): their recipe with the preset's generic settings, untuned
    ("tolokers", "luo"): (None, None, "none: a row of our own (tolokers is not in Luo et al.'s paper)"),
}
ORDER = list(REPRODUCE)


def published_cell(dataset: str, protocol: str) -> str:
    """The published number of a row as its tables show it: ``mean ± std``, ``mean`` or ``—`` (a row of our own)."""
    pub, pub_std, _ = REPRODUCE[(dataset, protocol)]
    return "—" if pub is None else f"{pub:.2f}" + (f" ± {pub_std:.2f}" if pub_std is not None else "")


# protocol fields a row sets beyond its preset: on tolokers' million edges the memory-lean attention path (equal to
# float rounding) makes an epoch several times faster on CPU (the node table of benchmarks/README.md)
ROW_OVERRIDES: Dict[Tuple[str, str], Dict] = {
    ("tolokers", "platonov-small"): {"lean": True},
    ("minesweeper", "luo"): {"lean": True},
    ("tolokers", "luo"): {"lean": True},
}

# platonov-small: chosen on minesweeper's validation ROC AUC (seeds 100-101, splits 0-1): first the number of blocks
# at width 64 and lr 3e-3 (1, 2, 3), then, because every run peaked early (best step 144-292 of 500), a lower
# learning rate and a wider stream were added (the last two entries; added after the first three had run)
SMALL_GRID: List[Dict] = [
    {"layers": 1},
    {"layers": 2},
    {"layers": 3},
    {"layers": 3, "lr": 1e-3},
    {"layers": 2, "hidden": 128},
]

# The evidence: (dataset, protocol) -> the arms' settings, each tried on SELECT_SEEDS; the highest mean validation
# metric wins within each arm (ties: the earlier, weaker entry). Written before any final run (docs/baselines.md).
EVIDENCE: Dict[Tuple[str, str], Dict[str, List[Tuple[str, Dict]]]] = {
    ("chameleon", "ggcn"): {
        "plain": [("ma", {}), ("ma", {"dropout": 0.5, "attn_dropout": 0.5}), ("ma", {"weight_decay": 5e-4})],
        "svgd": [("svgd:alpha=0.1,eps=8", {}), ("svgd:alpha=0.01,eps=8", {}), ("svgd:alpha=1,eps=8", {})],
    },
    # added after chameleon's final runs, before any run on this graph; Platonov et al.'s protocol has no weight decay
    # and no attention dropout, so the plain arm tries more feature dropout and some attention dropout
    ("chameleon_filtered", "platonov-small"): {
        "plain": [("ma", {}), ("ma", {"dropout": 0.4}), ("ma", {"attn_dropout": 0.2})],
        "svgd": [
            ("svgd:alpha=0.1,eps=8,layers=convs.0", {}),
            ("svgd:alpha=0.01,eps=8,layers=convs.0", {}),
            ("svgd:alpha=1,eps=8,layers=convs.0", {}),
        ],
    },
    # Luo et al.'s tuned classic GAT (issue 34), written before any run of this entry. "plain" is the recipe with
    # 8 heads (the width, 256, split into 8 heads of 32), so that "svgd" (the same 8 heads, repulsive) against it
    # asks whether repulsive heads help more than plain heads, and "single-head" (the published model) against it
    # asks whether several heads help at all. Each arm tries 3 settings: the plain arms the recipe, less dropout
    # (0.5 instead of 0.7) and less weight decay (5e-4 instead of 1e-3); the repulsive arm SVGD over the first
    # layer's heads (the layer earlier sweeps found repulsion acts on) at three strengths.
    ("chameleon_filtered", "luo"): {
        "plain": [
            ("ma", {"heads": 8}),
            ("ma", {"heads": 8, "dropout": 0.5}),
            ("ma", {"heads": 8, "weight_decay": 5e-4}),
        ],
        "single-head": [("ma", {}), ("ma", {"dropout": 0.5}), ("ma", {"weight_decay": 5e-4})],
        "svgd": [
            ("svgd:alpha=0.1,eps=8,layers=convs.0", {"heads": 8}),
            ("svgd:alpha=0.01,eps=8,layers=convs.0", {"heads": 8}),
            ("svgd:alpha=1,eps=8,layers=convs.0", {"heads": 8}),
        ],
    },
    # minesweeper under Luo et al.'s recipe (issue 34), written before any run of this entry: the same three arms as
    # chameleon_filtered's, 2 settings each instead of 3 (each run is 2000 epochs of a 15-layer model): the plain
    # arms the recipe and less dropout (0.1 instead of 0.2; the recipe has no weight decay), the repulsive arm SVGD
    # over the first layer's 8 heads at alpha 0.1 and 0.01 (the two settings chameleon's entries chose)
    ("minesweeper", "luo"): {
        "plain": [("ma", {"heads": 8}), ("ma", {"heads": 8, "dropout": 0.1})],
        "single-head": [("ma", {}), ("ma", {"dropout": 0.1})],
        "svgd": [
            ("svgd:alpha=0.1,eps=8,layers=convs.0", {"heads": 8}),
            ("svgd:alpha=0.01,eps=8,layers=convs.0", {"heads": 8}),
        ],
    },
}


def _protocol(dataset: str, protocol: str, overrides: Dict):
    """A row's or an evidence setting's protocol: the row's own overrides (the lean path, equal to float rounding),
    then the setting's."""
    return resolve_protocol(protocol, dataset, {**ROW_OVERRIDES.get((dataset, protocol), {}), **overrides})


def _row_dir(out: Path, dataset: str, protocol: str) -> Path:
    return out / "reproduce" / f"{dataset}-{protocol}"


def reproduce(out: Path, rows: List[str], threads: int, seeds: List[int] = FINAL_SEEDS) -> None:
    todo = ORDER if not rows else [_row(r) for r in rows]  # every row is checked before the first one runs
    for dataset, protocol in todo:
        print(f"== {dataset} ({protocol})", file=sys.stderr)
        res = run_study(
            _protocol(dataset, protocol, {}),
            ["ma"],
            seeds,
            _row_dir(out, dataset, protocol),
            dataset=dataset,
            resume=True,
            threads=threads,
            make_plot=False,
        )
        print(stop_if_interrupted(res)["table"])


def _row(text: str) -> Tuple[str, str]:
    """A row of the reproduction table, ``DATASET:PROTOCOL``; ``ValueError`` naming the choices otherwise."""
    row = tuple(text.split(":", 1))
    if row not in REPRODUCE:
        raise GraphRMAError(f"rows: unknown row {text!r}; choose from " + ", ".join(f"{d}:{p}" for d, p in ORDER))
    return row  # type: ignore[return-value]


def settings_name(spec: str, overrides: Dict) -> str:
    extra = ",".join(f"{k}={v}" for k, v in sorted(overrides.items()))
    return spec + (f" [{extra}]" if extra else "")


def _arm_dir(out: Path, stage: str, dataset: str, protocol: str, spec: str, overrides: Dict) -> Path:
    from graph_rma.engine import slug

    if stage == "final" and spec == "ma" and not overrides and (dataset, protocol) in REPRODUCE:
        return _row_dir(out, dataset, protocol)  # the published protocol's final runs are the reproduction row's
    return out / stage / f"{dataset}-{protocol}" / slug(settings_name(spec, overrides))


SMALL_BASE = {
    "hidden": 64,
    "heads": 8,
    "lr": 3e-3,
    "epochs": 500,
    "patience": 500,
    "layers": 3,
}  # what the grid varies from


def _small_dir(out: Path, overrides: Dict) -> Path:
    return out / "select-small" / "-".join(f"{k}{v}" for k, v in overrides.items())


def select_small(out: Path, threads: int) -> None:
    for overrides in SMALL_GRID:
        res = stop_if_interrupted(
            run_study(
                resolve_protocol("platonov-small", "minesweeper", {**SMALL_BASE, **overrides}),
                ["ma"],
                SELECT_SEEDS[:2],
                _small_dir(out, overrides),
                dataset="minesweeper",
                resume=True,
                threads=threads,
                make_plot=False,
            )
        )
        row = res["summary"][0]
        print(
            f"{overrides}: validation ROC AUC {row['val_metric_mean']:.2f} +- {row['val_metric_std']:.2f} "
            f"({row['sec_per_epoch_mean']:.3f} s/epoch)"
        )


EVIDENCE_NAMES = ", ".join(f"{d}:{q}" for d, q in EVIDENCE)  # what --evidence accepts


def _entries(only: Optional[Tuple[str, str]]) -> List[Tuple[str, str]]:
    """The evidence entries to run: all, or the one ``--evidence DATASET:PROTOCOL`` names."""
    return [key for key in EVIDENCE if only is None or key == only]


Setting = Tuple[str, str, str, Dict, Path]  # dataset, protocol, variant spec, overrides, run folder


def _study(setting: Setting, seeds: Sequence[int], threads: int, progress: bool = True) -> Dict:
    """One setting's runs on ``seeds`` (``run_study``, resumable: finished runs in its folder are reused)."""
    dataset, protocol, spec, overrides, folder = setting
    return run_study(
        _protocol(dataset, protocol, overrides),
        [spec],
        seeds,
        folder,
        dataset=dataset,
        resume=True,
        threads=threads,
        make_plot=False,
        progress=progress,
    )


_STOP = None  # in a child process under --jobs: the event the parent sets when interrupted
_RUNNING = False  # in a child process: whether it is training a run now


def _child(stop) -> None:
    global _STOP
    _STOP = stop
    signal.signal(signal.SIGINT, _interrupt_a_run)


def _interrupt_a_run(signum, frame) -> None:
    """A child's Ctrl-C: it stops the run in progress (saved where it stops); an idle child ignores it (it
    would die mid-wait and leave its pool broken)."""
    if _RUNNING:
        raise KeyboardInterrupt


def _one_run(setting: Setting, seed: int, threads: int) -> None:
    """A child process's work under ``--jobs``: one setting on one seed (the bars stay off: many share a terminal);
    nothing once the parent was interrupted (runs already queued to this process are dropped)."""
    global _RUNNING
    if _STOP is None or not _STOP.is_set():
        _RUNNING = True
        try:
            _study(setting, [seed], threads, progress=False)
        finally:
            _RUNNING = False


@contextmanager
def _first_interrupt_only():
    """Ctrl-C (SIGINT) raises ``KeyboardInterrupt`` once; a second one (``timeout`` signals the process and then its
    group) is ignored while the children save their runs."""
    seen: List[int] = []

    def first(signum, frame):
        if not seen:
            seen.append(signum)
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, first)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _order(todo: List[Tuple[Setting, List[int]]]) -> List[Tuple[Setting, int]]:
    """Every (setting, seed) run of ``todo``, those saved part-way first, the furthest on first: a study stopped
    again part-way has finished, and can report, the runs that were nearest their end. Then seed by seed (every
    setting's first seed, in the given order, then every setting's next one): runs that span days finish in pairs
    of the same seed, so the finals finished so far are paired seeds of every arm."""
    units = [(setting, seed) for setting, left in todo for seed in left]
    reached = [max(_part_way(setting[4], [seed]), default=0) for setting, seed in units]
    return [units[i] for i in sorted(range(len(units)), key=lambda i: (-reached[i], units[i][1]))]


def _run_settings(
    settings: List[Setting], seeds: Sequence[int], threads: int, jobs: int, finished: FrozenSet[Tuple] = frozenset()
) -> None:
    """Every setting on every seed but those in ``finished`` (``(dataset, protocol, setting name, seed)``: runs
    committed, :func:`_finished`), in :func:`_order` (the runs saved part-way first). ``jobs`` 1: one run after
    another in this process. More: each run in its own process, ``jobs`` at a time (several small runs share a GPU
    or the cores); a failed run is reported and the others go on. Then each setting's ``results.json`` is written
    once from its finished runs."""
    todo = [(s, [k for k in seeds if (s[0], s[1], settings_name(s[2], s[3]), k) not in finished]) for s in settings]
    todo = [(s, left) for s, left in todo if left]
    if jobs == 1:
        for setting, seed in _order(todo):
            stop_if_interrupted(_study(setting, [seed], threads))
        for setting, left in todo:
            _study(setting, left, threads, progress=False)  # every run reused: the setting's summary
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    from tqdm import tqdm

    failed: List[str] = []
    context = multiprocessing.get_context("spawn")  # a forked child would inherit the parent's CUDA state
    module = importlib.import_module("studies.baselines")  # its functions by the module's name, also under `-m`
    stop = context.Event()
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=context, initializer=module._child, initargs=(stop,))
    with _first_interrupt_only(), pool:
        work = module._one_run
        units = {pool.submit(work, s, seed, threads): (s, seed) for s, seed in _order(todo)}
        try:
            for done in tqdm(as_completed(units), total=len(units), desc="runs", unit="run", file=sys.stderr):
                setting, seed = units[done]
                if done.exception() is not None:
                    failed.append(f"{settings_name(setting[2], setting[3])} seed {seed}: {done.exception()}")
        except KeyboardInterrupt:  # the children had it too: each saves its run and returns; none starts another
            stop.set()
            pool.shutdown(wait=True, cancel_futures=True)
            raise SystemExit(
                "interrupted: finished runs are saved, the ones in progress where they stopped; run the same "
                "command again to continue"
            ) from None
    for line in failed:
        print(f"failed: {line}", file=sys.stderr)
    if failed:
        raise SystemExit(f"{len(failed)} of {len(units)} runs failed (above); the others are saved")
    for setting, left in todo:
        _study(setting, left, threads, progress=False)  # every run reused: the setting's summary, written once


def select(out: Path, threads: int, only: Optional[Tuple[str, str]] = None, jobs: int = 1) -> None:
    settings = [
        (dataset, protocol, spec, overrides, _arm_dir(out, "select", dataset, protocol, spec, overrides))
        for dataset, protocol in _entries(only)
        for arm_settings in EVIDENCE[(dataset, protocol)].values()
        for spec, overrides in arm_settings
    ]
    _run_settings(settings, SELECT_SEEDS, threads, jobs, _finished(collect(out), "select"))


def _load(path: Path) -> Dict:
    """The finished runs under ``path`` (each run's record, so a row still running shows the splits it has)."""
    runs = [json.loads(f.read_text()) for f in sorted((path / "runs").glob("*/seed*.json"))]
    runs = [{**r, "metrics": upgrade_metrics(r["metrics"])} for r in runs]  # runs saved with the old keys too
    return {"runs": sorted(runs, key=lambda r: r["seed"])}


def _finished(results: Dict, stage: str) -> FrozenSet[Tuple[str, str, str, int]]:
    """``(dataset, protocol, setting name, seed)`` of every finished run of an evidence stage in ``results``
    (:func:`collect`: here or committed): a fresh clone does not train a committed run again."""
    return frozenset(
        (e["dataset"], e["protocol"], e["setting"], r["seed"]) for e in results["evidence"] for r in e[stage]
    )


def chosen(
    out: Path, dataset: str, protocol: str, arm: str, results: Optional[Dict] = None
) -> Tuple[str, Dict, List[Tuple[str, float]]]:
    """The arm's setting with the highest mean validation metric on the selection seeds (ties: the earlier), over
    its finished selection runs, here or committed (``results``, else :func:`collect` of ``out``: the page's
    numbers)."""
    entries = {
        e["setting"]: e
        for e in (results or collect(out))["evidence"]
        if (e["dataset"], e["protocol"], e["arm"]) == (dataset, protocol, arm)
    }
    scores = []
    for spec, overrides in EVIDENCE[(dataset, protocol)][arm]:
        runs = entries[settings_name(spec, overrides)]["select"]
        if sorted(r["seed"] for r in runs) != sorted(SELECT_SEEDS):
            raise SystemExit(f"selection incomplete for {settings_name(spec, overrides)}: run `select` first")
        scores.append((settings_name(spec, overrides), mean_std([r["val"] for r in runs])[0]))
    best = max(range(len(scores)), key=lambda i: (scores[i][1], -i))
    spec, overrides = EVIDENCE[(dataset, protocol)][arm][best]
    return spec, overrides, scores


def final(out: Path, threads: int, arms: List[str], only: Optional[Tuple[str, str]] = None, jobs: int = 1) -> None:
    results, settings = collect(out), []
    for dataset, protocol in _entries(only):
        for arm in EVIDENCE[(dataset, protocol)]:
            if arms and arm not in arms:
                continue
            spec, overrides, _ = chosen(out, dataset, protocol, arm, results)
            print(f"{dataset} {arm}: {settings_name(spec, overrides)}", file=sys.stderr)
            settings.append(
                (dataset, protocol, spec, overrides, _arm_dir(out, "final", dataset, protocol, spec, overrides))
            )
    _run_settings(settings, FINAL_SEEDS, threads, jobs, _finished(results, "final"))


def _part_way(path: Path, seeds: Iterable[int]) -> List[int]:
    """The epochs reached by the runs of this folder on ``seeds`` that were cut short and saved part-way (each
    resumes from its save; the save of a run finished elsewhere, e.g. committed from another machine, is not
    counted); an unreadable save counts as epoch 0 (its run starts again)."""
    epochs = []
    saves = (save for seed in sorted(seeds) for save in (path / "checkpoints").glob(f"*_seed{seed}.partial.pt"))
    for save in saves:
        try:
            epochs.append(int(load_checkpoint(save)["epoch"]))
        except (CheckpointError, KeyError, TypeError, ValueError):
            epochs.append(0)
    return epochs


def _part_way_note(epochs: List[int]) -> str:
    if not epochs:
        return ""
    at = ", ".join(map(str, sorted(epochs)))
    return f" ({len(epochs)} saved part-way, at epoch{'s' if len(epochs) > 1 else ''} {at}: resumed from there)"


def _seconds_per_epoch(entries: List[Dict], settings: Dict[str, Tuple[str, Dict]], setting: str) -> Optional[float]:
    """The median seconds per epoch of the finished runs (selection and final) of ``setting``, else of the settings
    that train the same model (the same overrides, e.g. ``heads=8``), else of its arm, else of the entry; None when
    the entry has no finished run. A run resumed on another machine mixes the two machines' epochs."""
    arm = next(e["arm"] for e in entries if e["setting"] == setting)
    for same in (
        lambda e: e["setting"] == setting,
        lambda e: settings[e["setting"]][1] == settings[setting][1],
        lambda e: e["arm"] == arm,
        lambda e: True,
    ):
        timed = [r["sec_per_epoch"] for e in entries if same(e) for r in e["select"] + e["final"]]
        if timed:
            return statistics.median(timed)
    return None


def plan(out: Path, only: Optional[Tuple[str, str]] = None) -> List[str]:
    """Per evidence entry, from :func:`collect` (the runs here, else the committed ones): each setting's selection
    runs left, each arm's final runs left (its chosen setting's; every final seed while its selection is incomplete)
    and about how long they take on one thread each: each run's epochs left (the protocol's, less what its part-way
    save holds) times the seconds per epoch of :func:`_seconds_per_epoch` (an arm whose choice waits for the
    selection is timed by its slowest setting)."""
    results, lines = collect(out), []
    for dataset, protocol in _entries(only):
        key = f"{dataset}:{protocol}"
        entries = [e for e in results["evidence"] if (e["dataset"], e["protocol"]) == (dataset, protocol)]
        settings = {settings_name(*s): s for arm in EVIDENCE[(dataset, protocol)].values() for s in arm}
        epochs = _protocol(dataset, protocol, {}).epochs
        left, upper, done, seconds = 0, "", 0, []  # runs left, the epochs their saves hold, and their time

        def timed(line: str, setting_names: List[str], n: int, saved: List[int]) -> str:
            per_epoch = [_seconds_per_epoch(entries, settings, name) for name in setting_names]
            if None in per_epoch:
                return line
            seconds.append((n * epochs - sum(saved)) * max(per_epoch))
            return f"{line}; about {seconds[-1] / 3600:.1f} h at {max(per_epoch):.2f} s/epoch"

        for e in entries:
            seeds = set(SELECT_SEEDS) - {r["seed"] for r in e["select"]}
            n = len(seeds)
            left += n
            if n:
                saved = _part_way(_arm_dir(out, "select", dataset, protocol, *settings[e["setting"]]), seeds)
                done += sum(saved)
                line = (
                    f"{key} select {e['arm']} `{e['setting']}`: {n} of {len(SELECT_SEEDS)} left{_part_way_note(saved)}"
                )
                lines.append(timed(line, [e["setting"]], n, saved))
        for arm in EVIDENCE[(dataset, protocol)]:
            mine = [e for e in entries if e["arm"] == arm]
            if all(len(e["select"]) >= len(SELECT_SEEDS) for e in mine):
                best = mine[_select(mine)[1]]
                seeds = set(FINAL_SEEDS) - {r["seed"] for r in best["final"]}
                n = len(seeds)
                saved = _part_way(_arm_dir(out, "final", dataset, protocol, *settings[best["setting"]]), seeds)
                what = f" `{best['setting']}`: {n} of {len(FINAL_SEEDS)} left{_part_way_note(saved)}"
                names = [best["setting"]]
            else:  # a chosen setting whose finals are the reproduction row's would have none left
                n, upper, saved = len(FINAL_SEEDS), "up to ", []
                what = f": up to {n} left (its choice waits for the selection)"
                names = [e["setting"] for e in mine]
            done += sum(saved)
            left += n
            if n:
                lines.append(timed(f"{key} final {arm}{what}", names, n, saved))
        if not left:
            lines.append(f"{key}: complete")
        elif seconds:
            saved = f", {done} of them saved part-way" if done else ""
            lines.append(
                f"{key}: {upper}{left} runs left, about {sum(seconds) / 3600:.1f} h of one thread "
                f"({left} x {epochs} epochs{saved})"
            )
        else:
            lines.append(f"{key}: {upper}{left} runs left of {epochs} epochs each (no finished run to time yet)")
    return lines


def _fmt(m: float, s: float) -> str:
    return f"{m:.2f} ± {s:.2f}"


def _run_rows(res: Dict) -> List[Dict]:
    return [
        {
            "seed": r["seed"],
            "split": r["split"],
            "metric": r["metrics"].get("metric", "accuracy"),
            "test": round(100 * r["metrics"]["test_metric"], 4),
            "val": round(100 * r["metrics"]["val_metric"], 4),
            "epochs": r["metrics"]["epochs"],
            "sec_per_epoch": round(r["metrics"]["sec_per_epoch"], 4),
        }
        for r in res.get("runs", [])
    ]


COMMITTED = Path(__file__).resolve().parents[1] / "docs" / "baselines" / "results.json"


def collect(out: Path) -> Dict:
    """Every finished run of the study, as committed in docs/baselines/results.json (the tables' one source). A
    row, arm or setting keeps its committed runs but those of the seeds finished again under ``out``, so one row can
    be run and reported on a machine that does not hold the others, and a folder that holds only some of a
    setting's seeds (a fresh clone continuing it) loses none that was committed."""
    committed = json.loads(COMMITTED.read_text()) if COMMITTED.is_file() else {}

    def runs(path: Path, kept: List[Dict]) -> List[Dict]:
        here = _run_rows(_load(path)) if path.is_dir() else []
        seeds = {r["seed"] for r in here}
        return sorted(here + [r for r in kept if r["seed"] not in seeds], key=lambda r: r["seed"])

    old_rows = {(r["dataset"], r["protocol"]): r["runs"] for r in committed.get("reproduction", [])}
    rows = [
        {"dataset": d, "protocol": p, "runs": runs(_row_dir(out, d, p), old_rows.get((d, p), []))} for d, p in ORDER
    ]
    old_evidence = {(e["dataset"], e["protocol"], e["arm"], e["setting"]): e for e in committed.get("evidence", [])}
    evidence = []
    for (dataset, protocol), arms in EVIDENCE.items():
        for arm, settings in arms.items():
            for spec, overrides in settings:
                name = settings_name(spec, overrides)
                kept = old_evidence.get((dataset, protocol, arm, name), {})
                evidence.append(
                    {
                        "dataset": dataset,
                        "protocol": protocol,
                        "arm": arm,
                        "setting": name,
                        **{
                            stage: runs(_arm_dir(out, stage, dataset, protocol, spec, overrides), kept.get(stage, []))
                            for stage in ("select", "final")
                        },
                    }
                )
    old_small = {json.dumps(r["overrides"], sort_keys=True): r["select"] for r in committed.get("small", [])}
    small = [
        {"overrides": o, "select": runs(_small_dir(out, o), old_small.get(json.dumps(o, sort_keys=True), []))}
        for o in SMALL_GRID
    ]
    return {"reproduction": rows, "evidence": evidence, "small": small}


def render_small(results: Dict) -> str:
    lines = [
        "| setting (width 64 unless named, 8 heads, 500 steps) | validation ROC AUC, seeds 100-101 (splits 0-1) | "
        "s/epoch | chosen |",
        "| --- | ---: | ---: | --- |",
    ]
    rows = [r for r in results.get("small", []) if r["select"]]
    scores = [mean_std([x["val"] for x in r["select"]]) for r in rows]
    best = max(range(len(rows)), key=lambda i: (scores[i][0], -i)) if rows else -1
    for i, r in enumerate(rows):
        o = {**SMALL_BASE, **r["overrides"]}
        name = f"{o['layers']} blocks, lr {o['lr']:g}" + (f", width {o['hidden']}" if o["hidden"] != 64 else "")
        sec = mean_std([x["sec_per_epoch"] for x in r["select"]])[0]
        lines.append(f"| {name} | {_fmt(*scores[i])} | {sec:.3f} | {'yes' if i == best else ''} |")
    return "\n".join(lines)


def render_reproduction(results: Dict) -> str:
    lines = [
        "| graph | protocol | splits | ours: plain GAT | published GAT | ours − published | source | s/epoch |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- | ---: |",
    ]
    for row in results["reproduction"]:
        pub, _, cite = REPRODUCE[(row["dataset"], row["protocol"])]
        published = published_cell(row["dataset"], row["protocol"])
        runs = row["runs"]
        if not runs:
            lines.append(f"| {row['dataset']} | `{row['protocol']}` | 0 | not run yet | {published} | — | {cite} | — |")
            continue
        m, s = mean_std([r["test"] for r in runs])
        metric = "ROC AUC" if runs[0]["metric"] == "roc_auc" else "accuracy"
        sec = mean_std([r["sec_per_epoch"] for r in runs])[0]
        lines.append(
            f"| {row['dataset']} | `{row['protocol']}` | {len(runs)} | {_fmt(m, s)} ({metric}) | "
            f"{published} | {'—' if pub is None else format(m - pub, '+.2f')} | {cite} | {sec:.3f} |"
        )
    return "\n".join(lines)


def _select(entries: List[Dict]) -> Tuple[List[float], int]:
    """Each setting's mean validation metric on the selection seeds, and the index of the chosen one: the highest
    (ties: the earlier, weaker entry)."""
    scores = [mean_std([r["val"] for r in e["select"]])[0] for e in entries]
    return scores, max(range(len(entries)), key=lambda i: (scores[i], -i))


def evidence_finals(results: Dict, dataset: str, protocol: str) -> Dict[str, Tuple[str, Dict[int, float]]]:
    """Per arm of an evidence entry whose selection and final runs are in: its chosen setting and final test
    metric per seed (what the entry's final table shows)."""
    entries = [e for e in results["evidence"] if (e["dataset"], e["protocol"]) == (dataset, protocol)]
    finals = {}
    for arm in EVIDENCE[(dataset, protocol)]:
        mine = [e for e in entries if e["arm"] == arm]
        if mine and all(len(e["select"]) >= len(SELECT_SEEDS) for e in mine):
            best = mine[_select(mine)[1]]
            if best["final"]:
                finals[arm] = (best["setting"], {r["seed"]: r["test"] for r in best["final"]})
    return finals


def entry_complete(results: Dict, dataset: str, protocol: str) -> bool:
    """Whether every arm of an evidence entry has its chosen setting's final runs on every final seed: only then
    does the entry count (the picture, the README's summary); before, its final table is shown as open."""
    finals = evidence_finals(results, dataset, protocol)
    return set(finals) == set(EVIDENCE[(dataset, protocol)]) and all(
        set(vals) >= set(FINAL_SEEDS) for _, vals in finals.values()
    )


#: The evidence's picture (every entry's arms against its chosen plain), as the page links it; under docs/.
FOREST = "baselines/evidence.png"


def forest_rows(results: Dict) -> List[Tuple[str, Dict]]:
    """The picture's rows: per complete evidence entry (:func:`entry_complete`), each arm but the chosen plain
    against it, as ``(label, paired_comparison(plain, arm))`` (the numbers of the entry's final table)."""
    rows = []
    for dataset, protocol in EVIDENCE:
        finals = evidence_finals(results, dataset, protocol)
        if entry_complete(results, dataset, protocol) and len(finals) > 1:
            base = finals["plain"][1]
            for arm, (_, vals) in finals.items():
                if arm != "plain":
                    rows.append((f"{dataset}, {protocol}: {arm} − plain", paired_comparison(base, vals)))
    return rows


def plot_forest(rows: List[Tuple[str, Dict]], path: Path) -> Path:
    """Each row's mean paired difference with a bar of one standard error (thick) and of three (thin), the page's
    bar for a difference that stands out of the noise; a PNG at ``path``. Needs matplotlib (the ``plots`` extra)."""
    fig = new_figure(7.0, 0.45 * len(rows) + 1.4, "the evidence picture")
    ax = fig.add_subplot()
    ys = list(range(len(rows)))[::-1]  # the first row on top
    means = [pc["mean"] for _, pc in rows]
    ses = [pc["se"] for _, pc in rows]
    ax.errorbar(means, ys, xerr=[3 * se for se in ses], fmt="none", ecolor="tab:blue", elinewidth=1, alpha=0.5)
    ax.errorbar(means, ys, xerr=ses, fmt="o", color="tab:blue", elinewidth=3, capsize=0)
    ax.axvline(0.0, color="grey", lw=1)
    ax.set_yticks(ys)
    ax.set_yticklabels([label for label, _ in rows], fontsize=8)
    ax.set_xlabel("paired difference in test metric over the final seeds (points)\nthick: ± 1 SE, thin: ± 3 SE")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return save_png(fig, path, dpi=110)


def render_evidence(results: Dict) -> str:
    out = []
    if forest_rows(results):
        out.append(
            "Every finished entry at a glance: each arm's paired difference from its entry's chosen plain model "
            "(the tables below):\n\n"
            f"![paired differences of the evidence entries]({FOREST})"
        )
    for dataset, protocol in EVIDENCE:
        entries = [e for e in results["evidence"] if (e["dataset"], e["protocol"]) == (dataset, protocol)]
        sel = [
            f"| arm | setting | mean validation metric, seeds {', '.join(map(str, SELECT_SEEDS))} | chosen |",
            "| --- | --- | ---: | --- |",
        ]
        for arm in EVIDENCE[(dataset, protocol)]:
            mine = [e for e in entries if e["arm"] == arm]
            if not mine or any(len(e["select"]) < len(SELECT_SEEDS) for e in mine):
                sel.append(f"| {arm} | (selection not finished) | | |")
                continue
            scores, best = _select(mine)
            for i, e in enumerate(mine):
                sel.append(f"| {arm} | `{e['setting']}` | {scores[i]:.2f} | {'yes' if i == best else ''} |")
        finals = evidence_finals(results, dataset, protocol)
        cite = REPRODUCE[(dataset, protocol)][2]
        published = published_cell(dataset, protocol)
        as_published = next((arm for arm, (name, _) in finals.items() if name == "ma"), "plain, as published")
        out.append(
            f"### {dataset}, `{protocol}` protocol\n\nPublished plain GAT on this graph and protocol: "
            f'{published} ({cite}); ours is the row "{as_published}" below and the reproduction '
            f"table above.\n\nSelection (validation only):\n\n" + "\n".join(sel)
        )
        if not finals:
            out.append("Final runs: not run yet.")
            continue
        base = finals.get("plain", ("", {}))[1]
        published = {}
        for row in results["reproduction"]:
            if (row["dataset"], row["protocol"]) == (dataset, protocol):
                published = {r["seed"]: r["test"] for r in row["runs"]}
        rows = [
            "| arm | setting | seeds | test (mean ± std) | vs the chosen plain: paired difference ± SE (W/T/L) | "
            "vs plain as published: paired difference ± SE (W/T/L) |",
            "| --- | --- | ---: | ---: | ---: | ---: |",
        ]

        def paired(a, b):
            pc = paired_comparison(a, b)
            if pc["n"] < 2:  # no standard error from fewer than two paired seeds
                return "—" if pc["n"] == 0 else f"{pc['mean']:+.2f} (1 seed)"
            return paired_cell(pc)

        if published and as_published == "plain, as published":  # else an arm's chosen setting is these runs
            cell = mean_std_cell(published.values())
            rows.append(f"| plain, as published | `ma` | {len(published)} | {cell} | {paired(base, published)} | — |")
        for arm, (name, vals) in finals.items():
            vs_chosen = "—" if arm == "plain" else paired(base, vals)
            vs_pub = paired(published, vals) if published and name != "ma" else "—"
            cell = mean_std_cell(vals.values())
            rows.append(f"| {arm} | `{name}` | {len(vals)} | {cell} | {vs_chosen} | {vs_pub} |")
        head = f"Final seeds {FINAL_SEEDS[0]}-{FINAL_SEEDS[-1]}"
        if not entry_complete(results, dataset, protocol):
            missing = [arm for arm in EVIDENCE[(dataset, protocol)] if arm not in finals]
            head += (
                ", **open** (runs still going: each row's seeds column says how many are in"
                + (f"; no final run yet: {', '.join(missing)}" if missing else "")
                + "). Paired differences are over the seeds both arms have so far; no verdict is drawn, and the "
                "entry stays out of the picture and the README's summary, until every arm has every seed"
            )
        out.append(f"{head}:\n\n" + "\n".join(rows))
    return "\n\n".join(out)


BLOCKS = {"reproduction": render_reproduction, "evidence": render_evidence, "small": render_small}


render = renderer(BLOCKS)


def report(out: Path, page: Path) -> None:
    results = collect(out)
    text = render_page(page, results, render)  # rendered before anything is written: a bad page changes no file
    write_json(page.parent / "baselines" / "results.json", results)
    rows = forest_rows(results)
    if rows:
        plot_forest(rows, page.parent / FOREST)
    page.write_text(text)
    print(render_reproduction(results))
    print(render_evidence(results))


def main() -> None:
    one_line_errors()  # a mistake (a bad value, missing data): one line, not a traceback
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("step", choices=["reproduce", "select-small", "select", "final", "plan", "report"])
    p.add_argument(
        "rows",
        nargs="*",
        help="reproduce: rows DATASET:PROTOCOL (default: all); final: the arms to "
        "run (default: all; two processes can share the work, e.g. `final plain` and `final svgd`)",
    )
    p.add_argument("--out", type=out_dir, default=Path("runs/baselines"))
    p.add_argument(
        "--page",
        type=page_file,
        default=Path("docs/baselines.md"),
        help="the page whose generated blocks are rewritten; its results go beside it in baselines/",
    )
    p.add_argument("--threads", type=positive_int, default=1)
    p.add_argument(
        "--jobs",
        type=positive_int,
        default=1,
        help="select, final: run up to this many (setting, seed) runs at once, each in its own process with "
        "--threads threads (several small runs can share a GPU) (default: 1, one run after another)",
    )
    p.add_argument(
        "--evidence",
        metavar="DATASET:PROTOCOL",
        help="select, final: only this evidence entry (default: all), one of " + EVIDENCE_NAMES,
    )
    p.add_argument(
        "--seeds",
        nargs="+",
        type=seed_list,
        action=SeedsAction,
        default=FINAL_SEEDS,
        metavar="S",
        help="reproduce: the seeds (splits) to run, each a number or a range A-B (default: 0-9); two "
        "processes can share a row by taking disjoint seeds",
    )
    a = p.parse_args()
    check_defaults(p, argparse.Namespace(step="report" if a.step == "report" else "run", out=a.out, page=a.page))
    only = None
    if a.evidence is not None:
        only = tuple(a.evidence.split(":", 1))
        if only not in EVIDENCE:
            p.error(f"--evidence: unknown entry {a.evidence!r}; choose from {EVIDENCE_NAMES}")
    arms = sorted({arm for key in _entries(only) for arm in EVIDENCE[key]})
    if a.step == "reproduce":
        for row in a.rows:
            try:
                _row(row)
            except ValueError as exc:
                p.error(str(exc))
    elif a.step == "final":
        for arm in a.rows:
            if arm not in arms:
                p.error(f"rows: unknown arm {arm!r}; choose from {', '.join(arms)}")
    elif a.rows:
        p.error(f"rows: {a.step} takes no rows, got {' '.join(a.rows)}")
    if a.step == "reproduce":
        reproduce(a.out, a.rows, a.threads, a.seeds)
    elif a.step == "select-small":
        select_small(a.out, a.threads)
    elif a.step == "select":
        select(a.out, a.threads, only, a.jobs)
    elif a.step == "final":
        final(a.out, a.threads, a.rows, only, a.jobs)
    elif a.step == "plan":
        print("\n".join(plan(a.out, only)))
    else:
        report(a.out, a.page)


if __name__ == "__main__":
    main()
