"""Layers: drop-in repulsive versions of PyG and torch attention layers, and GraphWriter's encoder block."""
from torch import nn as _tnn

from ..convert import register_conversion
from .multihead_attention import RepulsiveMultiheadAttention, record_attention
from .self_attentive import SelfAttentiveEncoder

register_conversion(_tnn.MultiheadAttention, RepulsiveMultiheadAttention.from_stock)

__all__ = ["RepulsiveMultiheadAttention", "SelfAttentiveEncoder", "record_attention"]
