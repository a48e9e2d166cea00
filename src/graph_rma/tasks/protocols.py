r"""Node-classification protocols: everything about an experiment except the variant and the seed, as one named,
citable preset that a reader can diff against the paper's code.

A :class:`Protocol` says how the graph is prepared (feature normalisation, edge direction, self-loops), which model
is trained (the 2-layer GAT, Platonov et al.'s residual GAT or Luo et al.'s classic GAT, its size and dropout),
how (Adam's learning rate and weight decay, the epoch cap, the early-stopping rule and its patience) and how it is
scored (accuracy, or ROC AUC for a binary task). :func:`resolve_protocol` applies command-line overrides to a
preset; nothing else decides what runs. This module imports neither torch nor PyG, so ``--help`` lists the presets
without loading them.

========================  =====================================================================================
preset                    reproduces
========================  =====================================================================================
``gat``                   Veličković et al., ICLR 2018, Table 2 (GAT on Cora 83.0 ± 0.7, CiteSeer 72.5 ± 0.7)
``ggcn``                  Yan et al., ICDM 2022 ("Two sides of the same coin"), Table 1, GAT row, with their code
                          (Yujun-Yan/Heterophily_and_oversmoothing, ``table_1_GAT.sh``)
``platonov``              Platonov et al., ICLR 2023 ("A critical look at the evaluation of GNNs under
                          heterophily"), GAT rows, their code's configuration (GPU scale)
``platonov-small``        the same architecture at CPU scale (width 64, 3 blocks, lr 1e-3, 500 steps), chosen on
                          minesweeper's validation splits (``docs/baselines.md``)
``luo``                   Luo, Shi and Wu, NeurIPS 2024 ("Classic GNNs are strong baselines"), the tuned classic GAT:
                          their code's per-graph settings (LUOyk1999/tunedGNN, ``medium_graph/run_gnn.sh``)
========================  =====================================================================================

Each field of :class:`Protocol` carries its help text and the kind of value it takes (``metadata``): ``graph-rma
node`` builds one option per field from them, and :meth:`Protocol.__post_init__` validates every value once, where
it enters. A preset may also set fields per graph (:data:`DATASET_SETTINGS`: Luo et al. tuned each graph).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Dict, Mapping, Optional, Tuple

from .._errors import GraphRMAError
from ..kinds import EARLY_STOPPING_RULES
from .config_fields import KINDS as KINDS  # re-exported: the kinds a field may take
from .config_fields import check_value, config_field

__all__ = [
    "Protocol",
    "PROTOCOLS",
    "DATASET_SETTINGS",
    "DATASET_PROTOCOL",
    "MODELS",
    "MODEL_FIELDS",
    "STOPPING",
    "METRIC_OPTIONS",
    "NORMS",
    "LUO_SCRIPT",
    "SETTINGS_SOURCE",
    "default_protocol",
    "graph_key",
    "protocol_note",
    "resolve_protocol",
    "protocol_fields",
]

MODELS: Tuple[str, ...] = ("gat", "residual", "classic")
#: early-stopping rules of a protocol: ``val_metric`` is ``val_acc`` for accuracy and ``val_auc`` for ROC AUC
STOPPING: Tuple[str, ...] = ("val_metric",) + EARLY_STOPPING_RULES
METRIC_OPTIONS: Tuple[str, ...] = ("auto", "accuracy", "roc_auc")
FEATURES: Tuple[str, ...] = ("none", "row")  # graph_rma.data.transforms.FEATURE_OPTIONS
EDGES: Tuple[str, ...] = ("as-stored", "reversed", "undirected")  # graph_rma.data.transforms.EDGE_OPTIONS
NORMS: Tuple[str, ...] = ("batch", "layer", "none")  # graph_rma.models.classic_gat.NORMS
#: the fields only some models read (:meth:`Protocol.model_settings`); an override of one for another model is refused
MODEL_FIELDS: Dict[str, Tuple[str, ...]] = {
    "out_heads": ("gat",),
    "norm": ("classic",),
    "residual": ("classic",),
    "pre_linear": ("classic",),
    "ffn_multiplier": ("residual",),
    "sep": ("residual",),
}

# a field with its help and kind (graph_rma.tasks.config_fields.KINDS), and the check __post_init__ applies to it
_field = config_field  # (default, kind, help, choices=())
_check = check_value  # (name, value, metadata): a one-line GraphRMAError naming the field


@dataclass(frozen=True)
class Protocol:
    """One node-classification protocol (see the module): every field but ``name`` and ``reproduces`` is a setting
    a run's results depend on, with its help text and kind in ``metadata`` (:func:`protocol_fields`)."""

    name: str
    reproduces: str
    features: str = _field(
        "row", "choice", "feature normalisation: none or row (each row divided by its sum)", FEATURES
    )
    edges: str = _field(
        "as-stored",
        "choice",
        "which neighbours a node attends over: as-stored (its in-links, PyG's "
        "convention), reversed (its out-links), undirected (both)",
        EDGES,
    )
    self_loops: bool = _field(True, "bool", "attention layers add self-loops")
    model: str = _field(
        "gat",
        "choice",
        "gat: the 2-layer GAT; residual: Platonov et al.'s residual blocks "
        "(LayerNorm, attention, feed-forward net); classic: Luo et al.'s classic GAT (residual map, "
        "normalisation, ReLU, dropout per layer)",
        MODELS,
    )
    hidden: int = _field(
        8, "positive_int", "units per head (gat) or the width of every layer, all heads together (residual, classic)"
    )
    heads: int = _field(8, "positive_int", "attention heads (gat: first layer)")
    out_heads: int = _field(1, "positive_int", "heads of the GAT's output layer")
    layers: int = _field(2, "positive_int", "attention layers (residual: blocks; gat: 2)")
    ffn_multiplier: float = _field(1.0, "positive_float", "the residual blocks' feed-forward width over hidden")
    sep: bool = _field(False, "bool", "the residual GAT's -sep variant (the node's own projection beside its message)")
    norm: str = _field("none", "choice", "normalisation after each classic layer: batch, layer or none", NORMS)
    residual: bool = _field(True, "bool", "classic layers add a learned linear map of their input")
    pre_linear: bool = _field(False, "bool", "a linear layer before the first classic layer")
    dropout: float = _field(0.6, "probability", "dropout on features")
    attn_dropout: float = _field(0.6, "probability", "dropout on the attention coefficients")
    v2: bool = _field(False, "bool", "GATv2 attention")
    lr: float = _field(0.005, "positive_float", "Adam's learning rate")
    weight_decay: float = _field(5e-4, "nonnegative_float", "Adam's weight decay")
    epochs: int = _field(1000, "positive_int", "most epochs (full-batch steps) per run")
    patience: int = _field(100, "positive_int", "epochs without improvement before stopping")
    early_stopping: str = _field(
        "val_metric",
        "choice",
        "val_metric: the best validation metric (accuracy or ROC "
        "AUC); val_loss: the lowest validation loss; gat: the GAT code's rule (accuracy or "
        "loss resets the patience)",
        STOPPING,
    )
    metric: str = _field("auto", "choice", "auto: ROC AUC for a binary task, accuracy otherwise", METRIC_OPTIONS)
    lean: bool = _field(
        False,
        "bool",
        "the memory-lean attention path (same results to float rounding; far less "
        "memory per edge, faster on CPU for large graphs)",
    )

    def __post_init__(self) -> None:
        for f in protocol_fields():
            _check(f.name, getattr(self, f.name), f.metadata)
        if self.model == "gat" and self.layers != 2:
            raise GraphRMAError(
                f"layers: the GAT model has 2 layers (use model='residual' for more), got {self.layers}"
            )
        if self.model in ("residual", "classic") and self.hidden % self.heads:
            raise GraphRMAError(
                f"hidden: the {self.model} GAT splits hidden over the heads; expected a multiple of "
                f"{self.heads}, got {self.hidden}"
            )
        if self.sep and self.model != "residual":
            raise GraphRMAError("sep: only the residual GAT has a -sep variant (model='residual')")

    def settings(self) -> Dict[str, Any]:
        """Every field but ``name`` and ``reproduces``: what a run's results depend on (resume compares these)."""
        return {k: v for k, v in asdict(self).items() if k not in ("name", "reproduces")}

    def model_settings(self, in_channels: int, num_classes: int, metric: str) -> Tuple[str, Dict[str, Any]]:
        """``(model name, constructor arguments)`` of the protocol's model; one output for ROC AUC. The one place
        where the protocol's fields become a model's arguments."""
        out = 1 if metric == "roc_auc" else num_classes
        common = {
            "in_channels": in_channels,
            "out_channels": out,
            "heads": self.heads,
            "dropout": self.dropout,
            "attn_dropout": self.attn_dropout,
            "v2": self.v2,
            "self_loops": self.self_loops,
            "lean": self.lean,
        }
        if self.model == "gat":
            return "gat", {**common, "hidden_channels": self.hidden, "out_heads": self.out_heads}
        if self.model == "classic":
            return "classic", {
                **common,
                "hidden": self.hidden,
                "layers": self.layers,
                "norm": self.norm,
                "residual": self.residual,
                "pre_linear": self.pre_linear,
            }
        return "residual", {
            **common,
            "hidden": self.hidden,
            "layers": self.layers,
            "ffn_multiplier": self.ffn_multiplier,
            "sep": self.sep,
        }


