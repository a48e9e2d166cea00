"""Reference models built from this package's layers (rebuildable from a checkpoint's ``model_kwargs``)."""

from .classic_gat import ClassicGAT
from .gat import TwoLayerGAT
from .residual_gat import ResidualGAT
from .text import SelfAttentiveClassifier, TransformerClassifier

__all__ = ["ClassicGAT", "ResidualGAT", "SelfAttentiveClassifier", "TransformerClassifier", "TwoLayerGAT"]
