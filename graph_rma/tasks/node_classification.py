r"""Node classification: the GAT benchmark with and without repulsive attention, on Cora/CiteSeer (public split)
and the heterophilous Geom-GCN graphs (Cornell, Texas, Wisconsin, chameleon, squirrel, Actor: 10 fixed splits; seed
``s`` trains on split ``s mod 10``, so 10 consecutive seeds cover the standard protocol).

The GAT paper's Cora setup (Veličković et al., 2018) is the baseline: 8 heads x 8 hidden units with ELU, one
output head, dropout 0.6 on inputs and attention, Adam (lr 0.005, weight decay 5e-4), up to 1000 epochs with
patience 100 on validation accuracy (training stops 100 epochs after the last strict improvement; the GAT code
also resets the counter whenever the validation loss reaches a new minimum, which under dropout keeps happening
long after accuracy has peaked and roughly doubles the epochs for the same selected model),
and test accuracy at the best validation epoch (highest validation accuracy, ties broken by lower validation
loss). Every variant (:mod:`graph_rma.variants`) runs with exactly these settings over the same seeds.
``--early-stopping gat`` uses the GAT code's rule instead (:class:`EarlyStopping`): the patience counter resets
whenever validation accuracy reaches its maximum *or* validation loss its minimum (``>=``/``<=``), and the model
kept is the last one at which both held.

Each finished (variant, seed) run is written atomically (``runs/<variant>/seed<k>.json`` and a checkpoint in
``checkpoints/``), so an interrupted study keeps its finished runs and ``--resume`` skips them. The summary is a
table (mean +- std over seeds of test and validation accuracy, the paired difference of each variant against the
first with its standard error and wins/ties/losses, head diversity *Dist*, epochs, seconds per epoch), ``results.json``, ``results.csv`` and ``accuracy.png``.

From Python::

    from graph_rma.tasks.node_classification import run_study
    result = run_study(["ma", "svgd:alpha=0.01,eps=8,roles=att_src/att_dst"], seeds=range(3), out="runs/cora")
    print(result["table"])

From the shell: ``graph-rma cora`` (see ``graph-rma cora --help``).
"""
from __future__ import annotations

import copy
import math
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

import torch
import torch.nn.functional as F

from ..data.nodes import NODE_DATASETS, load_node_splits, num_splits
from ..diagnostics import head_distance
from ..engine import (EarlyStopping, ResumeMismatchError, check_resume, mean_std, paired_comparison, read_json,
                      save_checkpoint, seed_everything, slug, write_csv, write_json)
from ..engine.optional import MissingExtraError, require
from ..models.gat import GAT
from ..variants import apply_variant, parse_variant
from .defaults import DROPATTN, MA, REG, SGLD, SPOS, SVGD  # noqa: F401 (the variant specs of the study)
from .defaults import NODE_DEFAULT_SEEDS as DEFAULT_SEEDS
from .defaults import NODE_DEFAULT_VARIANTS as DEFAULT_VARIANTS
from .defaults import NODE_FULL_SEEDS as FULL_SEEDS
from .defaults import NODE_FULL_VARIANTS as FULL_VARIANTS


# ----------------------------------------------------------------------------------------------------------------
# One run
# ----------------------------------------------------------------------------------------------------------------
def _accuracy(logits: torch.Tensor, y: torch.Tensor, mask: torch.Tensor) -> float:
    return float((logits[mask].argmax(dim=-1) == y[mask]).float().mean())


