"""Layers: drop-in repulsive versions of PyG and torch attention layers, GraphWriter's encoder block, and
:func:`convert`, which swaps them into any model."""

from .conversion import convert, register_conversion
from .gat_conv import RepulsiveGATConv, RepulsiveGATv2Conv
from .graph_transformer import GraphTransformerEncoder, GraphTransformerLayer
from .multihead_attention import RepulsiveMultiheadAttention, record_attention
from .self_attentive import SelfAttentiveEncoder

__all__ = [
    "RepulsiveGATConv",
    "RepulsiveGATv2Conv",
    "GraphTransformerLayer",
    "GraphTransformerEncoder",
    "RepulsiveMultiheadAttention",
    "SelfAttentiveEncoder",
    "record_attention",
    "convert",
    "register_conversion",
]
