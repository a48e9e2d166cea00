"""Argument checks shared by the node models' constructors (one line naming the argument)."""
from __future__ import annotations


def check_stack(in_channels, out_channels, hidden, heads, layers, dropout, attn_dropout) -> None:
    """Sizes are positive integers, ``hidden`` splits over the heads, the dropouts are probabilities."""
    for name, value in (("in_channels", in_channels), ("out_channels", out_channels), ("hidden", hidden),
                        ("heads", heads), ("layers", layers)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: expected a positive integer, got {value!r}")
    if hidden % heads:
        raise ValueError(f"hidden: expected a multiple of heads ({heads}), got {hidden}")
    for name, value in (("dropout", dropout), ("attn_dropout", attn_dropout)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
            raise ValueError(f"{name}: expected a probability in [0, 1), got {value!r}")