def train_run(data, spec: str, seed: int, model_kwargs: Dict[str, Any], epochs: int = 1000, patience: int = 100,
              lr: float = 0.005, weight_decay: float = 5e-4, early_stopping: str = "val_acc"):
    """Train one GAT with variant ``spec`` from ``seed``; returns ``(metrics, best_state_dict, model)``.

    ``data`` has ``x`` (dense or sparse), ``edge_index``, ``y`` and the three masks; ``early_stopping`` is an
    :class:`EarlyStopping` rule.
    """
    variant = parse_variant(spec)
    seed_everything(seed)
    model = GAT(**model_kwargs)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    with warnings.catch_warnings():  # the 1-head output layer is not a particle group; that is expected
        warnings.filterwarnings("ignore", message=".*fewer than 2; not a particle group")
        setup = apply_variant(variant, model, optimizer, seed=seed)
    x, ei, y = data.x, data.edge_index, data.y
    train_mask, val_mask, test_mask = data.train_mask, data.val_mask, data.test_mask

    best = {"val_acc": -1.0, "val_loss": math.inf, "test_acc": 0.0, "epoch": 0}
    best_state = copy.deepcopy(model.state_dict())
    stopper = EarlyStopping(early_stopping, patience)
    start, epoch = time.perf_counter(), 0
    for epoch in range(1, epochs + 1):
        model.train()
        optimizer.zero_grad()
        if variant.reg is not None:
            logits, attention, head_out = model.forward_with_attention(x, ei)
            loss = F.cross_entropy(logits[train_mask], y[train_mask])
            loss = loss + setup.penalty(model, attention=attention[:1], head_outputs=[head_out])
        else:
            logits = model(x, ei)
            loss = F.cross_entropy(logits[train_mask], y[train_mask])
        loss.backward()
        optimizer.step()

        model.eval()
        with torch.no_grad():
            logits = model(x, ei)
            val_loss = float(F.cross_entropy(logits[val_mask], y[val_mask]))
            val_acc = _accuracy(logits, y, val_mask)
        keep, stop = stopper.update(val_acc, val_loss)
        if keep:
            best = {"val_acc": val_acc, "val_loss": val_loss, "test_acc": _accuracy(logits, y, test_mask),
                    "epoch": epoch}
            best_state = copy.deepcopy(model.state_dict())
        if stop:
            break
    seconds = time.perf_counter() - start

    model.load_state_dict(best_state)
    model.eval()
    with torch.no_grad():
        dist = head_distance(model.head_outputs(x, ei)[test_mask])
    metrics = {
        "test_acc": best["test_acc"], "val_acc": best["val_acc"], "val_loss": best["val_loss"],
        "best_epoch": best["epoch"], "epochs": epoch, "sec_per_epoch": seconds / max(epoch, 1), "dist": dist,
    }
    return metrics, best_state, model


# ----------------------------------------------------------------------------------------------------------------
# A study: variants x seeds, resumable
# ----------------------------------------------------------------------------------------------------------------
def summarize(results: List[Dict[str, Any]], variants: Sequence[str]) -> List[Dict[str, Any]]:
    """One row per variant: mean and std over seeds (``std`` is the sample standard deviation), and for every variant
    after the first the paired difference of test accuracy against the first (``paired_*``: mean and standard error
    in points, wins/ties/losses over the seeds both ran; :func:`graph_rma.engine.paired_comparison`)."""
    rows = []
    base = {r["seed"]: 100 * r["metrics"]["test_acc"] for r in results if variants and r["variant"] == variants[0]}
    for spec in variants:
        runs = [r for r in results if r["variant"] == spec]
        if not runs:
            continue
        row: Dict[str, Any] = {"variant": spec, "seeds": len(runs)}
        for key, scale in (("test_acc", 100), ("val_acc", 100), ("dist", 1), ("epochs", 1), ("sec_per_epoch", 1)):
            m, s = mean_std([r["metrics"][key] * scale for r in runs])
            row[f"{key}_mean"], row[f"{key}_std"] = m, s
        if spec != variants[0]:
            pc = paired_comparison(base, {r["seed"]: 100 * r["metrics"]["test_acc"] for r in runs})
            row.update({f"paired_{k}": v for k, v in pc.items()})
        rows.append(row)
    return rows


