r"""Node classification: GAT with and without repulsive attention, on Cora/CiteSeer (public split), the Geom-GCN
heterophilous graphs (Cornell, Texas, Wisconsin, chameleon, squirrel, Actor) and Platonov et al.'s graphs
(minesweeper, tolokers, chameleon_filtered, ...), each with 10 fixed splits: seed ``s`` trains on split
``s mod 10``, so 10 consecutive seeds cover the standard protocol.

What runs is (dataset, protocol, variant, seed) and nothing else. The protocol (:mod:`graph_rma.tasks.protocols`)
is a named preset that reproduces a published number (``gat``: Veličković et al.'s Cora setting; ``ggcn``: Yan et
al.'s GAT on the Geom-GCN graphs; ``platonov``/``platonov-small``: Platonov et al.'s residual GAT), with fields a
caller may override; every variant (:mod:`graph_rma.variants`) runs with exactly the same protocol over the same
seeds. Each graph has a default protocol (:func:`graph_rma.tasks.protocols.default_protocol`).

This module is the study (:func:`run_study`: variants x seeds, resumable); the rest lives beside it: one run
(:func:`~graph_rma.tasks.node_training.train_run`, with the protocol's graph, model and metric) in
:mod:`graph_rma.tasks.node_training`, the summary and its table in :mod:`graph_rma.tasks.node_results`, the plot in
:mod:`graph_rma.tasks.node_plot`.

One run: Adam, one full-batch step per epoch, the validation metric and loss after each step, the epoch the
protocol's early-stopping rule keeps (:class:`~graph_rma.engine.EarlyStopping`), and that epoch's test metric:
accuracy, or ROC AUC for a binary task (one output, binary cross-entropy). A training loss that is not finite stops
the study with a one-line error; finished runs stay saved.

Each finished (variant, seed) run is written atomically (``runs/<variant>/seed<k>.json`` and a checkpoint in
``checkpoints/``), so an interrupted study keeps its finished runs and ``--resume`` skips them; the run in progress
is saved at most every minute (``checkpoints/<variant>_seed<k>.partial.pt``) and, on Ctrl-C or SIGTERM, at the end
of the epoch it is in before the study stops; ``--resume`` continues it from its last save, ending as an uninterrupted
run would (a study started without ``--resume`` starts it afresh). A kill loses at most the minute since that save.

The summary is a table (mean +- std over seeds of the test and validation metric, the paired difference of each
variant against the first with its standard error and wins/ties/losses, head diversity *Dist*, epochs, seconds per
epoch), ``results.json``, ``results.csv`` and ``accuracy.png``.

From Python::

    from graph_rma.tasks.node_classification import run_study
    result = run_study("ggcn", ["ma", "svgd:alpha=0.1,eps=8"], range(10), "runs/chameleon", dataset="chameleon")
    print(result["table"])

From the shell: ``graph-rma node --dataset NAME`` (``graph-rma cora`` is its short form for Cora).
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

import torch

from .._errors import GraphRMAError
from ..argtypes import DEFAULT_THREADS
from ..data.nodes import canonical_name, load_node_graph, select_split
from ..engine import (
    ResumeMismatchError,
    check_resume,
    deferred_interrupt,
    interrupt_requested,
    read_json,
    resolve_device,
    save_checkpoint,
    slug,
    write_csv,
    write_json,
)
from ..engine.optional import MissingExtraError
from ..kinds import check_seed
from ..variants import parse_variant
from .defaults import NODE_DEFAULT_SEEDS as DEFAULT_SEEDS
from .defaults import NODE_DEFAULT_VARIANTS as DEFAULT_VARIANTS
from .node_plot import plot
from .node_results import (
    format_table,
    summarize,
    upgrade_metrics,
)
from .node_training import (
    MODEL_CLASSES,
    check_model_fits,
    check_variant_layers,
    model_settings,
    prepare_graph,
    resolve_metric,
    train_run,
)
from .protocols import PROTOCOLS, Protocol, protocol_fields, resolve_protocol


def _upgrade(config: Dict[str, Any]) -> Dict[str, Any]:
    """A run's saved config with every field it lacks at its default (the :class:`Protocol` field's, the model
    constructor argument's), so that adding an option never retrains finished runs (compare upgraded configs)."""
    config = {**{f.name: f.default for f in protocol_fields()}, **config}
    cls = MODEL_CLASSES.get(config.get("model"))
    if isinstance(config.get("model_kwargs"), dict) and cls is not None:
        defaults = {
            k: p.default
            for k, p in inspect.signature(cls).parameters.items()
            if p.default is not inspect.Parameter.empty
        }
        config["model_kwargs"] = {**defaults, **config["model_kwargs"]}
    return config


