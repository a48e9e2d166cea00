"""The calibration and out-of-distribution study behind docs/calibration.md: plain and SVGD heads against
temperature scaling and a deep ensemble of plain models.

    python -m studies.calibration run [STAGE ...]   # cora-select, cora-final, cora-ood, chameleon-... (resumable)
    python -m studies.calibration report            # runs -> docs/calibration/results.json, PNGs -> the page

A run is one model trained by :func:`graph_rma.tasks.node_training.train_run` under the dataset's protocol; its
validation and test logits are written to ``<out>/<dataset>/<id|ood>/<setting>/seed<k>.json`` (one file per run,
skipped when it exists, so a stopped stage continues where it stopped). Every arm is computed from those logits at
``report``: temperature scaling fits one temperature on the run's validation logits; the ensemble averages the
probabilities of 5 plain runs (seed ``s`` and ``s + 1000 k``, k = 1..4: the same split). ``ood`` runs hide the
labels of :data:`HIDDEN` classes (their nodes leave the training and validation sets; the model has the other
classes' outputs) and score the entropy of the hidden classes' test nodes against the rest's (AUROC).
"""

from __future__ import annotations

import functools
import json
import platform
from pathlib import Path
from typing import Dict, List, Tuple

import torch
import torch_geometric

from graph_rma import diagnostics as diag
from graph_rma.data.nodes import load_node_graph, num_splits, select_split
from graph_rma.engine import mean_std, paired_comparison, slug, write_json
from graph_rma.tasks.node_training import prepare_graph, train_run
from graph_rma.tasks.protocols import resolve_protocol
from studies.cora import PUBLISHED
from studies.pages import cli, publish, renderer
from studies.pages import mean_std_cell as _ms

DATA = {"cora": ("Cora", "gat"), "chameleon": ("chameleon_filtered", "luo")}
HIDDEN = {"cora": (5, 6), "chameleon": (4,)}  # the classes whose labels the ood runs hide (the last ones)
LOSS = {"early_stopping": "val_loss"}
SVGD_CORA = ["svgd:alpha=0.01,eps=8,roles=att_src/att_dst", "svgd:alpha=0.1,eps=8", "svgd:alpha=1,eps=8"]
SVGD_CHAM = ["svgd:alpha=0.01,eps=8,layers=convs.0", "svgd:alpha=0.1,eps=8,layers=convs.0"]
H8 = {"heads": 8}
DROPPED = "dropped (compute)"  # settings started, then left out of the grid before the finals: 2-3x the epochs
# Each family's settings (spec, protocol overrides), tried on SELECT_SEEDS; written on the page before the finals.
GRID: Dict[str, Dict[str, List[Tuple[str, Dict]]]] = {
    "cora": {
        "plain": [("ma", {})],
        "svgd": [(s, {}) for s in SVGD_CORA],
        DROPPED: [("ma", LOSS)] + [(s, LOSS) for s in SVGD_CORA],
    },
    "chameleon": {
        "plain": [("ma", H8), ("ma", {**H8, **LOSS})],
        "svgd": [(s, o) for s in SVGD_CHAM for o in (H8, {**H8, **LOSS})],
    },
}
ARMS = {"plain": ("plain", False), "plain+TS": ("plain", True), "svgd": ("svgd", False), "svgd+TS": ("svgd", True)}
ENSEMBLE = "ensemble of 5 plain"
SELECT_SEEDS, FINAL_SEEDS, MEMBERS = [100, 101, 102], list(range(10)), 5
BINS = 15
STAGES = [f"{d}-{s}" for d in DATA for s in ("select", "final", "ood")]
REPO = Path(__file__).resolve().parents[1]
COMMITTED = REPO / "docs" / "calibration" / "results.json"
# lower is better for every score but accuracy and the OOD AUROC
SCORES = [("accuracy", "accuracy %", False), ("ece", "ECE %", True), ("oe", "OE %", True), ("nll", "NLL", True)]
SCORES += [("brier", "Brier", True), ("temperature", "T", None)]


def name(spec: str, overrides: Dict) -> str:
    extra = ",".join(f"{k}={v}" for k, v in sorted(overrides.items()))
    return spec + (f" [{extra}]" if extra else "")


def member_seeds(seed: int) -> List[int]:
    return [seed + 1000 * k for k in range(MEMBERS)]