def protocol_fields():
    """The settings fields of :class:`Protocol` (all but ``name`` and ``reproduces``), in order."""
    return [f for f in fields(Protocol) if f.name not in ("name", "reproduces")]


PROTOCOLS: Dict[str, Protocol] = {
    "gat": Protocol(
        "gat",
        "Veličković et al., ICLR 2018 (GAT), Table 2: Cora 83.0 ± 0.7, CiteSeer 72.5 ± 0.7; their Cora "
        "setting (8x8 heads, dropout 0.6, Adam lr 0.005, weight decay 5e-4, patience 100 on validation accuracy)",
    ),
    "ggcn": Protocol(
        "ggcn",
        "Yan et al., ICDM 2022 ('Two sides of the same coin: heterophily and oversmoothing'), Table 1, GAT "
        "row (chameleon 60.26 ± 2.50, squirrel 40.72, Actor 27.44, Texas 52.16, Wisconsin 49.41, Cornell 61.89): "
        "their code's setting (table_1_GAT.sh: 8x8 heads, dropout 0.6, lr 0.005, weight decay 5e-5; "
        "row-normalised features, each node attends over its out-links plus itself; 1500 epochs, the lowest "
        "validation loss kept, patience 100)",
        features="row",
        edges="reversed",
        weight_decay=5e-5,
        epochs=1500,
        early_stopping="val_loss",
    ),
    "platonov": Protocol(
        "platonov",
        "Platonov et al., ICLR 2023 ('A critical look at the evaluation of GNNs under heterophily'), "
        "GAT rows (minesweeper 92.01 ± 0.68, tolokers 83.70 ± 0.47 ROC AUC; chameleon_filtered 39.21 ± 3.08 "
        "accuracy): their code's configuration (residual blocks with LayerNorm and a feed-forward net, hidden 512, "
        "8 heads, dropout 0.2, no attention dropout, Adam lr 3e-5, no weight decay, 1000 steps, the step with the "
        "best validation metric kept, undirected graph with self-loops, raw features; 5 blocks, their default: the "
        "paper picks 1-5 on validation). Several seconds per step on one CPU core: meant for a GPU",
        features="none",
        edges="undirected",
        model="residual",
        hidden=512,
        heads=8,
        layers=5,
        dropout=0.2,
        attn_dropout=0.0,
        lr=3e-5,
        weight_decay=0.0,
        epochs=1000,
        patience=1000,
    ),
    "platonov-small": Protocol(
        "platonov-small",
        "Platonov et al.'s architecture and protocol (see 'platonov') at CPU scale: hidden 64, "
        "8 heads, 3 blocks, lr 1e-3, 500 steps, the step with the best validation metric kept; blocks and learning "
        "rate chosen on minesweeper's validation splits 0-1 (docs/baselines.md)",
        features="none",
        edges="undirected",
        model="residual",
        hidden=64,
        heads=8,
        layers=3,
        dropout=0.2,
        attn_dropout=0.0,
        lr=1e-3,
        weight_decay=0.0,
        epochs=500,
        patience=500,
    ),
    "luo": Protocol(
        "luo",
        "Luo, Shi and Wu, NeurIPS 2024 ('Classic GNNs are strong baselines: reassessing GNNs for node "
        "classification'), heterophilous graphs, GAT* row (minesweeper 97.73 ± 0.73 ROC AUC; chameleon_filtered, "
        "their 'chameleon', 44.13 ± 4.17 accuracy): their code's per-graph settings (LUOyk1999/tunedGNN, "
        "medium_graph/run_gnn.sh: a classic single-head GAT with a learned residual map, BatchNorm, ReLU and "
        "dropout per layer; undirected graph with self-loops, raw features, Adam, the epoch with the best "
        "validation metric kept, no early stopping)",
        features="none",
        edges="undirected",
        model="classic",
        hidden=64,
        heads=1,
        layers=2,
        norm="batch",
        residual=True,
        dropout=0.5,
        attn_dropout=0.0,
        lr=0.001,
        weight_decay=0.0,
        epochs=1000,
        patience=1000,
    ),
}


