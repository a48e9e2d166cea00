r"""Drop-in repulsive versions of PyG's ``GATConv`` and ``GATv2Conv``.

:class:`RepulsiveGATConv` computes exactly what :class:`torch_geometric.nn.conv.GATConv` computes (GAT, Velickovic
et al. 2018):

.. math::
    \mathbf{x}'_i = \sum_{j \in \mathcal{N}(i) \cup \{i\}} \alpha_{ij} \mathbf{\Theta}_s \mathbf{x}_j, \qquad
    \alpha_{ij} = \operatorname{softmax}_j\left(\mathrm{LeakyReLU}\left(\mathbf{a}_s^\top \mathbf{\Theta}_s
        \mathbf{x}_j + \mathbf{a}_t^\top \mathbf{\Theta}_t \mathbf{x}_i
        + \mathbf{a}_e^\top \mathbf{\Theta}_e \mathbf{e}_{ij}\right)\right),

per head, and :class:`RepulsiveGATv2Conv` what ``GATv2Conv`` computes (Brody et al. 2022,
:math:`\alpha_{ij} = \operatorname{softmax}_j(\mathbf{a}^\top \mathrm{LeakyReLU}(\mathbf{\Theta}_s \mathbf{x}_j
+ \mathbf{\Theta}_t \mathbf{x}_i + \mathbf{\Theta}_e \mathbf{e}_{ij}))`). They subclass the stock layers: the same
constructor arguments, forward signature, return values and ``state_dict``, and, with the extra options off,
bit-identical outputs. What they add:

* Each head is one particle for :class:`graph_rma.SVGD` / :class:`graph_rma.SPOS`: head :math:`h` owns rows
  ``h*C:(h+1)*C`` of every projection weight and ``att_*[0, h]`` (the stock head layouts apply through
  inheritance; stock layers work with the samplers too).
* ``drop_attention=DropAttention(p, ...)`` replaces the plain attention dropout (``dropout`` is then not applied
  to the attention weights); ``DropAttention()`` without ``p`` drops at the layer's own ``dropout`` rate.
  ``attention_dropout_rate`` (also in the ``repr`` when ``p`` is taken from the layer) reports the rate in
  effect. :func:`graph_rma.convert` with ``drop_attention=DropAttention(p)`` whose ``p`` differs from the layer's
  non-zero ``dropout`` warns, naming both rates; ``p`` is then in effect. With ``rescale="normalized"`` the layer
  takes the edge softmax over the surviving edges only, which equals dropping and renormalising the softmax weights
  but stays finite when the survivors' weights underflow. The weights returned with ``return_attention_weights``
  and seen by PyG's ``AttentionExplainer`` are, as in the stock layer, the ones used for aggregation: **after**
  DropAttention (or after plain dropout); in ``eval()`` mode they are the softmax weights.
* ``lean=True`` computes the attention with :mod:`graph_rma.nn.lean`: no ``[E, heads, out_channels]`` tensor is
  kept for backward (GAT: per edge only the CSR of the edges and the dropout mask; the weights are
  recomputed in backward), and on CPU the products are sparse-dense kernels; same outputs (to float rounding),
  parameters, ``state_dict`` and dropout / DropAttention draws (CPU). Memory and time against the stock layer are
  measured in benchmarks/README.md. The CSR of an edge index is built once and kept in the layer's
  ``csr_cache`` while the tensor lives unchanged. Use it for full-batch training on large graphs on CPU. On CUDA
  tensors, with Triton installed, it runs fused Triton kernels (:mod:`graph_rma.nn.lean.fused`: scores, softmax,
  dropout and aggregation in one pass per destination; per edge nothing is kept but the CSR, the dropout masks are
  drawn in the kernel from a seed; returned attention weights come from a separate kernel), else the chunked path;
  ``GRAPH_RMA_LEAN=fused|chunked|csr`` forces one (:mod:`graph_rma.nn.lean.strategy`).
* Bad input (feature size, ``edge_index`` shape or range, ``edge_attr`` size) raises a ``GraphRMAError`` naming the
  argument. The data-dependent range check is skipped under ``torch.compile``, so compiled layers have no graph
  break (with ``add_self_loops=False``).

:func:`graph_rma.convert` swaps every stock ``GATConv`` / ``GATv2Conv`` of a model (e.g.
``torch_geometric.nn.models.GAT``, also with ``v2=True``) for these, keeping weights, device, dtype and mode.
"""

