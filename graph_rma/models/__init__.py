"""Reference models built from this package's layers (rebuildable from a checkpoint's ``model_kwargs``)."""
from .gat import GAT, head_distance
from .text import SelfAttentiveClassifier, TransformerClassifier

__all__ = ["GAT", "head_distance", "SelfAttentiveClassifier", "TransformerClassifier"]
