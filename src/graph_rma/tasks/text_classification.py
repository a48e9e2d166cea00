r"""Sentence classification (TREC, MR, SST) with plain, regularised, repulsive and DropAttention heads, on a small
Transformer encoder and on Lin et al.'s self-attentive BiLSTM, same seeds for every variant.

Each run trains with Adam, keeps the epoch with the best accuracy on a held-out tenth of the training set
(sentences ``i % 10 == 9``), and reports test accuracy there plus head diversity on the test set: the mean
pairwise cosine similarity of the heads' attention distributions (``head_cos``, 1 = all heads attend alike) and
Lin et al.'s :math:`\|AA^\top - I\|_F^2` (``frob``). The variant is applied by
:func:`graph_rma.variants.apply_variant` (DropAttention in every attention layer, the sampler on the optimizer) and
its penalty added with :meth:`~graph_rma.variants.VariantSetup.penalty`.

:func:`run_benchmark` writes under ``out``: ``results.json`` (every run and the summary), ``runs.csv``,
``summary.csv``, ``accuracy.png`` and, for one sentence, per-head attention heatmaps
(``heads_<dataset>_<model>.png`` / ``.html``, plain heads next to repulsive heads: the paper's Figure 1).

From Python::

    from graph_rma.tasks.text_classification import run_benchmark
    result = run_benchmark(["trec"], ["transformer"], ["ma", "svgd"], seeds=range(2), out="runs/text", epochs=6)
    print(format_table(result["summary"]))

From the shell: ``graph-rma text`` (see ``graph-rma text --help``).
"""

from __future__ import annotations

import html
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .._errors import GraphRMAError
from ..data.text import TextDataset, Vocabulary, load_text_dataset, tokenize
from ..engine import mean_std, resolve_device, seed_everything, write_csv, write_json
from ..engine.figures import new_figure, save_png
from ..engine.optional import MissingExtraError
from ..models.text import MODELS, build_model
from ..regularizers import disagreement, frobenius_penalty
from ..variants import apply_variant, parse_variant

# named variants of the benchmark (any spec string is accepted too) and their per-model settings
from .defaults import TEXT_MODEL_VARIANTS as MODEL_VARIANTS
from .defaults import TEXT_VARIANTS as VARIANTS


def variant_spec(model: str, name: str) -> str:
    """The spec string of a named variant for ``model`` (a spec string is returned unchanged)."""
    return MODEL_VARIANTS.get((model, name), VARIANTS.get(name, name))


DEFAULT_SENTENCE = "What is the name of the longest river in the world ?"


@dataclass
class Config:
    """Optimisation settings of one run: Adam with ``lr`` and ``weight_decay``, ``epochs`` of ``batch_size``."""

    epochs: int
    batch_size: int = 50
    lr: float = 1e-3
    weight_decay: float = 0.0


def split_dev(ds: TextDataset) -> Tuple[List[List[str]], List[int], List[List[str]], List[int]]:
    """Training sentences ``i % 10 != 9`` and the held-out dev tenth ``i % 10 == 9``."""
    tr = [i for i in range(len(ds)) if i % 10 != 9]
    dv = [i for i in range(len(ds)) if i % 10 == 9]
    return (
        [ds.tokens[i] for i in tr],
        [ds.labels[i] for i in tr],
        [ds.tokens[i] for i in dv],
        [ds.labels[i] for i in dv],
    )