from __future__ import annotations

from typing import Optional, Tuple, Union

import torch.nn.functional as F
from torch import Tensor
from torch_geometric.nn.conv import GATConv, GATv2Conv
from torch_geometric.typing import Adj, OptTensor, Size

from .._errors import GraphRMAError
from ..dropattention import DropAttention
from ._gat_checks import _check_heads, _check_inputs
from ._gat_mixin import _RepulsiveGATMixin
from .lean import gat_forward, gatv2_forward

__all__ = ["RepulsiveGATConv", "RepulsiveGATv2Conv"]


class RepulsiveGATConv(_RepulsiveGATMixin, GATConv):
    r"""PyG's :class:`~torch_geometric.nn.conv.GATConv` with DropAttention, particle heads and a memory-lean path
    (see the module docs): the same constructor arguments, forward, return values and ``state_dict``.

    Args:
        in_channels (int or tuple): Size of each input sample, or ``-1`` to derive the size from the first input(s)
            to the forward method. A tuple gives the sizes of the source and target dimensionalities.
        out_channels (int): Size of each output sample, per head.
        heads (int, optional): Number of attention heads; each is one particle for the samplers. (default: ``1``)
        concat (bool, optional): If ``False``, the heads' outputs are averaged instead of concatenated.
            (default: ``True``)
        negative_slope (float, optional): LeakyReLU angle of the negative slope. (default: ``0.2``)
        dropout (float, optional): Dropout probability of the normalised attention coefficients (each node sees a
            stochastically sampled neighbourhood during training); also the rate of a ``DropAttention()`` given
            without ``p``. (default: ``0``)
        add_self_loops (bool, optional): If ``False``, no self-loops are added to the input graph.
            (default: ``True``)
        edge_dim (int, optional): Edge feature dimensionality (in case there are any). (default: ``None``)
        fill_value (float or torch.Tensor or str, optional): How the edge features of the added self-loops are
            made (in case ``edge_dim != None``): a value, or the aggregation of the incoming edges' features
            (``"add"``, ``"mean"``, ``"min"``, ``"max"``, ``"mul"``). (default: ``"mean"``)
        bias (bool, optional): If ``False``, the layer learns no additive bias. (default: ``True``)
        residual (bool, optional): If ``True``, the layer adds a learnable skip-connection. (default: ``False``)
        drop_attention (graph_rma.DropAttention, optional): DropAttention applied to the normalised attention
            coefficients (sparse, per head) in place of the plain attention ``dropout``; ``None`` keeps the stock
            behaviour. (default: ``None``)
        lean (bool, optional): Compute the attention with :mod:`graph_rma.nn.lean`, which keeps no
            ``[E, heads, out_channels]`` tensor for backward (same outputs to float rounding, parameters and
            random draws on CPU; for full-batch training on large graphs): CSR kernels on CPU, fused Triton
            kernels on CUDA (:mod:`graph_rma.nn.lean.fused`; dropout masks drawn in the kernel, same distribution),
            ``GRAPH_RMA_LEAN=fused|chunked|csr`` to force one. Needs a ``[2, E]`` or torch sparse
            ``edge_index`` and the default ``aggr="add"``. (default: ``False``)
        **kwargs (optional): Additional arguments of :class:`torch_geometric.nn.conv.MessagePassing`.

    Attributes:
        csr_cache (graph_rma.nn.lean.CSRCache): With ``lean=True`` on CPU, the CSRs of the edge indexes this
            layer has seen, built once and kept while each edge index lives and holds the same values: every call
            compares the edge index with an exact copy kept beside its CSR, so a CSR of other edges is never used.
            Assign one cache to several layers (:func:`graph_rma.nn.lean.share_csr_cache`) to build and keep one
            CSR for all of them; :meth:`reset_cache` empties it. A copied or pickled layer
            starts with an empty cache.

    Shapes:
        - **input:** node features :math:`(|\mathcal{V}|, F_{in})` or
          :math:`((|\mathcal{V_s}|, F_{s}), (|\mathcal{V_t}|, F_{t}))` if bipartite, edge indices
          :math:`(2, |\mathcal{E}|)` or a torch sparse adjacency :math:`(|\mathcal{V_t}|, |\mathcal{V_s}|)`, edge
          features :math:`(|\mathcal{E}|, D)` *(optional)*
        - **output:** node features :math:`(|\mathcal{V}|, H * F_{out})` or :math:`(|\mathcal{V}_t|, H * F_{out})`
          if bipartite (:math:`F_{out}` with ``concat=False``). With ``return_attention_weights=True`` also
          ``(edge_index, alpha)``: the edge indices with self-loops and :math:`\alpha` of shape
          :math:`(|\mathcal{E}|, H)`, taken after DropAttention / dropout (the softmax weights in ``eval()``).
    """

    _stock = GATConv

    def __init__(
        self,
        in_channels: Union[int, Tuple[int, int]],
        out_channels: int,
        heads: int = 1,
        concat: bool = True,
        negative_slope: float = 0.2,
        dropout: float = 0.0,
        add_self_loops: bool = True,
        edge_dim: Optional[int] = None,
        fill_value: Union[float, Tensor, str] = "mean",
        bias: bool = True,
        residual: bool = False,
        drop_attention: Optional[DropAttention] = None,
        lean: bool = False,
        **kwargs,
    ) -> None:
        _check_heads(heads, out_channels)
        super().__init__(
            in_channels,
            out_channels,
            heads=heads,
            concat=concat,
            negative_slope=negative_slope,
            dropout=dropout,
            add_self_loops=add_self_loops,
            edge_dim=edge_dim,
            fill_value=fill_value,
            bias=bias,
            residual=residual,
            **kwargs,
        )
        self._init_extras(drop_attention, lean)

    def forward(  # type: ignore[override]
        self,
        x: Union[Tensor, Tuple[Tensor, Optional[Tensor]]],
        edge_index: Adj,
        edge_attr: OptTensor = None,
        size: Size = None,
        return_attention_weights: Optional[bool] = None,
    ):
        _check_inputs(
            self,
            x,
            edge_index,
            edge_attr,
            size,
            self.lin if self.lin is not None else self.lin_src,
            self.lin if self.lin is not None else self.lin_dst,
        )
        if self.lean:
            return gat_forward(self, x, edge_index, edge_attr, size, return_attention_weights)
        return super().forward(
            x, edge_index, edge_attr=edge_attr, size=size, return_attention_weights=return_attention_weights
        )

    def edge_update(
        self,
        alpha_j: Tensor,
        alpha_i: OptTensor,
        edge_attr: OptTensor,
        index: Tensor,
        ptr: OptTensor,
        dim_size: Optional[int],
        edge_index_j: Tensor,
        size_j: Optional[int],
    ) -> Tensor:
        alpha = alpha_j if alpha_i is None else alpha_j + alpha_i
        if index.numel() == 0:
            return alpha
        if edge_attr is not None and self.lin_edge is not None:
            if edge_attr.dim() == 1:
                edge_attr = edge_attr.view(-1, 1)
            edge_attr = self.lin_edge(edge_attr).view(-1, self.heads, self.out_channels)
            alpha = alpha + (edge_attr * self.att_edge).sum(dim=-1)
        alpha = F.leaky_relu(alpha, self.negative_slope)
        return self._softmax_and_drop(alpha, edge_index_j, index, ptr, size_j, dim_size)


