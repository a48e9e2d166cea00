"""Layers: drop-in repulsive versions of PyG and torch attention layers, and GraphWriter's encoder block."""
__all__ = []
from .graph_transformer import GraphTransformerEncoder, GraphTransformerLayer  # noqa: E402

__all__ += ["GraphTransformerLayer", "GraphTransformerEncoder"]
