"""Former home of the memory-lean edge attention, now :mod:`graph_rma.nn.lean`: its public names, re-exported.

``CHUNK_BYTES`` and ``MAX_CHUNKS`` here are copies of the defaults; to change the chunk size, set
``graph_rma.nn.lean.chunked.CHUNK_BYTES``.
"""

from .lean import (
    CHUNK_BYTES,
    MAX_CHUNKS,
    attention_softmax,
    check_lean,
    dropout_mask,
    edge_aggregate,
    edge_dot,
    edge_softmax,
    gat_attention,
    gat_forward,
    gat_scores,
    gatv2_forward,
    gatv2_scores,
    softmax_aggregate,
)

__all__ = [
    "CHUNK_BYTES",
    "MAX_CHUNKS",
    "edge_aggregate",
    "edge_softmax",
    "gat_scores",
    "gatv2_scores",
    "edge_dot",
    "softmax_aggregate",
    "gat_attention",
    "gat_forward",
    "gatv2_forward",
    "check_lean",
    "attention_softmax",
    "dropout_mask",
]
