"""Diagnostics for multi-head attention: head diversity, head redundancy, calibration, sweeps and pictures.

* :mod:`.capture`: :class:`HeadCapture` records (and masks) the heads of a PyG attention layer,
  ``nn.MultiheadAttention`` or a HuggingFace ``transformers`` attention module (:mod:`graph_rma.hf`) inside any model.
* :mod:`.diversity`: Dist, Div (Lin et al.), Disagreement (Li et al.), per-head entropy; sparse and dense.
* :mod:`.redundancy`: per-head masking drops (Michel et al., 2019).
* :mod:`.calibration`: ECE, overconfidence error, NLL, Brier score, predictive entropy, its empirical CDF and
  out-of-distribution AUROC; temperature scaling and ensemble averaging.
* :mod:`.sweep`: error versus the number of heads.
* :mod:`.plots`: reliability diagram, drop histograms, entropy CDFs, sweep curves (PNG, Agg).
* :mod:`.neighbourhood`: one node's neighbourhood with each head's attention, as a networkx graph and a picture.

The report of a trained model (all of the above, as JSON + PNGs; ``graph-rma report``) is
:mod:`graph_rma.tasks.report`.
"""

from .calibration import (
    CalibrationBins,
    apply_temperature,
    brier_score,
    calibration_bins,
    class_probabilities,
    empirical_cdf,
    ensemble_probabilities,
    entropy_auroc,
    expected_calibration_error,
    fit_temperature,
    negative_log_likelihood,
    overconfidence_error,
    predictive_entropy,
)
from .capture import HeadCapture, ProjectionHeads, num_heads
from .diversity import attention_disagreement, attention_div, attention_entropy, head_distance, head_diversity
from .neighbourhood import neighbourhood_attention_figure, neighbourhood_attention_graph, plot_neighbourhood_attention
from .plots import plot_entropy_cdf, plot_head_entropy, plot_head_importance, plot_heads_sweep, reliability_diagram
from .redundancy import HeadImportance, head_importance, mask_heads
from .sweep import heads_sweep

__all__ = [
    "negative_log_likelihood",
    "fit_temperature",
    "entropy_auroc",
    "ensemble_probabilities",
    "class_probabilities",
    "brier_score",
    "apply_temperature",
    "CalibrationBins",
    "HeadCapture",
    "HeadImportance",
    "ProjectionHeads",
    "attention_disagreement",
    "attention_div",
    "attention_entropy",
    "calibration_bins",
    "empirical_cdf",
    "expected_calibration_error",
    "head_distance",
    "head_diversity",
    "head_importance",
    "heads_sweep",
    "mask_heads",
    "neighbourhood_attention_figure",
    "neighbourhood_attention_graph",
    "num_heads",
    "overconfidence_error",
    "plot_entropy_cdf",
    "plot_head_entropy",
    "plot_head_importance",
    "plot_heads_sweep",
    "plot_neighbourhood_attention",
    "predictive_entropy",
    "reliability_diagram",
]