@functools.lru_cache(maxsize=4)
def _graph(dataset: str, protocol: str):
    return prepare_graph(load_node_graph(dataset), resolve_protocol(protocol, dataset))


def hide_classes(data, hidden) -> Tuple[object, torch.Tensor]:
    """``data`` with the ``hidden`` classes' nodes out of the training, validation and test masks and the other
    classes renumbered 0..K'-1 (hidden nodes get -1); and the ``[N]`` mask of the hidden classes' nodes."""
    out = data.clone()
    ood = torch.isin(data.y, torch.tensor(hidden, dtype=data.y.dtype))
    keep = sorted(set(range(int(data.y.max()) + 1)) - set(hidden))
    new = torch.full((int(data.y.max()) + 1,), -1, dtype=torch.long)
    new[keep] = torch.arange(len(keep))
    out.y = new[data.y]
    for mask in ("train_mask", "val_mask", "test_mask"):
        setattr(out, mask, getattr(data, mask) & ~ood)
    return out, ood


def run_one(out: Path, key: str, spec: str, overrides: Dict, seed: int, ood: bool = False) -> Path:
    """Train one model (skipped when its file exists) and write its validation and test logits."""
    path = out / key / ("ood" if ood else "id") / slug(name(spec, overrides)) / f"seed{seed}.json"
    if path.is_file():
        return path
    dataset, protocol = DATA[key]
    proto = resolve_protocol(protocol, dataset, overrides)
    graph = _graph(dataset, protocol)
    full = select_split(graph, seed % num_splits(dataset))
    data, hidden = hide_classes(full, HIDDEN[key] if ood else ())
    metrics, _, net = train_run(proto, data, spec, seed)  # the protocol's model, metric and fit for data's classes
    with torch.no_grad():
        logits = net(data.x, data.edge_index)
    test = full.test_mask

    def rows(t):
        return [[round(v, 5) for v in row] for row in t.tolist()]

    record = {
        "setting": name(spec, overrides),
        "seed": seed,
        "epochs": metrics["epochs"],
        "seconds": metrics["sec_per_epoch"] * metrics["epochs"],
        "val": {"logits": rows(logits[data.val_mask]), "y": data.y[data.val_mask].tolist()},
        "test": {"logits": rows(logits[test]), "y": data.y[test].tolist(), "ood": hidden[test].tolist()},
    }
    write_json(path, record)
    return path


def jobs(out: Path, stage: str) -> List[Tuple[str, Dict, int]]:
    """A stage's runs ``(spec, overrides, seed)`` in order: every arm's own run of each final seed first, then the
    ensemble's other members, so that a stage stopped early has the single-model arms on every seed."""
    key, step = stage.split("-")
    if step == "select":
        grid = [s for f, g in GRID[key].items() if f != DROPPED for s in g]
        return [(spec, o, seed) for seed in SELECT_SEEDS for spec, o in grid]
    committed = json.loads(COMMITTED.read_text()) if COMMITTED.is_file() else {}
    choice = _select(out, key)[1] or committed.get(key, {}).get("choice")
    if not choice:
        raise SystemExit(f"{stage}: the selection of {key} is not finished (run {key}-select, then report)")
    own = [(*_setting(key, s), seed) for seed in FINAL_SEEDS for s in sorted({choice[arm] for arm in ARMS})]
    spec, o = _setting(key, choice["plain"])
    return own + [(spec, o, m) for seed in FINAL_SEEDS for m in member_seeds(seed)[1:]]


def run(out: Path, stages: List[str], threads: int = 1, reverse: bool = False) -> None:
    """Train every run of each stage that has no file yet (``reverse``: from the end, for a second process)."""
    torch.set_num_threads(threads)
    for stage in stages or STAGES:
        todo = jobs(out, stage)
        for spec, o, seed in todo[::-1] if reverse else todo:
            run_one(out, stage.split("-")[0], spec, o, seed, ood=stage.endswith("ood"))
            print(f"{stage}: {name(spec, o)} seed {seed} done", flush=True)


def _setting(key: str, setting: str) -> Tuple[str, Dict]:
    return next((s, o) for fam in GRID[key].values() for s, o in fam if name(s, o) == setting)