def stratified_subset(labels: Sequence[int], n: int, seed: int = 0) -> List[int]:
    """The indexes (ascending) of a seeded stratified subset of ``n`` of ``labels``: each class keeps its share,
    ``n`` times its frequency rounded by largest remainder (ties: the smaller label), drawn uniformly within the class
    by a generator seeded with ``seed``; every index when ``n >= len(labels)``. What ``--max-train N`` takes (the
    first ``N`` of a file sorted by label would be one class)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise GraphRMAError(f"n: expected a positive int, got {n!r}")
    if n >= len(labels):
        return list(range(len(labels)))
    by_class: Dict[int, List[int]] = {}
    for i, y in enumerate(labels):
        by_class.setdefault(int(y), []).append(i)
    exact = {y: n * len(idx) / len(labels) for y, idx in by_class.items()}
    take = {y: int(e) for y, e in exact.items()}
    for y in sorted(exact, key=lambda y: (-(exact[y] - take[y]), y))[: n - sum(take.values())]:
        take[y] += 1
    g = torch.Generator().manual_seed(seed)
    picked = []
    for y in sorted(by_class):
        idx = by_class[y]
        picked += [idx[j] for j in torch.randperm(len(idx), generator=g)[: take[y]].tolist()]
    return sorted(picked)


def batches(
    tokens: Sequence[Sequence[str]],
    labels: Sequence[int],
    vocab: Vocabulary,
    batch_size: int,
    generator: Optional[torch.Generator] = None,
    max_len: int = 128,
) -> Iterator[Tuple[Tensor, Tensor]]:
    """``(ids [B, n], labels [B])`` batches. With a ``generator``: shuffled, then sorted by length within pools of
    20 batches (less padding), and the batches shuffled again; without: in order."""
    n = len(tokens)
    if generator is None:
        groups = [list(range(s, min(n, s + batch_size))) for s in range(0, n, batch_size)]
    else:
        order = torch.randperm(n, generator=generator).tolist()
        pool = 20 * batch_size
        groups = []
        for p in range(0, n, pool):
            chunk = sorted(order[p : p + pool], key=lambda i: len(tokens[i]))
            groups += [chunk[s : s + batch_size] for s in range(0, len(chunk), batch_size)]
        groups = [groups[i] for i in torch.randperm(len(groups), generator=generator).tolist()]
    for idx in groups:
        yield vocab.batch([tokens[i] for i in idx], max_len), torch.tensor([labels[i] for i in idx])


@torch.no_grad()
def evaluate(
    model: nn.Module, tokens: Sequence[Sequence[str]], labels: Sequence[int], vocab: Vocabulary, diversity: bool = False
) -> Dict[str, float]:
    """Accuracy (``acc``) and, with ``diversity``, the mean over valid query rows of every layer of the heads'
    pairwise attention cosine (``head_cos``) and Lin et al.'s penalty (``frob``)."""
    model.eval()
    dev = next(model.parameters()).device
    correct, cos, frob, rows = 0, 0.0, 0.0, 0
    for x, y in batches(tokens, labels, vocab, 500):
        x, y = x.to(dev), y.to(dev)
        correct += int((model(x).argmax(-1) == y).sum())
        if diversity:
            valid = x[:, : getattr(model, "max_len", x.size(1))] != 0  # [B, L]
            for a in model.query_attention(x):  # [B, H, L', S]
                q = a.transpose(1, 2)  # [B, L', H, S]
                q = q[valid] if q.size(1) == valid.size(1) else q.flatten(0, 1)  # valid query rows [N, H, S]
                cos += float(disagreement(q, head_dim=-2)) * q.size(0)
                frob += float(frobenius_penalty(q)) * q.size(0)
                rows += q.size(0)
    out = {"acc": correct / max(1, len(labels))}
    if diversity and rows:
        out.update(head_cos=cos / rows, frob=frob / rows)
    return out


