r"""``graph-rma cora``: the Cora node-classification benchmark (GAT, with and without repulsive attention).

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
table (mean +- std over seeds of test and validation accuracy, head diversity *Dist*, epochs, seconds per epoch),
``results.json``, ``results.csv`` and ``accuracy.png``.

Examples::

    graph-rma cora                          # small default: 3 seeds of ma and svgd (about 2 minutes on 2 cores)
    graph-rma cora --full                   # 20 seeds of every variant
    graph-rma cora --variants ma "svgd:alpha=0.1" --seeds 5 --out runs/cora_try --resume
"""
from __future__ import annotations

import argparse
import copy
import hashlib
import math
import re
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import torch
import torch.nn.functional as F

from ..data.planetoid import prepare_features
from ..data.root import DataNotFoundError
from ..diagnostics import head_distance
from ..models.gat import GAT
from ..training import read_json, save_checkpoint, seed_everything, write_csv, write_json
from ..variants import make_sampler, parse_variant, regularization_loss

# Chosen on validation accuracy only, seeds 100-102 (the README's "Cora benchmark" section lists every configuration
# tried). eps=8 (= the number of heads) undoes the 1/M of Eq. (4) relative to Adam's weight decay. The SGLD/SPOS
# noise in a head's gradient has standard deviation sqrt(2 eps / beta) (1.3e-3 at beta=1e7, 1.3e-4 at beta=1e9),
# against loss gradients of about 1e-5..1e-3 per coordinate, hence the large betas.
MA = "ma"
REG = "reg:kind=frobenius,weight=0.01"
SGLD = "sgld:eps=8,beta=1e7"
SVGD = "svgd:alpha=0.01,eps=8,roles=att_src/att_dst"
SPOS = "spos:alpha=0.01,eps=8,beta=1e9,roles=att_src/att_dst"
DROPATTN = "dropattn:p=0.6,mode=column"
DEFAULT_VARIANTS = [MA, SVGD]
FULL_VARIANTS = [MA, REG, SGLD, SVGD, SPOS, DROPATTN]
DEFAULT_SEEDS = 3
FULL_SEEDS = 20


# ----------------------------------------------------------------------------------------------------------------
# One run
# ----------------------------------------------------------------------------------------------------------------
def _accuracy(logits: torch.Tensor, y: torch.Tensor, mask: torch.Tensor) -> float:
    return float((logits[mask].argmax(dim=-1) == y[mask]).float().mean())


class EarlyStopping:
    r"""When to keep the model and when to stop, from each epoch's validation accuracy and loss.

    ``rule="val_acc"`` (this package's default): keep the epoch with the highest validation accuracy (ties: lower
    validation loss); stop ``patience`` epochs after the last strict accuracy improvement.
    ``rule="gat"`` (the GAT authors' ``execute_cora.py``): with running maxima/minima :math:`a^*` and :math:`l^*`,
    an epoch with :math:`a \ge a^*` or :math:`l \le l^*` resets the counter (and keeps the model if both hold);
    otherwise the counter grows, and training stops when it reaches ``patience``.
    """

    RULES = ("val_acc", "gat")

    def __init__(self, rule: str = "val_acc", patience: int = 100) -> None:
        if rule not in self.RULES:
            raise ValueError(f"rule: expected one of {self.RULES}, got {rule!r}")
        if patience < 1:
            raise ValueError(f"patience: expected >= 1, got {patience}")
        self.rule, self.patience = rule, patience
        self.best_acc, self.best_loss = -math.inf, math.inf  # of the kept model
        self.acc_max, self.loss_min = -math.inf, math.inf  # running extremes
        self.bad = 0

    def update(self, val_acc: float, val_loss: float):
        """``(keep, stop)`` for this epoch: keep its model as the selected one; stop training after it."""
        if self.rule == "val_acc":
            keep = val_acc > self.best_acc or (val_acc == self.best_acc and val_loss < self.best_loss)
            improved = val_acc > self.acc_max
            self.acc_max = max(self.acc_max, val_acc)
        else:
            improved = val_acc >= self.acc_max or val_loss <= self.loss_min
            keep = val_acc >= self.acc_max and val_loss <= self.loss_min
            self.acc_max, self.loss_min = max(self.acc_max, val_acc), min(self.loss_min, val_loss)
        if keep:
            self.best_acc, self.best_loss = val_acc, val_loss
        self.bad = 0 if improved else self.bad + 1
        return keep, self.bad >= self.patience