def format_table(rows: List[Dict[str, Any]]) -> str:
    """A markdown table of :func:`summarize`'s rows; the paired column compares each variant with the first row."""
    lines = ["| variant | seeds | test acc (%) | paired diff vs first (W/T/L) | val acc (%) | Dist | epochs | s/epoch |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        paired = "—"
        if "paired_mean" in r and r["paired_n"] > 1:
            paired = (f"{r['paired_mean']:+.2f} ± {r['paired_se']:.2f} "
                      f"({r['paired_wins']}/{r['paired_ties']}/{r['paired_losses']})")
        lines.append(
            f"| `{r['variant']}` | {r['seeds']} | {r['test_acc_mean']:.1f} ± {r['test_acc_std']:.1f} | {paired} | "
            f"{r['val_acc_mean']:.1f} ± {r['val_acc_std']:.1f} | {r['dist_mean']:.2f} ± {r['dist_std']:.2f} | "
            f"{r['epochs_mean']:.0f} | {r['sec_per_epoch_mean']:.3f} |"
        )
    return "\n".join(lines)


def plot(results: List[Dict[str, Any]], variants: Sequence[str], path: Path) -> Path:
    """Accuracy per variant: each seed's test and validation accuracy, with the mean +- std (a PNG at ``path``).

    Needs matplotlib (the ``plots`` extra); raises :class:`~graph_rma.engine.optional.MissingExtraError` without it.
    """
    figure = require("matplotlib.figure", "plots", "the accuracy plot")
    backend = require("matplotlib.backends.backend_agg", "plots", "the accuracy plot")

    fig = figure.Figure(figsize=(max(4.0, 1.4 * len(variants) + 1.5), 3.6))
    backend.FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for k, spec in enumerate(variants):
        for offset, key, color in ((-0.12, "test_acc", "tab:blue"), (0.12, "val_acc", "tab:orange")):
            vals = [100 * r["metrics"][key] for r in results if r["variant"] == spec]
            if not vals:
                continue
            m, s = mean_std(vals)
            ax.scatter([k + offset] * len(vals), vals, s=10, color=color, alpha=0.5)
            ax.errorbar([k + offset], [m], yerr=[s], fmt="o", color=color, capsize=4,
                        label=("test" if key == "test_acc" else "validation") if k == 0 else None)
    ax.set_xticks(range(len(variants)))
    names = [parse_variant(v).name for v in variants]
    if len(set(names)) < len(names):  # two configurations of one family: show the specs
        names = [v.replace(",", ",\n") for v in variants]
    ax.set_xticklabels(names, rotation=20, fontsize=8)
    ax.set_ylabel("accuracy (%)")
    ax.set_title("GAT on Cora: accuracy per variant\n(points: seeds; bars: mean ± std)", fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=120, format="png")
    tmp.replace(path)
    return path


def run_study(
    variants: Sequence[str] = DEFAULT_VARIANTS,
    seeds: Sequence[int] = tuple(range(DEFAULT_SEEDS)),
    out: Union[str, Path] = "runs/cora",
    *,
    dataset: str = "Cora",
    root: Optional[str] = None,
    resume: bool = False,
    epochs: int = 1000,
    patience: int = 100,
    early_stopping: str = "val_acc",
    lr: float = 0.005,
    weight_decay: float = 5e-4,
    hidden: int = 8,
    heads: int = 8,
    out_heads: int = 1,
    dropout: float = 0.6,
    v2: bool = False,
    threads: int = 1,
    make_plot: bool = True,
    progress: bool = True,
) -> Dict[str, Any]:
    """Train every variant on every seed (seed-major), resumable; write ``results.json``/``.csv`` and the plot.

    Returns ``{"config", "seeds", "variants", "summary" (one row per variant), "runs", "table" (markdown),
    "files" (written paths), "interrupted"}``. ``resume=True`` reuses finished runs in ``out`` whose settings
    match. A KeyboardInterrupt ends the study early with the finished runs saved (``interrupted`` is then True).
    """
    from tqdm import tqdm

    for name, value in (("epochs", epochs), ("patience", patience), ("threads", threads)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: expected a positive integer, got {value!r}")
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise ValueError("seeds: expected at least one seed")
    EarlyStopping(early_stopping, patience)  # validates the rule before any data is loaded
    torch.set_num_threads(threads)
    variants = [parse_variant(v).spec for v in variants]  # canonical spec strings (also validates them)
    if len(set(variants)) != len(variants):
        raise ValueError(f"variants: duplicates after parsing: {variants}")
    n_splits = num_splits(dataset)  # also validates the name before any data is loaded
    datas = load_node_splits(dataset, sorted({s % n_splits for s in seeds}), root=root)
    first = next(iter(datas.values()))
    ds_name = next(n for n in NODE_DATASETS if n.lower() == dataset.lower())
    model_kwargs = {"in_channels": first.num_features, "out_channels": int(first.y.max()) + 1,
                    "hidden_channels": hidden, "heads": heads, "out_heads": out_heads,
                    "dropout": dropout, "attn_dropout": dropout, "v2": v2}
    config = {"dataset": ds_name, "epochs": epochs, "patience": patience, "stop_on": early_stopping,
              "lr": lr, "weight_decay": weight_decay, "model_kwargs": model_kwargs}
    out = Path(out)

    def flat(c: Dict[str, Any]) -> Dict[str, Any]:
        return {**{k: v for k, v in c.items() if k != "model_kwargs"}, **c.get("model_kwargs", {})}

    results: List[Dict[str, Any]] = []
    todo = []
    differing: Dict[str, None] = {}  # why finished runs in out were not reused (other settings), in order
    for seed in seeds:  # seed-major: an interrupted study has every variant on the same seeds
        for spec in variants:
            path = out / "runs" / slug(spec) / f"seed{seed}.json"
            if resume and path.is_file():
                try:
                    saved = read_json(path)
                except (OSError, ValueError):
                    saved = None
                if saved is not None and saved.get("config") == config and saved.get("variant") == spec:
                    results.append(saved)
                    continue
                if saved is not None and isinstance(saved.get("config"), dict):
                    try:
                        check_resume(flat(saved["config"]), flat(config), may_change=())
                    except ResumeMismatchError as exc:
                        differing.update(dict.fromkeys(f"{k} {o!r} -> {n!r}" for k, o, n in exc.differences))
            todo.append((spec, seed, path))
    if resume and results:
        print(f"resume: {len(results)} finished run(s) reused from {out}, {len(todo)} to do", file=sys.stderr)
    if differing:
        print(f"resume: runs in {out} made with other settings ({', '.join(differing)}) are trained again",
              file=sys.stderr)

    interrupted = False
    bar = tqdm(todo, desc=f"{ds_name.lower()} runs", unit="run", file=sys.stderr, dynamic_ncols=True,
               disable=not progress)
    try:
        for spec, seed, path in bar:
            bar.set_postfix_str(f"{parse_variant(spec).name} seed {seed}")
            data = datas[seed % n_splits]  # a dataset with fixed splits: seed s trains on split s mod splits
            metrics, state, model = train_run(data, spec, seed, model_kwargs, epochs=epochs, patience=patience,
                                              lr=lr, weight_decay=weight_decay, early_stopping=early_stopping)
            ckpt = out / "checkpoints" / f"{slug(spec)}_seed{seed}.pt"
            save_checkpoint(ckpt, {"task": "cora", "dataset": ds_name, "split": seed % n_splits, "model_kwargs": model.model_kwargs,
                                   "variant": spec, "seed": seed, "model": state, "metrics": metrics})
            record = {"variant": spec, "seed": seed, "split": seed % n_splits, "config": config, "metrics": metrics,
                      "checkpoint": str(ckpt.relative_to(out))}
            write_json(path, record)  # last: a run counts as finished only once its record exists
            results.append(record)
            bar.set_postfix_str(f"{parse_variant(spec).name} seed {seed}: test {100 * metrics['test_acc']:.1f}")
    except KeyboardInterrupt:
        interrupted = True
        print("\ninterrupted: finished runs are saved; rerun with --resume to continue", file=sys.stderr)
    finally:
        bar.close()

    results.sort(key=lambda r: (variants.index(r["variant"]), r["seed"]))
    rows = summarize(results, variants)
    files: List[Path] = []
    if rows:
        files.append(write_json(out / "results.json", {"config": config, "seeds": seeds, "variants": variants,
                                                       "summary": rows, "runs": results}))
        files.append(write_csv(out / "results.csv", rows))
        if make_plot:
            try:
                files.append(plot(results, variants, out / "accuracy.png"))
            except MissingExtraError as exc:  # optional: the results are written, the run goes on
                print(f"plot skipped ({exc.module} not installed): {exc.hint}", file=sys.stderr)
    return {"config": config, "seeds": seeds, "variants": variants, "summary": rows, "runs": results,
            "table": format_table(rows) if rows else "", "files": files, "interrupted": interrupted}
