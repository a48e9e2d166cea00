"""Reference models built from this package's layers (rebuildable from a checkpoint's ``model_kwargs``)."""

from .._deprecation import renamed
from .classic_gat import ClassicGAT
from .gat import TwoLayerGAT
from .residual_gat import ResidualGAT
from .text import SelfAttentiveClassifier, TransformerClassifier

__all__ = ["ClassicGAT", "ResidualGAT", "SelfAttentiveClassifier", "TransformerClassifier", "TwoLayerGAT"]

# GAT, the old name of TwoLayerGAT (it shadowed PyG's GAT, whose arguments differ): one release, with a warning
__getattr__ = renamed(__name__, {"GAT": "graph_rma.models.gat:TwoLayerGAT"})