def _luo(line: int, hidden: int, layers: int, lr: float, weight_decay: float, dropout: float, **flags: Any):
    """``(line, fields)``: line ``line`` of Luo et al.'s ``medium_graph/run_gnn.sh`` (a ``--gnn gat`` line) as
    protocol fields: ``--hidden_channels``, ``--local_layers``, ``--lr``, ``--weight_decay``, ``--dropout``,
    ``--ln``/``--bn`` as ``norm`` (neither: none), ``--res`` as ``residual``, ``--pre_linear``, ``--epochs`` (their
    default 500, ``medium_graph/parse.py`` line 19) with no early stopping (patience = epochs)."""
    epochs = flags.get("epochs", 500)
    norm = "layer" if flags.get("ln") else "batch" if flags.get("bn") else "none"
    return line, {
        "hidden": hidden,
        "layers": layers,
        "lr": lr,
        "weight_decay": weight_decay,
        "dropout": dropout,
        "norm": norm,
        "residual": bool(flags.get("res")),
        "pre_linear": bool(flags.get("pre_linear")),
        "epochs": epochs,
        "patience": epochs,
    }


#: The script every ``luo`` setting comes from (LUOyk1999/tunedGNN at this commit), for the citations below.
LUO_SCRIPT = "LUOyk1999/tunedGNN@23f9604, medium_graph/run_gnn.sh"

