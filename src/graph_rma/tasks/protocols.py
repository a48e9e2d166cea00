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

from .config_fields import KINDS as KINDS  # re-exported: the kinds a field may take
from .config_fields import check_value, config_field

__all__ = [
    "Protocol",
    "PROTOCOLS",
    "DATASET_SETTINGS",
    "DATASET_PROTOCOL",
    "MODELS",
    "STOPPING",
    "METRIC_OPTIONS",
    "NORMS",
    "default_protocol",
    "resolve_protocol",
    "protocol_fields",
]

MODELS: Tuple[str, ...] = ("gat", "residual", "classic")
#: early-stopping rules of a protocol: ``val_metric`` is ``val_acc`` for accuracy and ``val_auc`` for ROC AUC
STOPPING: Tuple[str, ...] = ("val_metric", "val_acc", "val_auc", "val_loss", "gat")
METRIC_OPTIONS: Tuple[str, ...] = ("auto", "accuracy", "roc_auc")
FEATURES: Tuple[str, ...] = ("none", "row")  # graph_rma.data.transforms.FEATURE_OPTIONS
EDGES: Tuple[str, ...] = ("as-stored", "reversed", "undirected")  # graph_rma.data.transforms.EDGE_OPTIONS
NORMS: Tuple[str, ...] = ("batch", "layer", "none")  # graph_rma.models.classic_gat.NORMS

# a field with its help and kind (graph_rma.tasks.config_fields.KINDS), and the check __post_init__ applies to it
_field = config_field  # (default, kind, help, choices=())
_check = check_value  # (name, value, metadata): a one-line ValueError naming the field


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
            raise ValueError(f"layers: the GAT model has 2 layers (use model='residual' for more), got {self.layers}")
        if self.model in ("residual", "classic") and self.hidden % self.heads:
            raise ValueError(
                f"hidden: the {self.model} GAT splits hidden over the heads; expected a multiple of "
                f"{self.heads}, got {self.hidden}"
            )
        if self.sep and self.model != "residual":
            raise ValueError("sep: only the residual GAT has a -sep variant (model='residual')")

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

#: per-graph fields of a preset, applied before the caller's overrides (Luo et al. tuned each graph; their script)
DATASET_SETTINGS: Dict[str, Dict[str, Dict[str, Any]]] = {
    "luo": {
        "minesweeper": {
            "hidden": 64,
            "layers": 15,
            "lr": 0.01,
            "weight_decay": 0.0,
            "dropout": 0.2,
            "norm": "batch",
            "epochs": 2000,
            "patience": 2000,
        },
        "chameleon_filtered": {
            "hidden": 256,
            "layers": 2,
            "lr": 0.01,
            "weight_decay": 1e-3,
            "dropout": 0.7,
            "norm": "batch",
            "epochs": 200,
            "patience": 200,
        },
    },
}

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
    so a bad value is a one-line ``ValueError`` naming the field."""
    name = default_protocol(dataset) if protocol is None else str(protocol).lower()
    if name not in PROTOCOLS:
        raise ValueError(f"protocol: expected one of {tuple(PROTOCOLS)}, got {protocol!r}")
    changes = {k: v for k, v in (overrides or {}).items() if v is not None}
    known = {f.name for f in protocol_fields()}
    unknown = sorted(set(changes) - known)
    if unknown:
        raise ValueError(f"protocol overrides: unknown field(s) {unknown}; expected some of {sorted(known)}")
    per_graph = DATASET_SETTINGS.get(name, {}).get(str(dataset).lower(), {})
    return replace(PROTOCOLS[name], **{**per_graph, **changes})