def _check_protocol(protocol: Any) -> None:
    """``run_study``'s first argument is a protocol; a list of variants or a variant spec there is named as such."""
    if isinstance(protocol, str) and protocol.lower() not in PROTOCOLS:
        try:
            spec = parse_variant(protocol).spec
        except ValueError:
            spec = None  # neither: resolve_protocol names the presets
        if spec is not None:
            raise GraphRMAError(
                f"protocol: expected one of {tuple(PROTOCOLS)}, a Protocol or None, got the variant spec "
                f"{protocol!r}; run_study's first argument is the protocol, the variants come second as a list: "
                f"run_study(protocol, [{protocol!r}, ...], seeds, out)"
            )
    elif not (protocol is None or isinstance(protocol, (str, Protocol))):
        raise GraphRMAError(
            f"protocol: expected one of {tuple(PROTOCOLS)}, a Protocol or None, got {type(protocol).__name__} "
            f"{protocol!r}; run_study(protocol, variants, seeds, out, ...) takes the protocol first"
        )


def _protocol(protocol: Union[None, str, Protocol], dataset: str) -> Protocol:
    """``run_study``'s protocol as a :class:`Protocol`: as given, or the named preset (``None``: the dataset's)."""
    return protocol if isinstance(protocol, Protocol) else resolve_protocol(protocol, dataset)


def run_study(
    protocol: Union[None, str, Protocol] = None,
    variants: Sequence[str] = DEFAULT_VARIANTS,
    seeds: Sequence[int] = tuple(range(DEFAULT_SEEDS)),
    out: Union[str, Path] = "runs/cora",
    *,
    resume: bool = False,
    device: Optional[str] = None,
    dataset: str = "Cora",
    root: Optional[str] = None,
    threads: int = DEFAULT_THREADS,
    make_plot: bool = True,
    progress: bool = True,
) -> Dict[str, Any]:
    """Train every variant on every seed (seed-major) under one protocol, resumable; write ``results.json``/``.csv``
    and the plot.

    ``protocol`` is a :class:`~graph_rma.tasks.protocols.Protocol` (the whole configuration: a preset with its
    changes, ``resolve_protocol(name, dataset, overrides)``), or names a preset of
    :data:`graph_rma.tasks.protocols.PROTOCOLS` (``None``: the dataset's default, with its per-graph settings). To
    change a field, pass ``resolve_protocol(name, dataset, {"epochs": 2})`` or ``dataclasses.replace(protocol,
    epochs=2)``.
    ``device``: ``"cpu"``, ``"cuda"`` (``"cuda:1"``, ...); default: CUDA when available, else the CPU. The device is
    recorded with each run's metrics but is not part of the settings that ``resume`` compares.
    Returns ``{"config", "seeds", "variants", "summary" (one row per variant), "runs", "table" (markdown),
    "files" (written paths), "interrupted"}``. ``resume=True`` reuses finished runs in ``out`` whose settings
    match. A KeyboardInterrupt ends the study early with the finished runs saved (``interrupted`` is then True).
    """
    from tqdm import tqdm

    proto, ds_name, seeds, variants, dev = _study_settings(protocol, variants, seeds, dataset, root, threads, device)
    graph = prepare_graph(load_node_graph(ds_name, root=root), proto)
    config = _study_config(proto, ds_name, graph, dev)
    out = Path(out)
    results, todo = _plan(out, seeds, variants, config, resume)
    interrupted = False
    bar = tqdm(
        todo, desc=f"{ds_name.lower()} runs", unit="run", file=sys.stderr, dynamic_ncols=True, disable=not progress
    )
    try:
        with deferred_interrupt():  # Ctrl-C stops a run at the end of an epoch, saved there
            for spec, seed, path, ckpt in bar:
                if interrupt_requested():  # Ctrl-C came as the last run finished: no other starts
                    raise KeyboardInterrupt
                bar.set_postfix_str(f"{parse_variant(spec).name} seed {seed}")
                record = _one_run(proto, graph, config, spec, seed, path, ckpt, out, resume, progress, dev)
                results.append(record)
                test = 100 * record["metrics"]["test_metric"]
                bar.set_postfix_str(f"{parse_variant(spec).name} seed {seed}: test {test:.1f}")
    except KeyboardInterrupt:
        interrupted = True
        again = "run it again to continue" if resume else "run it again with --resume (resume=True) to continue"
        print(f"\ninterrupted: finished runs are saved, the one in progress where it stopped; {again}", file=sys.stderr)
    finally:
        bar.close()

    results.sort(key=lambda r: (variants.index(r["variant"]), r["seed"]))
    rows = summarize(results, variants)
    files = _write_study(out, config, seeds, variants, rows, results, proto, make_plot) if rows else []
    return {
        "config": config,
        "seeds": seeds,
        "variants": variants,
        "summary": rows,
        "runs": results,
        "table": format_table(rows, config["metric"]) if rows else "",
        "files": files,
        "interrupted": interrupted,
    }


