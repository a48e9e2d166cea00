"""Layers: drop-in repulsive versions of PyG and torch attention layers, and GraphWriter's encoder block."""
from torch import nn as _tnn
from torch_geometric.nn.conv import GATConv, GATv2Conv

from ..convert import register_conversion
from .gat_conv import RepulsiveGATConv, RepulsiveGATv2Conv
from .graph_transformer import GraphTransformerEncoder, GraphTransformerLayer
from .multihead_attention import RepulsiveMultiheadAttention, record_attention
from .self_attentive import SelfAttentiveEncoder

register_conversion(GATConv, RepulsiveGATConv.from_stock)
register_conversion(GATv2Conv, RepulsiveGATv2Conv.from_stock)
register_conversion(_tnn.MultiheadAttention, RepulsiveMultiheadAttention.from_stock)

__all__ = ["RepulsiveGATConv", "RepulsiveGATv2Conv", "GraphTransformerLayer", "GraphTransformerEncoder",
           "RepulsiveMultiheadAttention", "SelfAttentiveEncoder", "record_attention"]
