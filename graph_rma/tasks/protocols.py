r"""Node-classification protocols: everything about an experiment except the variant and the seed, as one named,
citable preset that a reader can diff against the paper's code.

A :class:`Protocol` says how the graph is prepared (feature normalisation, edge direction, self-loops), which model
is trained (the 2-layer GAT or Platonov et al.'s residual GAT, its size and dropout), how (Adam's learning rate and
weight decay, the epoch cap, the early-stopping rule and its patience) and how it is scored (accuracy, or ROC AUC
for a binary task). :func:`resolve_protocol` applies command-line overrides to a preset; nothing else decides what
runs. This module imports neither torch nor PyG, so ``--help`` lists the presets without loading them.

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
========================  =====================================================================================
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Dict, Mapping, Optional, Tuple

__all__ = ["Protocol", "PROTOCOLS", "DATASET_PROTOCOL", "MODELS", "STOPPING", "METRIC_OPTIONS", "default_protocol",
           "resolve_protocol"]

MODELS: Tuple[str, ...] = ("gat", "residual")
#: early-stopping rules of a protocol: ``val_metric`` is ``val_acc`` for accuracy and ``val_auc`` for ROC AUC
STOPPING: Tuple[str, ...] = ("val_metric", "val_acc", "val_auc", "val_loss", "gat")
METRIC_OPTIONS: Tuple[str, ...] = ("auto", "accuracy", "roc_auc")
FEATURES: Tuple[str, ...] = ("none", "row")  # graph_rma.data.transforms.FEATURE_OPTIONS
EDGES: Tuple[str, ...] = ("as-stored", "reversed", "undirected")  # graph_rma.data.transforms.EDGE_OPTIONS


@dataclass(frozen=True)
class Protocol:
    """One node-classification protocol (see the module). ``hidden`` is the units per head for ``model="gat"``
    and the width of the residual stream (all heads together) for ``model="residual"``; ``layers`` is 2 for the
    GAT and the number of residual blocks otherwise; ``out_heads`` is the GAT's output heads."""

    name: str
    reproduces: str
    features: str = "row"
    edges: str = "as-stored"
    self_loops: bool = True
    model: str = "gat"
    hidden: int = 8
    heads: int = 8
    out_heads: int = 1
    layers: int = 2
    ffn_multiplier: float = 1.0
    sep: bool = False
    dropout: float = 0.6
    attn_dropout: float = 0.6
    v2: bool = False
    lr: float = 0.005
    weight_decay: float = 5e-4
    epochs: int = 1000
    patience: int = 100
    early_stopping: str = "val_metric"
    metric: str = "auto"
    lean: bool = False

    def __post_init__(self) -> None:
        def choice(name: str, options: Tuple[str, ...]) -> None:
            if getattr(self, name) not in options:
                raise ValueError(f"{name}: expected one of {options}, got {getattr(self, name)!r}")

        choice("features", FEATURES)
        choice("edges", EDGES)
        choice("model", MODELS)
        choice("early_stopping", STOPPING)
        choice("metric", METRIC_OPTIONS)
        for name in ("self_loops", "sep", "v2", "lean"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name}: expected True or False, got {getattr(self, name)!r}")
        for name in ("hidden", "heads", "out_heads", "layers", "epochs", "patience"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}: expected a positive integer, got {value!r}")
        for name, low, high in (("dropout", 0, 1), ("attn_dropout", 0, 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value < high:
                raise ValueError(f"{name}: expected a probability in [0, 1), got {value!r}")
        for name in ("lr", "weight_decay", "ffn_multiplier"):
            value = getattr(self, name)
            ok = not isinstance(value, bool) and isinstance(value, (int, float)) and value == value \
                and abs(value) != float("inf") and (value > 0 if name != "weight_decay" else value >= 0)
            if not ok:
                raise ValueError(f"{name}: expected a finite number {'>= 0' if name == 'weight_decay' else '> 0'}, "
                                 f"got {value!r}")
        if self.model == "gat" and self.layers != 2:
            raise ValueError(f"layers: the GAT model has 2 layers (use model='residual' for more), got {self.layers}")
        if self.model == "residual" and self.hidden % self.heads:
            raise ValueError(f"hidden: the residual GAT splits hidden over the heads; expected a multiple of "
                             f"{self.heads}, got {self.hidden}")
        if self.sep and self.model != "residual":
            raise ValueError("sep: only the residual GAT has a -sep variant (model='residual')")

    def settings(self) -> Dict[str, Any]:
        """Every field but ``name`` and ``reproduces``: what a run's results depend on (resume compares these)."""
        return {k: v for k, v in asdict(self).items() if k not in ("name", "reproduces")}


PROTOCOLS: Dict[str, Protocol] = {
    "gat": Protocol(
        "gat", "Veličković et al., ICLR 2018 (GAT), Table 2: Cora 83.0 ± 0.7, CiteSeer 72.5 ± 0.7; their Cora "
        "setting (8x8 heads, dropout 0.6, Adam lr 0.005, weight decay 5e-4, patience 100 on validation accuracy)"),
    "ggcn": Protocol(
        "ggcn", "Yan et al., ICDM 2022 ('Two sides of the same coin: heterophily and oversmoothing'), Table 1, GAT "
        "row (chameleon 60.26 ± 2.50, squirrel 40.72, Actor 27.44, Texas 52.16, Wisconsin 49.41, Cornell 61.89): "
        "their code's setting (table_1_GAT.sh: 8x8 heads, dropout 0.6, lr 0.005, weight decay 5e-5; "
        "row-normalised features, each node attends over its out-links plus itself; 1500 epochs, the lowest "
        "validation loss kept, patience 100)",
        features="row", edges="reversed", weight_decay=5e-5, epochs=1500, early_stopping="val_loss"),
    "platonov": Protocol(
        "platonov", "Platonov et al., ICLR 2023 ('A critical look at the evaluation of GNNs under heterophily'), "
        "GAT rows (minesweeper 92.01 ± 0.68, tolokers 83.70 ± 0.47 ROC AUC; chameleon_filtered 39.21 ± 3.08 "
        "accuracy): their code's configuration (residual blocks with LayerNorm and a feed-forward net, hidden 512, "
        "8 heads, dropout 0.2, no attention dropout, Adam lr 3e-5, no weight decay, 1000 steps, the step with the "
        "best validation metric kept, undirected graph with self-loops, raw features; 5 blocks, their default: the "
        "paper picks 1-5 on validation). Several seconds per step on one CPU core: meant for a GPU",
        features="none", edges="undirected", model="residual", hidden=512, heads=8, layers=5, dropout=0.2,
        attn_dropout=0.0, lr=3e-5, weight_decay=0.0, epochs=1000, patience=1000),
    "platonov-small": Protocol(
        "platonov-small", "Platonov et al.'s architecture and protocol (see 'platonov') at CPU scale: hidden 64, "
        "8 heads, 3 blocks, lr 1e-3, 500 steps, the step with the best validation metric kept; blocks and learning "
        "rate chosen on minesweeper's validation splits 0-1 (docs/baselines.md)",
        features="none", edges="undirected", model="residual", hidden=64, heads=8, layers=3, dropout=0.2,
        attn_dropout=0.0, lr=1e-3, weight_decay=0.0, epochs=500, patience=500),
}

#: each graph's default protocol (the strong baseline that reproduces a published number on it)
DATASET_PROTOCOL: Dict[str, str] = {
    "cora": "gat", "citeseer": "gat",
    "cornell": "ggcn", "texas": "ggcn", "wisconsin": "ggcn", "chameleon": "ggcn", "squirrel": "ggcn",
    "actor": "ggcn",
}
PLATONOV_DEFAULT = "platonov-small"  # every graph of Platonov et al.'s format


def default_protocol(dataset: str) -> str:
    """The name of ``dataset``'s default protocol: :data:`DATASET_PROTOCOL`, else ``platonov-small``."""
    return DATASET_PROTOCOL.get(str(dataset).lower(), PLATONOV_DEFAULT)


def resolve_protocol(protocol: Optional[str], dataset: str, overrides: Optional[Mapping[str, Any]] = None
                     ) -> Protocol:
    """Preset ``protocol`` (``None``: the dataset's default) with ``overrides`` (fields set to ``None`` are left
    as the preset has them); validated, so a bad value is a one-line ``ValueError`` naming the field."""
    name = default_protocol(dataset) if protocol is None else str(protocol).lower()
    if name not in PROTOCOLS:
        raise ValueError(f"protocol: expected one of {tuple(PROTOCOLS)}, got {protocol!r}")
    changes = {k: v for k, v in (overrides or {}).items() if v is not None}
    known = {f.name for f in fields(Protocol)} - {"name", "reproduces"}
    unknown = sorted(set(changes) - known)
    if unknown:
        raise ValueError(f"protocol overrides: unknown field(s) {unknown}; expected some of {sorted(known)}")
    return replace(PROTOCOLS[name], **changes)
