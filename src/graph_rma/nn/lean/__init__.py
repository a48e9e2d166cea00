r"""Memory-lean edge attention: sparse attention layers that keep no ``[E, heads, channels]`` tensor for backward.

A sparse attention layer over edges :math:`e = (j \to i)` with :math:`H` heads of :math:`C` channels computes

.. math::
    s_{e,h} = \mathrm{score}_h(j, i, e), \qquad
    \alpha_{e,h} = \frac{\exp s_{e,h}}{\sum_{e' \to i} \exp s_{e',h}}, \qquad
    \tilde\alpha = \mathrm{drop}(\alpha), \qquad
    \mathbf{y}_{i,h} = \sum_{e = (j \to i)} \tilde\alpha_{e,h}\, \mathbf{x}_{j,h}.

Written with autograd ops (as PyG's ``MessagePassing`` does) the gathered features :math:`\mathbf{x}_{j,h}` and
the messages :math:`\tilde\alpha_{e,h} \mathbf{x}_{j,h}` are ``[E, H, C]`` tensors, and autograd keeps them (and
those of the score) until backward: about 1.5 KB per edge for 8 heads of 8 channels. Backward truly needs much
less. With :math:`\mathbf{g}_i = \partial L / \partial \mathbf{y}_i`:

.. math::
    \frac{\partial L}{\partial \tilde\alpha_{e,h}} = \langle \mathbf{g}_{i,h}, \mathbf{x}_{j,h} \rangle, \qquad
    \frac{\partial L}{\partial \mathbf{x}_{j,h}} = \sum_{e = (j \to i)} \tilde\alpha_{e,h}\, \mathbf{g}_{i,h}
    \qquad \text{(aggregation: } \tilde\alpha, \text{node features, edge index)},

.. math::
    \frac{\partial L}{\partial s_{e,h}} = \alpha_{e,h} \Big(\frac{\partial L}{\partial \alpha_{e,h}}
        - \sum_{e' \to i} \alpha_{e',h} \frac{\partial L}{\partial \alpha_{e',h}}\Big)
    \qquad \text{(edge softmax: its output } \alpha \text{ only)},

and the score's gradient is recomputed from node-level tensors. The autograd Functions here save only those:
``[E, H]`` weights, boolean dropout masks, the edge index or its CSR and node-level tensors. For GAT, whose
score (:mod:`~graph_rma.nn.lean.score`) is cheap to recompute from the node features, :func:`gat_attention` goes
further: with the softmax's log-normaliser per destination and head (``[N, H]``) saved, :math:`\alpha` is
recomputed in backward, and per edge only the dropout mask is kept.

One strategy per module:

* :mod:`~graph_rma.nn.lean.csr` -- the edges' CSR and its sparse-dense kernels;
  :mod:`~graph_rma.nn.lean.cache` -- :class:`CSRCache`, the CSRs a layer keeps.
* :mod:`~graph_rma.nn.lean.per_head` -- on CPU tensors of ``float32``/``float64`` outside :func:`torch.compile`
  (:func:`csr_supported`), one head at a time over the CSR: no ``[E, C]`` tensor at all.
* :mod:`~graph_rma.nn.lean.chunked` -- elsewhere (GPU, half precision, compiled graphs; GATv2's score always), a
  per-edge ``[E, H, C]`` product formed in chunks of edges (:data:`~graph_rma.nn.lean.chunked.CHUNK_BYTES`,
  :data:`~graph_rma.nn.lean.chunked.MAX_CHUNKS`) and dropped at once. Under :func:`torch.compile` the chunk loop
  is traced as one chunk.
* :mod:`~graph_rma.nn.lean.fused` -- on CUDA tensors when Triton can be imported: Triton kernels
  (:mod:`~graph_rma.nn.lean._triton_kernels`) that compute scores, softmax, dropout and aggregation in one pass
  per destination, keeping per edge nothing but the CSR (:func:`~graph_rma.nn.lean.fused.fused_attention`).
* :mod:`~graph_rma.nn.lean.strategy` -- which of them runs (:func:`lean_strategy`: the device, or the variable
  ``GRAPH_RMA_LEAN=fused|chunked|csr``).
* :mod:`~graph_rma.nn.lean.functions` -- the autograd Functions of the CSR and chunked paths, each choosing one of
  the two:
  :func:`edge_aggregate`, :func:`edge_softmax` (PyG's softmax saving only its output), :func:`gat_scores`,
  :func:`gatv2_scores`, :func:`edge_dot` (dot-product scores), :func:`softmax_aggregate` (softmax, dropout and
  aggregation as one node), :func:`gat_attention` (GAT scores, softmax, dropout and aggregation as one node).
* :mod:`~graph_rma.nn.lean.layers` -- :func:`gat_forward` / :func:`gatv2_forward`, the whole forward of
  ``GATConv`` / ``GATv2Conv`` on these, used by :class:`~graph_rma.nn.RepulsiveGATConv` and
  :class:`~graph_rma.nn.RepulsiveGATv2Conv` with ``lean=True``.

Outputs equal the stock layers' to float rounding (sums are taken in another order); the same parameters, the
same random draws (plain dropout and DropAttention draw their masks at the same point, on the same ``[E, H]``
shape; the fused kernels draw theirs in the kernel: the same distribution, not the same bits), the same returned
attention weights. Edges need no particular order.

Words: the edges' *CSR* (:class:`EdgeCSR`, kept by a :class:`CSRCache`) is not a *layout*, which in this package
means only which slices of a layer form each head (:mod:`graph_rma.particles.layouts`).
"""

from .cache import CSRCache, share_csr_cache
from .chunked import CHUNK_BYTES, MAX_CHUNKS
from .csr import EdgeCSR, csr_supported, edge_csr, sddmm, segment_max, segment_sum, spmm, spmm_t
from .functions import (
    dropped_weights,
    edge_aggregate,
    edge_dot,
    edge_softmax,
    gat_attention,
    gat_scores,
    gatv2_scores,
    softmax_aggregate,
)
from .layers import attention_softmax, cached_csr, check_lean, dropout_mask, gat_forward, gatv2_forward
from .strategy import lean_strategy

__all__ = [
    "CSRCache",
    "share_csr_cache",
    "EdgeCSR",
    "edge_csr",
    "csr_supported",
    "spmm",
    "spmm_t",
    "sddmm",
    "segment_max",
    "segment_sum",
    "CHUNK_BYTES",
    "MAX_CHUNKS",
    "edge_aggregate",
    "edge_softmax",
    "gat_scores",
    "gatv2_scores",
    "edge_dot",
    "softmax_aggregate",
    "gat_attention",
    "dropped_weights",
    "gat_forward",
    "gatv2_forward",
    "check_lean",
    "attention_softmax",
    "dropout_mask",
    "cached_csr",
    "lean_strategy",
]