# ----------------------------------------------------------------------------------------------------------------
# Measures: every arm from the runs' logits
# ----------------------------------------------------------------------------------------------------------------
def _load(path: Path) -> Dict:
    r = json.loads(path.read_text())
    for part in ("val", "test"):
        r[part] = {k: torch.tensor(v, dtype=torch.float64 if k == "logits" else torch.long) for k, v in r[part].items()}
    return r


def _runs(out: Path, key: str, cond: str, setting: str) -> Dict[int, Dict]:
    folder = out / key / cond / slug(setting)
    return {int(p.stem[4:]): _load(p) for p in sorted(folder.glob("seed*.json"))}


def scores(probs: torch.Tensor, y: torch.Tensor, temperature: float = 1.0) -> Dict[str, float]:
    """Accuracy, ECE and OE (15 bins) in %, NLL and Brier of ``probs`` on labels ``y``."""
    acc = 100 * float((probs.argmax(1) == y).double().mean())
    ece, oe = 100 * diag.expected_calibration_error(probs, y, BINS), 100 * diag.overconfidence_error(probs, y, BINS)
    nll, brier = diag.negative_log_likelihood(probs, y), diag.brier_score(probs, y)
    return _round(dict(accuracy=acc, ece=ece, oe=oe, nll=nll, brier=brier, temperature=temperature))


def _round(d: Dict) -> Dict:
    return {k: round(v, 5) if isinstance(v, float) else v for k, v in d.items()}


def arm_probs(run: Dict, scaled: bool) -> Tuple[torch.Tensor, float]:
    """A run's test probabilities, temperature-scaled on its own validation logits when ``scaled``; and T."""
    t = diag.fit_temperature(run["val"]["logits"], run["val"]["y"]) if scaled else 1.0
    return diag.class_probabilities(run["test"]["logits"], t), t


def _select(out: Path, key: str) -> Tuple[List[Dict], Dict[str, str]]:
    rows, choice = [], {}
    for family, grid in GRID[key].items():
        for spec, o in grid:
            for seed, r in sorted(_runs(out, key, "id", name(spec, o)).items()):
                if seed not in SELECT_SEEDS:
                    continue
                t = diag.fit_temperature(r["val"]["logits"], r["val"]["y"])
                p, pt = diag.class_probabilities(r["val"]["logits"]), diag.class_probabilities(r["val"]["logits"], t)
                nll, nll_t = (
                    diag.negative_log_likelihood(p, r["val"]["y"]),
                    diag.negative_log_likelihood(pt, r["val"]["y"]),
                )
                acc = 100 * float((p.argmax(1) == r["val"]["y"]).double().mean())
                row = dict(family=family, setting=name(spec, o), seed=seed, val_acc=acc, val_nll=nll, T=t)
                rows.append(_round({**row, "val_nll_ts": nll_t, "seconds": r["seconds"], "epochs": r["epochs"]}))
    for arm, (family, scaled) in ARMS.items():
        mean = {}
        for row in rows:
            if row["family"] == family:
                mean.setdefault(row["setting"], []).append(row["val_nll_ts" if scaled else "val_nll"])
        done = {s: sum(v) / len(v) for s, v in mean.items() if len(v) == len(SELECT_SEEDS)}
        if len(done) == len(GRID[key][family]):  # every setting on every selection seed: the rule can pick
            choice[arm] = min(done, key=lambda s: (done[s], list(done).index(s)))
    return rows, choice if len(choice) == len(ARMS) else {}


def _final(out: Path, key: str, choice: Dict[str, str], cond: str) -> Tuple[Dict, Dict]:
    """Per arm ``{seed: scores}`` (``cond`` id) or ``{seed: {auroc, accuracy}}`` (ood) over the finished final seeds;
    and the pooled test predictions per arm (for the plots)."""
    runs = {s: _runs(out, key, cond, s) for s in set(choice.values())}
    result, pooled = {}, {}
    arms = {**{a: (choice[a], scaled) for a, (_, scaled) in ARMS.items()}, ENSEMBLE: (choice["plain"], False)}
    for arm, (setting, scaled) in arms.items():
        for seed in FINAL_SEEDS:
            seeds = member_seeds(seed) if arm == ENSEMBLE else [seed]
            if not all(s in runs[setting] for s in seeds):
                continue
            members = [arm_probs(runs[setting][s], scaled) for s in seeds]
            probs, t = diag.ensemble_probabilities([p for p, _ in members]), members[0][1]
            y, ood = runs[setting][seed]["test"]["y"], runs[setting][seed]["test"]["ood"].bool()
            if cond == "id":
                result.setdefault(arm, {})[seed] = scores(probs, y, t)
            else:
                ent = diag.predictive_entropy(probs)
                acc = 100 * float((probs[~ood].argmax(1) == y[~ood]).double().mean())
                auroc = 100 * diag.entropy_auroc(ent[~ood], ent[ood])
                result.setdefault(arm, {})[seed] = _round({"auroc": auroc, "accuracy": acc})
            pooled.setdefault(arm, []).append((probs, y, ood))
    return result, pooled