class RepulsiveGATv2Conv(_RepulsiveGATMixin, GATv2Conv):
    r"""PyG's :class:`~torch_geometric.nn.conv.GATv2Conv` with DropAttention, particle heads and a memory-lean path
    (see the module docs): the same constructor arguments, forward, return values and ``state_dict``.

    Args:
        in_channels (int or tuple): As in :class:`RepulsiveGATConv`.
        out_channels (int): Size of each output sample, per head.
        heads (int, optional): Number of attention heads (particles). (default: ``1``)
        concat (bool, optional): Concatenate the heads' outputs, else average them. (default: ``True``)
        negative_slope (float, optional): LeakyReLU angle of the negative slope. (default: ``0.2``)
        dropout (float, optional): Attention dropout probability (DropAttention's rate when it has no ``p``).
            (default: ``0``)
        add_self_loops (bool, optional): Add self-loops to the input graph. (default: ``True``)
        edge_dim (int, optional): Edge feature dimensionality. (default: ``None``)
        fill_value (float or torch.Tensor or str, optional): Edge features of the added self-loops, as in
            :class:`RepulsiveGATConv`. (default: ``"mean"``)
        bias (bool, optional): Learn an additive bias. (default: ``True``)
        share_weights (bool, optional): If ``True``, the same matrix is applied to the source and the target node
            of every edge. (default: ``False``)
        residual (bool, optional): Add a learnable skip-connection. (default: ``False``)
        drop_attention (graph_rma.DropAttention, optional): Replaces the plain attention ``dropout``.
            (default: ``None``)
        lean (bool, optional): The memory-lean path of :mod:`graph_rma.nn.lean` (GATv2's score is chunked on
            CPU, fused on CUDA); see :class:`RepulsiveGATConv`. (default: ``False``)
        **kwargs (optional): Additional arguments of :class:`torch_geometric.nn.conv.MessagePassing`.

    Attributes:
        csr_cache (graph_rma.nn.lean.CSRCache): The lean path's CSRs, as in :class:`RepulsiveGATConv`.

    Shapes:
        - **input:** node features :math:`(|\mathcal{V}|, F_{in})` or
          :math:`((|\mathcal{V_s}|, F_{s}), (|\mathcal{V_t}|, F_{t}))` if bipartite (both given), edge indices
          :math:`(2, |\mathcal{E}|)` or a torch sparse adjacency, edge features :math:`(|\mathcal{E}|, D)`
          *(optional)*
        - **output:** node features :math:`(|\mathcal{V}_t|, H * F_{out})` (:math:`F_{out}` with
          ``concat=False``); with ``return_attention_weights=True`` also ``(edge_index, alpha)``,
          :math:`\alpha` of shape :math:`(|\mathcal{E}|, H)` after DropAttention / dropout.
    """

    _stock = GATv2Conv

    def __init__(
        self,
        in_channels: Union[int, Tuple[int, int]],
        out_channels: int,
        heads: int = 1,
        concat: bool = True,
        negative_slope: float = 0.2,
        dropout: float = 0.0,
        add_self_loops: bool = True,
        edge_dim: Optional[int] = None,
        fill_value: Union[float, Tensor, str] = "mean",
        bias: bool = True,
        share_weights: bool = False,
        residual: bool = False,
        drop_attention: Optional[DropAttention] = None,
        lean: bool = False,
        **kwargs,
    ) -> None:
        _check_heads(heads, out_channels)
        super().__init__(
            in_channels,
            out_channels,
            heads=heads,
            concat=concat,
            negative_slope=negative_slope,
            dropout=dropout,
            add_self_loops=add_self_loops,
            edge_dim=edge_dim,
            fill_value=fill_value,
            bias=bias,
            share_weights=share_weights,
            residual=residual,
            **kwargs,
        )
        self._init_extras(drop_attention, lean)

    def forward(  # type: ignore[override]
        self,
        x: Union[Tensor, Tuple[Tensor, Tensor]],
        edge_index: Adj,
        edge_attr: OptTensor = None,
        return_attention_weights: Optional[bool] = None,
    ):
        if edge_attr is not None and self.lin_edge is None:
            raise GraphRMAError(
                "edge_attr: this layer has no edge features (edge_dim=None); pass edge_attr=None or "
                "build it with edge_dim"
            )
        _check_inputs(self, x, edge_index, edge_attr, None, self.lin_l, self.lin_r)
        if self.lean:
            return gatv2_forward(self, x, edge_index, edge_attr, return_attention_weights)
        return super().forward(x, edge_index, edge_attr=edge_attr, return_attention_weights=return_attention_weights)

    def edge_update(
        self,
        x_j: Tensor,
        x_i: Tensor,
        edge_attr: OptTensor,
        index: Tensor,
        ptr: OptTensor,
        dim_size: Optional[int],
        edge_index_j: Tensor,
        size_j: Optional[int],
    ) -> Tensor:
        x = x_i + x_j
        if edge_attr is not None:
            if edge_attr.dim() == 1:
                edge_attr = edge_attr.view(-1, 1)
            assert self.lin_edge is not None
            x = x + self.lin_edge(edge_attr).view(-1, self.heads, self.out_channels)
        x = F.leaky_relu(x, self.negative_slope)
        alpha = (x * self.att).sum(dim=-1)
        return self._softmax_and_drop(alpha, edge_index_j, index, ptr, size_j, dim_size)