def train_run(data, spec: str, seed: int, model_kwargs: Dict[str, Any], epochs: int = 1000, patience: int = 100,
              lr: float = 0.005, weight_decay: float = 5e-4, early_stopping: str = "val_acc"):
    """Train one GAT with variant ``spec`` from ``seed``; returns ``(metrics, best_state_dict, model)``.

    ``data`` has ``x`` (dense or sparse), ``edge_index``, ``y`` and the three masks; ``early_stopping`` is an
    :class:`EarlyStopping` rule.
    """
    variant = parse_variant(spec)
    seed_everything(seed)
    kwargs = dict(model_kwargs, drop_attention=variant.drop_attention_kwargs)
    model = GAT(**kwargs)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    with warnings.catch_warnings():  # the 1-head output layer is not a particle group; that is expected
        warnings.filterwarnings("ignore", message=".*fewer than 2; not a particle group")
        sampler = make_sampler(variant, model, seed=seed)
    if sampler is not None:
        sampler.attach(optimizer)
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
            loss = loss + regularization_loss(variant, model, attention=attention[:1], head_outputs=[head_out])
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
def slug(spec: str) -> str:
    """A file-name-safe, unique name for a variant spec."""
    clean = re.sub(r"[^A-Za-z0-9.=_-]+", "_", spec).strip("_")
    return f"{clean[:80]}-{hashlib.sha1(spec.encode()).hexdigest()[:6]}"


def _mean_std(values: Sequence[float]):
    values = list(values)
    if not values:
        return float("nan"), float("nan")
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def summarize(results: List[Dict[str, Any]], variants: Sequence[str]) -> List[Dict[str, Any]]:
    """One row per variant: mean and std over seeds (``std`` is the sample standard deviation)."""
    rows = []
    for spec in variants:
        runs = [r for r in results if r["variant"] == spec]
        if not runs:
            continue
        row: Dict[str, Any] = {"variant": spec, "seeds": len(runs)}
        for key, scale in (("test_acc", 100), ("val_acc", 100), ("dist", 1), ("epochs", 1), ("sec_per_epoch", 1)):
            m, s = _mean_std([r["metrics"][key] * scale for r in runs])
            row[f"{key}_mean"], row[f"{key}_std"] = m, s
        rows.append(row)
    return rows


def format_table(rows: List[Dict[str, Any]]) -> str:
    lines = ["| variant | seeds | test acc (%) | val acc (%) | Dist | epochs | s/epoch |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(
            f"| `{r['variant']}` | {r['seeds']} | {r['test_acc_mean']:.1f} ± {r['test_acc_std']:.1f} | "
            f"{r['val_acc_mean']:.1f} ± {r['val_acc_std']:.1f} | {r['dist_mean']:.2f} ± {r['dist_std']:.2f} | "
            f"{r['epochs_mean']:.0f} | {r['sec_per_epoch_mean']:.3f} |"
        )
    return "\n".join(lines)