def _study_settings(protocol, variants, seeds, dataset, root, threads, device):
    """:func:`run_study`'s arguments checked before any data is read: ``(protocol, dataset name, seeds, canonical
    variant specs, device)``; sets torch's threads."""
    _check_protocol(protocol)
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise GraphRMAError(f"threads: expected a positive integer, got {threads!r}")
    seeds = [check_seed(s, "seeds") for s in seeds]
    if not seeds:
        raise GraphRMAError("seeds: expected at least one seed")
    ds_name = canonical_name(dataset, root)  # validates the name before any data is loaded
    proto = _protocol(protocol, ds_name)
    torch.set_num_threads(threads)
    dev = resolve_device(device)
    variants = [parse_variant(v).spec for v in variants]  # canonical spec strings (also validates them)
    if len(set(variants)) != len(variants):
        raise GraphRMAError(f"variants: duplicates after parsing: {variants}")
    check_variant_layers(*model_settings(proto, 8, 3, "accuracy"), variants)  # layers= named: before the data
    return proto, ds_name, seeds, variants, dev


def _study_config(proto: Protocol, ds_name: str, graph, dev) -> Dict[str, Any]:
    """What every run of the study depends on (the protocol's settings, the metric, the model and its arguments for
    this graph), after checking that the model fits on ``dev``; what ``resume`` compares."""
    num_classes = int(graph.y.max()) + 1
    metric_name, rule = resolve_metric(proto, num_classes)
    model_name, model_kwargs = model_settings(proto, graph.num_features, num_classes, metric_name)
    try:
        # a bad or too large size (weights and the first attention layer's activations) is refused before any run
        check_model_fits(model_name, model_kwargs, dev, graph.num_nodes, graph.edge_index.size(1))
    except ValueError as exc:
        if num_classes > graph.y.size(0):  # labels up to 1e9: say where the output layer's size comes from
            raise GraphRMAError(
                f"{exc} (the labels go up to {num_classes - 1}, so the output layer has {num_classes} "
                f"classes for {graph.y.size(0)} nodes)"
            ) from None
        raise
    return {
        "dataset": ds_name,
        "protocol": proto.name,
        **proto.settings(),
        "metric": metric_name,
        "stop_on": rule,
        "model": model_name,
        "model_kwargs": model_kwargs,
    }


def _flat(c: Dict[str, Any]) -> Dict[str, Any]:
    return {**{k: v for k, v in c.items() if k != "model_kwargs"}, **c.get("model_kwargs", {})}