def train_one(
    model_name: str,
    variant: str,
    ds_train: TextDataset,
    ds_test: TextDataset,
    seed: int,
    cfg: Config,
    model_kwargs: Optional[dict] = None,
    device: Optional[str] = None,
) -> Tuple[Dict[str, float], nn.Module, Vocabulary]:
    """Train one model with one variant and seed; returns (metrics, trained model at its best dev epoch, on the
    CPU, vocab).

    ``variant`` is a name of :data:`VARIANTS` (resolved per model by :func:`variant_spec`) or a spec string;
    ``device``: where to train (default: CUDA when available, else the CPU).
    """
    where = resolve_device(device)
    v = parse_variant(variant_spec(model_name, variant))
    seed_everything(seed)
    tr_tok, tr_y, dv_tok, dv_y = split_dev(ds_train)
    vocab = Vocabulary.build(tr_tok)
    model = build_model(
        model_name, len(vocab), ds_train.num_classes, store_attention=v.reg is not None, **(model_kwargs or {})
    ).to(where)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    setup = apply_variant(v, model, opt, seed=seed)
    gen = torch.Generator().manual_seed(seed)
    best, best_state, t0 = (-1.0, -1), None, time.perf_counter()
    for epoch in range(1, cfg.epochs + 1):
        model.train()
        for x, y in batches(tr_tok, tr_y, vocab, cfg.batch_size, gen):
            x, y = x.to(where), y.to(where)
            loss = F.cross_entropy(model(x), y)
            reg = setup.penalty(model, attention=model.attention_for_penalty() if setup.needs_attention else ())
            if reg is not None:
                loss = loss + reg
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        dev = evaluate(model, dv_tok, dv_y, vocab)["acc"]
        if dev > best[0]:
            best, best_state = (dev, epoch), {k: t.detach().clone() for k, t in model.state_dict().items()}
    model.load_state_dict(best_state)
    test = evaluate(model, ds_test.tokens, ds_test.labels, vocab, diversity=True)
    metrics = {
        "dev_acc": best[0],
        "best_epoch": best[1],
        "test_acc": test["acc"],
        "head_cos": test.get("head_cos"),
        "frob": test.get("frob"),
        "train_s": time.perf_counter() - t0,
    }
    return metrics, model.cpu(), vocab


# --------------------------------------------------------------------------------------------------------------
# Heatmaps (the paper's Figure 1: one row per head, one column per token)
# --------------------------------------------------------------------------------------------------------------
def _figure(figsize: Tuple[float, float]):
    """A matplotlib ``Figure`` on the Agg canvas (no pyplot state); ``MissingExtraError`` without the plots extra."""
    return new_figure(*figsize, "the text benchmark's pictures")


def head_heatmap_png(path: Path, tokens: List[str], panels: List[Tuple[str, Tensor]]) -> Path:
    """``panels``: ``(title, weights [H, n])``; one heatmap per panel, stacked vertically.

    Needs matplotlib (the ``plots`` extra); raises :class:`~graph_rma.engine.optional.MissingExtraError` without it.
    """
    H = max(w.size(0) for _, w in panels)
    fig = _figure(figsize=(max(6, 0.6 * len(tokens)), 0.45 * H * len(panels) + 1.2 * len(panels)))
    axes = fig.subplots(len(panels), 1, squeeze=False)
    for ax, (title, w) in zip(axes[:, 0], panels):
        im = ax.imshow(w.numpy(), aspect="auto", cmap="Reds", vmin=0.0)
        ax.set_title(title, fontsize=9)
        ax.set_yticks(range(w.size(0)), [f"head {h + 1}" for h in range(w.size(0))], fontsize=7)
        ax.set_xticks(range(len(tokens)), tokens, rotation=45, ha="right", fontsize=8)
        fig.colorbar(im, ax=ax, fraction=0.02)
    fig.tight_layout()
    return save_png(fig, path, dpi=120)