def plot(results: List[Dict[str, Any]], variants: Sequence[str], path: Path) -> Path:
    """Accuracy per variant: each seed's test and validation accuracy, with the mean +- std."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(4.0, 1.4 * len(variants) + 1.5), 3.6))
    for k, spec in enumerate(variants):
        for offset, key, color in ((-0.12, "test_acc", "tab:blue"), (0.12, "val_acc", "tab:orange")):
            vals = [100 * r["metrics"][key] for r in results if r["variant"] == spec]
            if not vals:
                continue
            m, s = _mean_std(vals)
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
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    tmp.replace(path)
    return path


def run_study(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from ..data.planetoid import load_planetoid

    torch.set_num_threads(args.threads)
    variants = [parse_variant(v).spec for v in args.variants]  # canonical spec strings (also validates them)
    if len(set(variants)) != len(variants):
        raise ValueError(f"--variants: duplicates after parsing: {variants}")
    seeds = list(range(args.seed, args.seed + args.seeds))
    dataset = load_planetoid(args.dataset, root=args.root)
    data = copy.copy(dataset[0])
    data.x = prepare_features(data.x)
    model_kwargs = {"in_channels": dataset.num_features, "out_channels": dataset.num_classes,
                    "hidden_channels": args.hidden, "heads": args.heads, "out_heads": args.out_heads,
                    "dropout": args.dropout, "attn_dropout": args.dropout, "v2": args.v2}
    config = {"dataset": dataset.name, "epochs": args.epochs, "patience": args.patience, "stop_on": args.early_stopping,
              "lr": args.lr,
              "weight_decay": args.weight_decay, "model_kwargs": model_kwargs}
    out = Path(args.out)

    results: List[Dict[str, Any]] = []
    todo = []
    for seed in seeds:  # seed-major: an interrupted study has every variant on the same seeds
        for spec in variants:
            path = out / "runs" / slug(spec) / f"seed{seed}.json"
            if args.resume and path.is_file():
                try:
                    saved = read_json(path)
                except (OSError, ValueError):
                    saved = None
                if saved is not None and saved.get("config") == config and saved.get("variant") == spec:
                    results.append(saved)
                    continue
            todo.append((spec, seed, path))
    if args.resume and results:
        print(f"resume: {len(results)} finished run(s) reused from {out}, {len(todo)} to do")

    interrupted = False
    bar = tqdm(todo, desc="cora runs", unit="run", file=sys.stderr, dynamic_ncols=True)
    try:
        for spec, seed, path in bar:
            bar.set_postfix_str(f"{parse_variant(spec).name} seed {seed}")
            metrics, state, model = train_run(data, spec, seed, model_kwargs, epochs=args.epochs,
                                              patience=args.patience, lr=args.lr, weight_decay=args.weight_decay,
                                              early_stopping=args.early_stopping)
            ckpt = out / "checkpoints" / f"{slug(spec)}_seed{seed}.pt"
            save_checkpoint(ckpt, {"task": "cora", "dataset": dataset.name, "model_kwargs": model.model_kwargs,
                                   "variant": spec, "seed": seed, "model": state, "metrics": metrics})
            record = {"variant": spec, "seed": seed, "config": config, "metrics": metrics,
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
    if rows:
        write_json(out / "results.json", {"config": config, "seeds": seeds, "variants": variants,
                                          "summary": rows, "runs": results})
        write_csv(out / "results.csv", rows)
        if not args.no_plot:
            plot(results, variants, out / "accuracy.png")
        print(format_table(rows))
        print(f"wrote {out / 'results.json'}, {out / 'results.csv'}" + ("" if args.no_plot else f", {out / 'accuracy.png'}"))
    return 130 if interrupted else 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="graph-rma cora", description=__doc__.split("\n\n")[0].strip("`r\" "),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--variants", nargs="+", default=None, metavar="SPEC",
                   help=f"variant specs (graph_rma.variants); default {' '.join(DEFAULT_VARIANTS)}")
    p.add_argument("--seeds", type=int, default=None, help=f"number of seeds (default {DEFAULT_SEEDS})")
    p.add_argument("--seed", type=int, default=0, help="first seed (seeds are seed, seed+1, ...)")
    p.add_argument("--full", action="store_true",
                   help=f"the full study: {FULL_SEEDS} seeds of every variant ({', '.join(FULL_VARIANTS)})")
    p.add_argument("--out", default="runs/cora", help="output folder (default runs/cora)")
    p.add_argument("--resume", action="store_true", help="skip runs already finished in --out")
    p.add_argument("--dataset", default="Cora", help="Cora or CiteSeer")
    p.add_argument("--root", default=None, help="planetoid folder with <Name>/raw/ (default $GRAPH_RMA_DATA/planetoid)")
    p.add_argument("--epochs", type=int, default=1000)
    p.add_argument("--patience", type=int, default=100)
    p.add_argument("--early-stopping", default="val_acc", choices=EarlyStopping.RULES,
                   help="val_acc: patience on validation accuracy (default); gat: the GAT code's rule (accuracy or "
                        "loss resets the patience, keep the model when both improve)")
    p.add_argument("--lr", type=float, default=0.005)
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--hidden", type=int, default=8)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--out-heads", type=int, default=1)
    p.add_argument("--dropout", type=float, default=0.6, help="dropout on inputs and attention")
    p.add_argument("--v2", action="store_true", help="GATv2 attention")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    p.add_argument("--no-plot", action="store_true")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if args.variants is None:
        args.variants = FULL_VARIANTS if args.full else DEFAULT_VARIANTS
    if args.seeds is None:
        args.seeds = FULL_SEEDS if args.full else DEFAULT_SEEDS
    for name in ("seeds", "epochs", "patience", "threads"):
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name}: expected a positive integer, got {getattr(args, name)}")
    try:
        return run_study(args)
    except ValueError as exc:
        print(f"graph-rma cora: {exc}", file=sys.stderr)
        return 2
    except DataNotFoundError as exc:
        print(f"graph-rma cora: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