# Every GAT line of LUO_SCRIPT (heads: their --num_heads default 1, the preset's), by this package's graph names:
# their chameleon/squirrel are the filtered graphs (medium_graph/dataset.py's load_wiki_new reads
# {name}_filtered.npz), their amazon-ratings is amazon_ratings, and so on.
_LUO_LINES: Dict[str, Tuple[int, Dict[str, Any]]] = {
    # homophilous graphs
    "amazon_computer": _luo(5, 64, 2, 0.001, 5e-5, 0.5, epochs=1000, ln=True),
    "amazon_photo": _luo(9, 64, 3, 0.001, 5e-5, 0.5, epochs=1000, ln=True, res=True),
    "coauthor_cs": _luo(13, 256, 1, 0.001, 5e-4, 0.3, epochs=1500, ln=True, res=True),
    "coauthor_physics": _luo(17, 256, 2, 0.001, 5e-4, 0.7, epochs=1500, bn=True, res=True),
    "wikics": _luo(21, 512, 2, 0.001, 0.0, 0.7, epochs=1000, ln=True, res=True),
    "cora": _luo(25, 512, 3, 0.001, 5e-4, 0.2, res=True),
    "citeseer": _luo(29, 256, 3, 0.001, 0.01, 0.5, res=True),
    "pubmed": _luo(33, 512, 2, 0.01, 5e-4, 0.5),
    # heterophilous graphs
    "amazon_ratings": _luo(39, 512, 4, 0.001, 0.0, 0.5, epochs=2500, bn=True, res=True),
    "minesweeper": _luo(43, 64, 15, 0.01, 0.0, 0.2, epochs=2000, bn=True, res=True),
    "roman_empire": _luo(47, 512, 10, 0.001, 0.0, 0.3, epochs=2500, bn=True, res=True, pre_linear=True),
    "questions": _luo(51, 512, 3, 3e-5, 0.0, 0.2, epochs=1500, ln=True, res=True, pre_linear=True),
    "squirrel_filtered": _luo(55, 512, 7, 0.005, 5e-4, 0.5, bn=True, res=True),
    "chameleon_filtered": _luo(59, 256, 2, 0.01, 0.001, 0.7, epochs=200, bn=True, res=True),
}