def head_heatmap_html(path: Path, tokens: List[str], panels: List[Tuple[str, Tensor]], title: str) -> Path:
    """Self-contained HTML: each head a line of tokens shaded by its attention (row-normalised to its max)."""
    parts = [
        f"<!doctype html><meta charset='utf-8'><title>{html.escape(title)}</title>",
        "<style>body{font-family:sans-serif;margin:1.5em}span.t{padding:2px 3px;margin:1px;display:inline-block;"
        "border-radius:3px}td{padding:2px 6px;vertical-align:middle}h2{font-size:1em;margin-top:1.2em}</style>",
        f"<h1 style='font-size:1.2em'>{html.escape(title)}</h1>",
    ]
    for name, w in panels:
        parts.append(f"<h2>{html.escape(name)}</h2><table>")
        for h in range(w.size(0)):
            row = w[h] / w[h].max().clamp(min=1e-12)
            cells = "".join(
                f"<span class='t' title='{float(w[h, j]):.3f}' style='background:rgba(220,30,30,{float(row[j]):.3f})'>"
                f"{html.escape(tok)}</span>"
                for j, tok in enumerate(tokens)
            )
            parts.append(f"<tr><td>head {h + 1}</td><td>{cells}</td></tr>")
        parts.append("</table>")
    Path(path).write_text("\n".join(parts), encoding="utf-8")
    return Path(path)


def accuracy_plot(path: Path, summary: List[dict]) -> Path:
    """Test accuracy (mean +- std over seeds) per variant, one panel per (dataset, model). Needs matplotlib."""
    groups = sorted({(r["dataset"], r["model"]) for r in summary})
    fig = _figure(figsize=(4.2 * len(groups), 3.4))
    axes = fig.subplots(1, len(groups), squeeze=False)
    for ax, (d, m) in zip(axes[0], groups):
        rows = [r for r in summary if r["dataset"] == d and r["model"] == m]
        ax.bar(
            range(len(rows)),
            [100 * r["test_acc_mean"] for r in rows],
            yerr=[100 * r["test_acc_std"] for r in rows],
            color="tab:blue",
            capsize=3,
        )
        ax.set_xticks(range(len(rows)), [r["variant"] for r in rows], rotation=40, ha="right", fontsize=8)
        lo = min(100 * (r["test_acc_mean"] - r["test_acc_std"]) for r in rows)
        ax.set_ylim(max(0, lo - 3), min(100, max(100 * (r["test_acc_mean"] + r["test_acc_std"]) for r in rows) + 2))
        ax.set_title(f"{d} / {m}", fontsize=9)
        ax.set_ylabel("test accuracy (%)")
    fig.tight_layout()
    return save_png(fig, path, dpi=120)


