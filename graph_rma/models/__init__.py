"""Reference models built from this package's layers (rebuildable from a checkpoint's ``model_kwargs``)."""
from .gat import GAT
from .text import SelfAttentiveClassifier, TransformerClassifier

__all__ = ["GAT", "SelfAttentiveClassifier", "TransformerClassifier"]