def collect(out: Path, plots: bool = False) -> Dict:
    results = json.loads(COMMITTED.read_text()) if COMMITTED.is_file() else {}
    for key in DATA:
        if not (out / key).is_dir():
            continue  # keeps its committed results
        rows, choice = _select(out, key)
        entry = {"select": rows, "choice": choice, "final": {}, "ood": {}}
        if choice:
            entry["final"], pooled = _final(out, key, choice, "id")
            entry["ood"], pooled_ood = _final(out, key, choice, "ood")
            if plots:
                _plots(key, pooled, pooled_ood)
        results[key] = entry
    results["conditions"] = (
        f"torch {torch.__version__}, PyG {torch_geometric.__version__}, {platform.machine()} CPU, one thread per "
        "run, one or two runs at a time on a 2-core machine shared with other jobs"
    )
    return results


def _png(key: str, arm: str) -> str:
    return f"{key}-reliability-{slug(arm)[:-7]}.png"


def _plots(key: str, pooled: Dict, pooled_ood: Dict) -> None:
    folder = COMMITTED.parent
    for arm, parts in pooled.items():
        if len(parts) == len(FINAL_SEEDS):
            probs, y = torch.cat([p for p, _, _ in parts]), torch.cat([y for _, y, _ in parts])
            title = f"{DATA[key][0]}: {arm}, {len(parts)} seeds pooled"
            diag.reliability_diagram(probs, y, folder / _png(key, arm), BINS, title)
    if pooled_ood and all(len(v) == len(FINAL_SEEDS) for v in pooled_ood.values()):
        ent = {
            f"{arm}, held-out classes": torch.cat([diag.predictive_entropy(p[o]) for p, _, o in v])
            for arm, v in pooled_ood.items()
        }
        ent["plain, seen classes"] = torch.cat([diag.predictive_entropy(p[~o]) for p, _, o in pooled_ood["plain"]])
        diag.plot_entropy_cdf(
            ent, folder / f"{key}-entropy-cdf.png", f"{DATA[key][0]}: test-node entropy, pooled seeds"
        )


# ----------------------------------------------------------------------------------------------------------------
# Rendering: the page's blocks from the committed results
# ----------------------------------------------------------------------------------------------------------------
def _pair(a: Dict, b: Dict, lower: bool) -> Dict:
    """``b - a`` over the seeds both have, with wins counted where ``b`` is better."""
    pc = paired_comparison({int(s): v for s, v in a.items()}, {int(s): v for s, v in b.items()})
    if lower:
        pc = {**pc, "wins": pc["losses"], "losses": pc["wins"]}
    better = pc["mean"] < 0 if lower else pc["mean"] > 0
    noise = pc["n"] < 2 or not pc["se"] > 0 or abs(pc["mean"] / pc["se"]) < 2
    pc["verdict"] = "within noise" if noise else ("better" if better else "worse")
    return pc


def _cell(pc: Dict, digits: int = 2) -> str:
    m, se = f"{pc['mean']:+.{digits}f}", f"{pc['se']:.{digits}f}"
    if pc["n"] < 2:
        return f"{m} (one seed: no spread)"
    return f"{m} ± {se} ({pc['wins']}/{pc['ties']}/{pc['losses']}), {pc['verdict']}"


def _planned(key: str, choice: Dict) -> int:
    """Final runs of one condition: 5 per seed for the ensemble's setting, one per other chosen setting."""
    others = len({choice[a] for a in ARMS} - {choice["plain"]}) if choice else 3
    return len(FINAL_SEEDS) * (MEMBERS + others)