def summarize(runs: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """One row per (dataset, model, variant) in order of first appearance: mean and sample std over seeds."""
    summary = []
    for key in dict.fromkeys((r["dataset"], r["model"], r["variant"]) for r in runs):
        rs = [r for r in runs if (r["dataset"], r["model"], r["variant"]) == key]
        acc_m, acc_s = mean_std([r["test_acc"] for r in rs])
        cos_m, cos_s = mean_std([r["head_cos"] for r in rs])
        frob_m, _ = mean_std([r["frob"] for r in rs])
        summary.append(
            {
                "dataset": key[0],
                "model": key[1],
                "variant": key[2],
                "spec": rs[0]["spec"],
                "seeds": len(rs),
                "test_acc_mean": acc_m,
                "test_acc_std": acc_s,
                "head_cos_mean": cos_m,
                "head_cos_std": cos_s,
                "frob_mean": frob_m,
                "train_s_mean": mean_std([r["train_s"] for r in rs])[0],
            }
        )
    return summary


def format_table(summary: List[Dict[str, Any]]) -> str:
    """The summary as a plain-text table (test accuracy in %, head cosine, Frobenius penalty)."""
    lines = ["dataset model       variant      test acc (mean +- std)   head_cos   frob"]
    for r in summary:
        lines.append(
            f"{r['dataset']:7s} {r['model']:11s} {r['variant']:11s}  {100 * r['test_acc_mean']:6.2f} +- "
            f"{100 * r['test_acc_std']:4.2f}           {r['head_cos_mean']:.3f}   {r['frob_mean']:.3f}"
        )
    return "\n".join(lines)


def run_benchmark(
    datasets: Sequence[str] = ("trec",),
    models: Sequence[str] = MODELS,
    variants: Sequence[str] = tuple(VARIANTS),
    seeds: Union[int, Sequence[int]] = 2,
    out: Union[str, Path] = "runs/text",
    *,
    epochs: int = 6,
    config: Optional[Config] = None,
    root: Optional[str] = None,
    mr_fold: int = 0,
    sentence: Optional[str] = None,
    model_kwargs: Optional[Dict[str, Dict[str, Any]]] = None,
    command: Optional[str] = None,
    log: Optional[Callable[[str], None]] = print,
    device: Optional[str] = None,
) -> Dict[str, Any]:
    """Train every model with every variant and seed on every dataset; write the results, plots and heatmaps.

    Args:
        datasets: names for :func:`graph_rma.data.text.load_text_dataset` (``trec``, ``mr``, ``sst2``, ``sst1``).
        models: names of :data:`graph_rma.models.text.MODELS`.
        variants: names of :data:`VARIANTS` or spec strings of :mod:`graph_rma.variants`.
        seeds: a number of seeds (``0 .. seeds-1``) or the seeds themselves; the heatmaps use the first.
        out: output folder.
        epochs: epochs per run (ignored when ``config`` is given).
        config: optimisation settings (default ``Config(epochs)``).
        root: folder holding ``TREC/``, ``MR/``, ``SST-2/`` (default ``$GRAPH_RMA_DATA/text``).
        mr_fold: MR's test fold (sentences ``i % 10 == fold``).
        sentence: sentence of the heatmaps (default: a TREC question on TREC, else the first test sentence).
        model_kwargs: per model name, extra constructor arguments (e.g. a smaller ``d_model``).
        command: recorded in ``results.json`` (the CLI passes its command line).
        log: called with one line per finished run (``None``: silent).
        device: where to train (``"cpu"``, ``"cuda"``, ...; default: CUDA when available, else the CPU).

    Returns:
        ``{"runs", "summary", "epochs", "seeds", "total_s", "files"}``.
    """
    cfg = config if config is not None else Config(epochs=epochs)
    seeds = list(range(seeds)) if isinstance(seeds, int) else [int(s) for s in seeds]
    datasets = [d.strip().lower() for d in datasets if d.strip()]
    models, variants = [m.strip() for m in models if m.strip()], [v.strip() for v in variants if v.strip()]
    _check_benchmark(cfg, seeds, models, variants, model_kwargs or {}, device)
    bench = _Benchmark(
        models, variants, seeds, cfg, Path(out), root, mr_fold, sentence, model_kwargs or {}, log, device
    )  # out is created by the first file written: a run that fails before leaves no empty folder
    for d in datasets:
        bench.run_dataset(d)
    runs, files, out = bench.runs, bench.files, bench.out
    summary = summarize(runs)
    total_s = time.perf_counter() - bench.t_start
    record: Dict[str, Any] = {
        "epochs": cfg.epochs,
        "seeds": len(seeds),
        "runs": runs,
        "summary": summary,
        "total_s": total_s,
    }
    if command is not None:
        record = {"command": command, **record}
    files += [
        write_json(out / "results.json", record),
        write_csv(out / "runs.csv", runs),
        write_csv(out / "summary.csv", summary),
    ]
    if summary:
        bench.plot(accuracy_plot, out / "accuracy.png", summary)
    return {"runs": runs, "summary": summary, "epochs": cfg.epochs, "seeds": seeds, "total_s": total_s, "files": files}


def _check_benchmark(
    cfg: Config,
    seeds: List[int],
    models: List[str],
    variants: List[str],
    model_kwargs: Dict[str, Dict[str, Any]],
    device: Optional[str],
) -> None:
    """Every setting of :func:`run_benchmark` checked before any data is read."""
    if not seeds:
        raise GraphRMAError("seeds: expected at least one seed")
    if cfg.epochs < 1:
        raise GraphRMAError(f"epochs: expected a positive integer, got {cfg.epochs}")
    for m in models:
        if m not in MODELS:
            raise GraphRMAError(f"models: unknown model {m!r}; choose from {', '.join(MODELS)}")
    for v in variants:
        for m in models:
            parse_variant(variant_spec(m, v))  # GraphRMAError naming the bad part
    for m in models:  # a bad size (e.g. heads that do not divide the width) is refused before any data is read
        with torch.device("meta"):
            build_model(m, 2, 2, **(model_kwargs.get(m) or {}))
    resolve_device(device)


@dataclass
class _Benchmark:
    """:func:`run_benchmark`'s settings and what it has produced so far (runs, files)."""

    models: List[str]
    variants: List[str]
    seeds: List[int]
    cfg: Config
    out: Path
    root: Optional[str]
    mr_fold: int
    sentence: Optional[str]
    model_kwargs: Dict[str, Dict[str, Any]]
    log: Optional[Callable[[str], None]]
    device: Optional[str]
    runs: List[Dict[str, Any]] = field(default_factory=list)
    files: List[Path] = field(default_factory=list)
    skipped: List[str] = field(default_factory=list)
    t_start: float = field(default_factory=time.perf_counter)

    def plot(self, draw: Callable[..., Path], *args: Any) -> None:
        """A PNG, optional (the plots extra): without matplotlib say so once and go on."""
        try:
            self.files.append(draw(*args))
        except MissingExtraError as exc:
            if not self.skipped and self.log is not None:
                self.log(f"pictures skipped ({exc.module} not installed): {exc.hint}")
            self.skipped.append(str(args[0]))

    def run_dataset(self, d: str) -> None:
        """Every model, variant and seed on dataset ``d``; each model's heads on one sentence as heatmaps."""
        ds_train = load_text_dataset(d, "train", root=self.root, fold=self.mr_fold)
        ds_test = load_text_dataset(d, "test", root=self.root, fold=self.mr_fold)
        text = self.sentence or (DEFAULT_SENTENCE if d == "trec" else ds_test.sentences[0])
        sent_tokens = tokenize(text)
        for m in self.models:
            panels: List[Tuple[str, Tensor]] = []
            for v in self.variants:
                for seed in self.seeds:
                    metrics, model, vocab = self.run_one(ds_train, ds_test, m, v, seed)
                    if seed == self.seeds[0]:
                        w = model.head_attention(vocab.batch([sent_tokens]))[0, :, : len(sent_tokens)]
                        panels.append((f"{v} (seed {seed}, test acc {100 * metrics['test_acc']:.1f}%)", w))
            if panels:
                self.out.mkdir(parents=True, exist_ok=True)
                title = f"{ds_train.name} / {m}: per-head attention on \u201c{text}\u201d"
                self.plot(head_heatmap_png, self.out / f"heads_{d}_{m}.png", sent_tokens, panels)
                self.files.append(head_heatmap_html(self.out / f"heads_{d}_{m}.html", sent_tokens, panels, title))

    def run_one(self, ds_train, ds_test, m: str, v: str, seed: int):
        """One run (:func:`train_one`), recorded and logged in one line."""
        metrics, model, vocab = train_one(
            m, v, ds_train, ds_test, seed, self.cfg, model_kwargs=self.model_kwargs.get(m), device=self.device
        )
        spec = str(parse_variant(variant_spec(m, v)))
        self.runs.append(
            {
                "dataset": ds_train.name,
                "model": m,
                "variant": v,
                "spec": spec,
                "seed": seed,
                "epochs": self.cfg.epochs,
                **metrics,
            }
        )
        if self.log is not None:
            self.log(
                f"{ds_train.name:5s} {m:11s} {v:11s} seed {seed}: test {100 * metrics['test_acc']:.2f} "
                f"(dev {100 * metrics['dev_acc']:.2f} @ep{metrics['best_epoch']}) head_cos "
                f"{metrics['head_cos']:.3f} frob {metrics['frob']:.3f} [{metrics['train_s']:.0f}s, "
                f"total {time.perf_counter() - self.t_start:.0f}s]"
            )
        return metrics, model, vocab