def _plan(out: Path, seeds: List[int], variants: List[str], config: Dict[str, Any], resume: bool):
    """``(finished runs reused from out, runs to do as (spec, seed, record path, checkpoint path))``, seed-major;
    says on stderr what was reused and why other finished runs were not."""
    results: List[Dict[str, Any]] = []
    todo = []
    differing: Dict[str, None] = {}  # why finished runs in out were not reused (other settings), in order
    for seed in seeds:  # seed-major: an interrupted study has every variant on the same seeds
        for spec in variants:
            path = out / "runs" / slug(spec) / f"seed{seed}.json"
            ckpt = out / "checkpoints" / f"{slug(spec)}_seed{seed}.pt"
            if resume and path.is_file():
                reused = _reusable(path, ckpt, spec, config, differing)
                if reused is not None:
                    results.append(reused)
                    continue
            todo.append((spec, seed, path, ckpt))
    if resume and results:
        print(f"resume: {len(results)} finished run(s) reused from {out}, {len(todo)} to do", file=sys.stderr)
    if differing:
        print(
            f"resume: runs in {out} made with other settings or incomplete ({', '.join(differing)}) are trained again",
            file=sys.stderr,
        )
    return results, todo


def _reusable(path: Path, ckpt: Path, spec: str, config: Dict[str, Any], differing: Dict[str, None]):
    """The finished run recorded in ``path`` when it has the study's settings and its checkpoint, else ``None``
    (adding to ``differing`` what differs)."""
    try:
        saved = read_json(path)
    except (OSError, ValueError):
        return None
    if not isinstance(saved.get("config"), dict):
        return None
    if _upgrade(saved["config"]) == _upgrade(config) and saved.get("variant") == spec:
        if ckpt.is_file():  # a run is finished only when everything it leaves behind is there
            return {**saved, "metrics": upgrade_metrics(saved.get("metrics", {}))}
        differing[f"checkpoint {ckpt.name} missing"] = None
        return None
    try:
        check_resume(_flat(_upgrade(saved["config"])), _flat(_upgrade(config)), may_change=())
    except ResumeMismatchError as exc:
        differing.update(dict.fromkeys(f"{k} {o!r} -> {n!r}" for k, o, n in exc.differences))
    return None


def _one_run(proto, graph, config, spec, seed, path, ckpt, out, resume, progress, dev) -> Dict[str, Any]:
    """Train one variant on one seed (on split ``seed mod splits``), save its checkpoint, then its record (last: a
    run counts as finished only once its record exists)."""
    split = seed % (1 if graph.train_mask.dim() == 1 else graph.train_mask.size(1))  # Cora's [N] masks: one split
    data = select_split(graph, split)
    partial = ckpt.with_name(f"{ckpt.stem}.partial.pt")
    if not resume:
        partial.unlink(missing_ok=True)  # without --resume every run starts afresh
    metrics, state, net = train_run(proto, data, spec, seed, progress=progress, device=str(dev), partial=partial)
    save_checkpoint(
        ckpt,
        {
            "task": "node",
            "dataset": config["dataset"],
            "split": split,
            "protocol": proto.name,
            "settings": proto.settings(),
            "model_name": config["model"],
            "model_kwargs": net.model_kwargs,
            "variant": spec,
            "seed": seed,
            "model": state,
            "metrics": dict(metrics),
        },
    )
    record = {
        "variant": spec,
        "seed": seed,
        "split": split,
        "config": config,
        "metrics": metrics,
        "checkpoint": str(ckpt.relative_to(out)),
    }
    write_json(path, record)
    return record


def _write_study(out, config, seeds, variants, rows, results, proto, make_plot) -> List[Path]:
    """``results.json``, ``results.csv`` and (``make_plot``, with matplotlib) the plot of the study."""
    files = [
        write_json(
            out / "results.json",
            {"config": config, "seeds": seeds, "variants": variants, "summary": rows, "runs": results},
        ),
        write_csv(out / "results.csv", rows),
    ]
    if make_plot:
        try:
            title = f"{proto.model.upper()} on {config['dataset']} ({proto.name} protocol)"
            files.append(plot(results, variants, out / "accuracy.png", title=title, metric=config["metric"]))
        except MissingExtraError as exc:  # optional: the results are written, the run goes on
            print(f"plot skipped ({exc.module} not installed): {exc.hint}", file=sys.stderr)
    return files