#: per-graph fields of a preset, applied before the caller's overrides; keyed by the graph's file name (lower case,
#: ``-`` as ``_``, :func:`graph_key`). ``luo``: every GAT line of Luo et al.'s script (:data:`SETTINGS_SOURCE`).
DATASET_SETTINGS: Dict[str, Dict[str, Dict[str, Any]]] = {"luo": {g: f for g, (_, f) in _LUO_LINES.items()}}
#: where each per-graph setting comes from (the preset's ``reproduces`` names it for that graph)
SETTINGS_SOURCE: Dict[str, Dict[str, str]] = {"luo": {g: f"{LUO_SCRIPT} line {n}" for g, (n, _) in _LUO_LINES.items()}}


def graph_key(dataset: str) -> str:
    """``dataset`` as :data:`DATASET_SETTINGS` keys it: lower case, ``-`` as ``_`` (``"Roman-Empire"`` ->
    ``"roman_empire"``)."""
    return str(dataset).strip().lower().replace("-", "_")


def protocol_note(protocol: Optional[str], dataset: str) -> Optional[str]:
    """One line when preset ``protocol`` tunes its settings per graph but has none for ``dataset`` (its defaults
    are used then, and this line says which); ``None`` otherwise."""
    name = default_protocol(dataset) if protocol is None else str(protocol).lower()
    per_graph = DATASET_SETTINGS.get(name)
    if not per_graph or graph_key(dataset) in per_graph:
        return None
    keys = sorted({k for settings in per_graph.values() for k in settings})
    preset = PROTOCOLS[name]
    used = ", ".join(f"{k} {getattr(preset, k)}" for k in keys)
    return (
        f"protocol {name}: no per-graph settings for {dataset} (they cover {', '.join(per_graph)}); the preset's "
        f"defaults are used: {used}"
    )


#: each graph's default protocol (the strong baseline that reproduces a published number on it)
DATASET_PROTOCOL: Dict[str, str] = {
    "cora": "gat",
    "citeseer": "gat",
    "cornell": "ggcn",
    "texas": "ggcn",
    "wisconsin": "ggcn",
    "chameleon": "ggcn",
    "squirrel": "ggcn",
    "actor": "ggcn",
}
PLATONOV_DEFAULT = "platonov-small"  # every graph of Platonov et al.'s format


def default_protocol(dataset: str) -> str:
    """The name of ``dataset``'s default protocol: :data:`DATASET_PROTOCOL`, else ``platonov-small``."""
    return DATASET_PROTOCOL.get(str(dataset).lower(), PLATONOV_DEFAULT)


def resolve_protocol(protocol: Optional[str], dataset: str, overrides: Optional[Mapping[str, Any]] = None) -> Protocol:
    """Preset ``protocol`` (``None``: the dataset's default) with its settings for ``dataset``
    (:data:`DATASET_SETTINGS`) and ``overrides`` (fields set to ``None`` are left as the preset has them); validated,
    so a bad value is a one-line ``GraphRMAError`` naming the field, and an override the resulting model does not read
    (:data:`MODEL_FIELDS`, e.g. ``norm`` for the 2-layer GAT) a one-line :class:`graph_rma.GraphRMAError`. A preset
    tuned per graph without settings for ``dataset`` uses its defaults: :func:`protocol_note` says so in one line."""
    name = default_protocol(dataset) if protocol is None else str(protocol).lower()
    if name not in PROTOCOLS:
        raise GraphRMAError(f"protocol: expected one of {tuple(PROTOCOLS)}, got {protocol!r}")
    changes = {k: v for k, v in (overrides or {}).items() if v is not None}
    known = {f.name for f in protocol_fields()}
    unknown = sorted(set(changes) - known)
    if unknown:
        raise GraphRMAError(f"protocol overrides: unknown field(s) {unknown}; expected some of {sorted(known)}")
    per_graph = DATASET_SETTINGS.get(name, {}).get(graph_key(dataset), {})
    preset = PROTOCOLS[name]
    if per_graph:
        source = SETTINGS_SOURCE[name][graph_key(dataset)]
        preset = replace(preset, reproduces=f"{preset.reproduces}; {graph_key(dataset)}'s settings: {source}")
    resolved = replace(preset, **{**per_graph, **changes})
    unread = [k for k in changes if resolved.model not in MODEL_FIELDS.get(k, MODELS)]
    if unread:
        k = unread[0]
        raise GraphRMAError(
            f"{k}: only the {' and '.join(MODEL_FIELDS[k])} model reads it, and protocol {name} trains the "
            f"{resolved.model} model here; drop {k}, or choose a model that reads it (model)"
        )
    return resolved
