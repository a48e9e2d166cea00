"""The memory-bandwidth bound of one training step of an attention layer: the bytes that any implementation must
move between the card's memory and its cores, divided by the card's bandwidth. A step cannot take less time (its
arithmetic is far below the card's compute); a fused kernel aims at a small multiple of it.

Bytes of one step (forward + backward) of one layer with ``H`` heads x ``C`` channels, ``F`` input features, ``N``
nodes, ``E`` edges (self-loops included), feature bytes ``s`` (4 for float32, 2 for bfloat16), scores and
log-sum-exps in float32 (4 bytes), a 4-byte source index per edge:

* per edge, three passes over the edges (the forward pass over the destinations' incoming edges; in backward the
  probabilities recomputed over the same edges, and the sources' sums over the reversed ones), each reading the
  edge's index, one node row of ``H * C`` features and ``H`` scores: ``3 * (4 + H*C*s + 4*H)`` bytes;
* per node: reading ``x`` and writing its gradient (``2 * F * s``), the projected features written, read back and
  their gradient written (``3 * H*C*s``; GATv2 has two projections: ``6 * H*C*s``), the output and its gradient
  (``2 * H*C*s``), and four float32 values per head (the two scores, the log-sum-exp and the backward's row sum:
  ``16 * H``).

Nothing else is counted (no attention weights, no dropout mask: a fused kernel regenerates both), so the bound holds
for every contender. The card's bandwidth is measured by the suite (a device-to-device copy of 1 GiB); for runs
recorded before the suite measured it, the card's nominal bandwidth from :data:`NOMINAL_GB_PER_S` (the vendor's
figure, marked as such where used).
"""

from __future__ import annotations

from typing import Optional

#: Vendors' nominal memory bandwidth (GB/s) of the cards the lent machines have had, by the name torch reports.
NOMINAL_GB_PER_S = {
    "NVIDIA H100 80GB HBM3": 3350.0,
    "NVIDIA H200": 4800.0,
    "NVIDIA A100-SXM4-80GB": 2039.0,
}

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


def step_bytes(layer: str, edges: int, nodes: int, heads: int, channels: int, features: int, dtype: str) -> int:
    """The bytes one training step must move (see the module's docstring)."""
    s, hc = DTYPE_BYTES[dtype], heads * channels
    per_edge = 3 * (4 + hc * s + 4 * heads)
    projections = 6 if layer == "gatv2" else 3
    per_node = 2 * features * s + projections * hc * s + 2 * hc * s + 16 * heads
    return edges * per_edge + nodes * per_node


def bound_ms(step: int, gb_per_s: Optional[float]) -> Optional[float]:
    """Milliseconds to move ``step`` bytes at ``gb_per_s`` (``None`` without a bandwidth)."""
    return None if not gb_per_s else 1e3 * step / (gb_per_s * 1e9)