def render_plan(results: Dict) -> str:
    lines = [
        "| graph (protocol) | selection runs done | seconds per run (selection, measured) | final runs per condition "
        "| planned minutes, final and ood side by side |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for key, (dataset, protocol) in DATA.items():
        rows = [r for r in results.get(key, {}).get("select", []) if r["family"] != DROPPED]
        total = len(SELECT_SEEDS) * sum(len(g) for f, g in GRID[key].items() if f != DROPPED)
        n = _planned(key, results.get(key, {}).get("choice"))
        sec = mean_std([r["seconds"] for r in rows])[0] if rows else None
        plan = f"{n * sec / 60:.0f}" if sec else "–"
        lines.append(
            f"| {dataset} (`{protocol}`) | {len(rows)} of {total} | {_ms([r['seconds'] for r in rows], 0)} | {n} "
            f"| {plan} |"
        )
    return "\n".join(lines)


def render_select(key: str, results: Dict) -> str:
    entry = results.get(key, {})
    rows, choice = entry.get("select", []), entry.get("choice", {})
    if not rows:
        return "Not run yet."
    lines = [
        "| family | setting | seeds | val NLL | val NLL after TS | T | val acc % | epochs | chosen for |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for family, grid in GRID[key].items():
        for spec, o in grid:
            mine = [r for r in rows if r["setting"] == name(spec, o)]
            if not mine:
                continue
            arms = ", ".join(a for a in ARMS if choice.get(a) == name(spec, o))
            cells = [_ms([r[k] for r in mine], d) for k, d in (("val_nll", 3), ("val_nll_ts", 3), ("T", 2))]
            lines.append(
                f"| {family} | `{name(spec, o)}` | {len(mine)} | {' | '.join(cells)} | "
                f"{_ms([r['val_acc'] for r in mine], 1)} | {mean_std([r['epochs'] for r in mine])[0]:.0f} | {arms} |"
            )
    if not choice:
        lines += ["", "The selection is not finished: no setting is chosen yet."]
    return "\n".join(lines)


COMPARE = [("svgd", "plain"), ("svgd+TS", "plain+TS"), ("plain+TS", "plain"), ("svgd+TS", ENSEMBLE), ("svgd", ENSEMBLE)]


#: The plain arm's published test accuracy per graph (mean, std, source): the reproduction the comparisons stand on.
PUBLISHED_PLAIN = {"cora": PUBLISHED["ma"]}
OOD_SCORES = [("auroc", "entropy AUROC %, held-out vs seen classes", False), ("accuracy", "accuracy % (seen)", False)]
PARTS = {"final": (SCORES, ["accuracy", "ece", "nll", "brier"]), "ood": (OOD_SCORES, ["auroc"])}


def _per(part: Dict, arm: str, k: str) -> Dict:
    return {s: r[k] for s, r in part.get(arm, {}).items()}


def render_part(part: str, key: str, results: Dict) -> str:
    """One condition's table (mean ± std per arm) and its paired comparisons."""
    arms = results.get(key, {}).get(part) or {}
    if not arms:
        return "Not run yet."
    columns, paired = PARTS[part]
    label, lower = {k: lab for k, lab, _ in columns}, {k: lo for k, _, lo in columns}
    lines = [
        f"| arm | setting | seeds | {' | '.join(label.values())} |",
        "| --- | --- | ---: |" + " ---: |" * len(label),
    ]
    choice = results[key]["choice"]
    for arm, runs in arms.items():
        cells = [_ms([r[k] for r in runs.values()], 3 if k in ("nll", "brier") else 2) for k in label]
        lines.append(f"| {arm} | `{choice['plain' if arm == ENSEMBLE else arm]}` | {len(runs)} | {' | '.join(cells)} |")
    if part == "final" and key in PUBLISHED_PLAIN:  # the plain arm's published accuracy, beside ours
        mean, std, source = PUBLISHED_PLAIN[key]
        cells = [f"{mean:.2f} ± {std:.2f}" if k == "accuracy" else "–" for k in label]
        lines.append(f"| plain, published ({source}) | `ma` | – | {' | '.join(cells)} |")
    head = " | ".join(label[k] for k in paired)
    lines += ["", f"| paired, first − second (± SE; W/T/L: the first better / tied / worse) | {head} |"]
    lines.append("| --- |" + " ---: |" * len(paired))
    for a, b in COMPARE:
        if a in arms and b in arms:
            pcs = {k: _pair(_per(arms, b, k), _per(arms, a, k), lower[k]) for k in paired}
            cells = [_cell(pc, 3 if k in ("nll", "brier") else 2) for k, pc in pcs.items()]
            lines.append(f"| {a} − {b} | {' | '.join(cells)} |")
    return "\n".join(lines)


def verdicts(results: Dict, key: str) -> Dict[str, str]:
    """The verdict per claim on one graph once the single-model arms have every final seed; the ensemble beside
    them over the seeds it has (at least 2), its number stated."""
    entry, out = results.get(key, {}), {}

    for claim, part, k, lower in (("calibration", "final", "ece", True), ("ood", "ood", "auroc", False)):
        runs = entry.get(part) or {}
        if not all(len(runs.get(arm, {})) == len(FINAL_SEEDS) for arm in ARMS):
            continue
        sv, ts = (
            _pair(_per(runs, a, k), _per(runs, b, k), lower) for a, b in (("plain", "svgd"), ("plain+TS", "svgd+TS"))
        )
        label = "ECE" if claim == "calibration" else "entropy AUROC"
        text = f"SVGD − plain {label} {_cell(sv)}; SVGD+TS − plain+TS {_cell(ts)}"
        other = "svgd+TS" if claim == "calibration" else "svgd"
        en = _pair(_per(runs, ENSEMBLE, k), _per(runs, other, k), lower)
        if en["n"] >= 2:
            text += f"; {other} − ensemble ({en['n']} paired seeds) {_cell(en)}"
        if claim == "calibration":  # T < 1: the raw model is underconfident, > 1: overconfident
            temps = [mean_std(list(_per(runs, arm, "temperature").values()))[0] for arm in ("plain+TS", "svgd+TS")]
            text += f" (fitted temperature, mean: plain {temps[0]:.2f}, SVGD {temps[1]:.2f})"
        out[claim] = text
    return out


def render_status(results: Dict) -> str:
    lines = []
    for key, (dataset, protocol) in DATA.items():
        v = verdicts(results, key)
        entry = results.get(key, {})
        done = {part: {a: len(r) for a, r in (entry.get(part) or {}).items()} for part in ("final", "ood")}
        for part, claim in (("calibration", "calibration"), ("ood", "out-of-distribution entropy")):
            if part in v:
                lines.append(f"* **{dataset}, {claim}** ({len(FINAL_SEEDS)} paired seeds, complete): {v[part]}.")
            else:
                seeds = done["final" if part == "calibration" else "ood"]
                got = ", ".join(f"{a} {n}" for a, n in seeds.items()) or "no final run"
                lines.append(f"* **{dataset}, {claim}**: pending (final seeds so far: {got}).")
    lines.append(
        "* **Text task** (the self-attentive encoder on SST-2 or MR, out of distribution on TREC / SUBJ): not yet run."
    )
    return "\n".join(lines) + f"\n\nRuns: {results.get('conditions', '–')}."


def render_plots(key: str, results: Dict) -> str:
    """The reliability diagrams of the arms with every final seed, and the entropy CDFs once every arm has them."""
    entry = results.get(key, {})
    arms = [a for a, runs in (entry.get("final") or {}).items() if len(runs) == len(FINAL_SEEDS)]
    pics = [f"![{a}](calibration/{_png(key, a)})" for a in arms]
    ood = entry.get("ood") or {}
    if len(ood) == len(ARMS) + 1 and all(len(v) == len(FINAL_SEEDS) for v in ood.values()):
        pics.append(f"![entropy CDF](calibration/{key}-entropy-cdf.png)")
    return "\n".join(pics) or "No plot yet: an arm is drawn once it has every final seed."


BLOCKS = {"calibration-status": render_status, "calibration-plan": render_plan}
for _key in DATA:
    BLOCKS[f"calibration-{_key}-select"] = functools.partial(render_select, _key)
    BLOCKS[f"calibration-{_key}-final"] = functools.partial(render_part, "final", _key)
    BLOCKS[f"calibration-{_key}-ood"] = functools.partial(render_part, "ood", _key)
    BLOCKS[f"calibration-{_key}-plots"] = functools.partial(render_plots, _key)
render = renderer(BLOCKS)


def report(out: Path, page: Path) -> None:
    publish(page, collect(out, plots=True), BLOCKS)


def main() -> None:
    cli(
        __doc__,
        run=run,
        report=report,
        out="runs/calibration",
        page="docs/calibration.md",
        stages=STAGES,
        threads=True,
    )


if __name__ == "__main__":
    main()
