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
  ``csr_cache`` while the tensor lives unchanged. Use it for full-batch training on large graphs on CPU.
* Bad input (feature size, ``edge_index`` shape or range, ``edge_attr`` size) raises a ``ValueError`` naming the
  argument. The data-dependent range check is skipped under ``torch.compile``, so compiled layers have no graph
  break (with ``add_self_loops=False``).

:func:`graph_rma.convert` swaps every stock ``GATConv`` / ``GATv2Conv`` of a model (e.g.
``torch_geometric.nn.models.GAT``, also with ``v2=True``) for these, keeping weights, device, dtype and mode.
"""

from __future__ import annotations

import copy
import inspect
import warnings
from typing import Any, Dict, Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.nn.conv import GATConv, GATv2Conv
from torch_geometric.nn.resolver import aggregation_resolver as aggr_resolver
from torch_geometric.typing import Adj, OptTensor, Size, SparseTensor
from torch_geometric.utils import is_torch_sparse_tensor, softmax

from .._deprecation import warn_renamed
from ..dropattention import DropAttention
from .lean import CSRCache, check_lean, gat_forward, gatv2_forward

__all__ = ["RepulsiveGATConv", "RepulsiveGATv2Conv"]


# ----------------------------------------------------------------------------------------------------------------
# Input checks (cheap; the data-dependent range check only runs eagerly)
# ----------------------------------------------------------------------------------------------------------------
def _channels(lin: Optional[torch.nn.Module]) -> int:
    return int(getattr(lin, "in_channels", -1)) if lin is not None else -1


def _check_features(name: str, x: Tensor, expected: int) -> None:
    if not isinstance(x, Tensor) or x.dim() != 2:
        desc = f"shape {list(x.shape)}" if isinstance(x, Tensor) else type(x).__name__
        raise ValueError(
            f"{name}: expected node features of shape [num_nodes, {expected if expected > 0 else 'F'}], got {desc}"
        )
    if expected > 0 and x.size(1) != expected:
        raise ValueError(f"{name}: expected {expected} features per node (in_channels), got {x.size(1)}")


def _check_dtype(name: str, x: Tensor, lin: Optional[torch.nn.Module]) -> None:
    """Features of another floating dtype than the layer's weights (outside autocast): one line naming ``x``."""
    weight = getattr(lin, "weight", None)
    if (
        isinstance(weight, Tensor)
        and not isinstance(weight, torch.nn.parameter.UninitializedParameter)
        and x.is_floating_point()
        and x.dtype != weight.dtype
        and not torch.is_autocast_enabled(x.device.type)
    ):
        raise ValueError(
            f"{name}: expected dtype {weight.dtype} (the layer's parameters), got {x.dtype}; convert the "
            f"input or the layer (.to(dtype))"
        )


def _check_inputs(
    module: Union[GATConv, GATv2Conv],
    x: Any,
    edge_index: Any,
    edge_attr: Optional[Tensor],
    size: Size,
    lin_src: Optional[torch.nn.Module],
    lin_dst: Optional[torch.nn.Module],
) -> None:
    # Node features.
    if isinstance(x, Tensor):
        _check_features("x", x, _channels(lin_src))
        _check_features("x", x, _channels(lin_dst))
        _check_dtype("x", x, lin_src)
        num_src = num_dst = x.size(0)
    elif isinstance(x, (tuple, list)) and len(x) == 2:
        _check_features("x[0]", x[0], _channels(lin_src))
        _check_dtype("x[0]", x[0], lin_src)
        num_src = x[0].size(0)
        num_dst = None  # (x_src, None): as in the stock layer, the destinations' count comes from size / adjacency
        if x[1] is not None:
            _check_features("x[1]", x[1], _channels(lin_dst))
            _check_dtype("x[1]", x[1], lin_dst)
            num_dst = x[1].size(0)
    else:
        raise ValueError(
            f"x: expected a tensor [num_nodes, in_channels] or a pair (x_src, x_dst), got {type(x).__name__}"
        )
    if size is not None:
        num_src, num_dst = size[0] if size[0] is not None else num_src, size[1] if size[1] is not None else num_dst
    sparse = isinstance(edge_index, SparseTensor) or (
        isinstance(edge_index, Tensor) and is_torch_sparse_tensor(edge_index)
    )
    if num_dst is None and not sparse:  # as MessagePassing: an unknown destination count is the source count
        num_dst = num_src
    if module.flow == "target_to_source":
        num_src, num_dst = num_dst, num_src

    # Adjacency.
    num_edges: Optional[int] = None
    if isinstance(edge_index, SparseTensor):
        pass
    elif isinstance(edge_index, Tensor) and is_torch_sparse_tensor(edge_index):
        # [num_dst, num_src] (destinations x sources); an unknown count is read from the adjacency.
        expected = (
            edge_index.size(0) if num_dst is None else num_dst,
            edge_index.size(1) if num_src is None or edge_index.dim() != 2 else num_src,
        )
        if edge_index.dim() != 2 or tuple(edge_index.shape) != expected:
            raise ValueError(
                f"edge_index: expected a sparse adjacency of shape [{expected[0]}, {expected[1]}] "
                f"(destinations x sources), got {list(edge_index.shape)}"
            )
    elif isinstance(edge_index, Tensor):
        if (
            edge_index.dim() != 2
            or edge_index.size(0) != 2
            or edge_index.is_floating_point()
            or edge_index.dtype == torch.bool
        ):
            raise ValueError(
                f"edge_index: expected an integer tensor of shape [2, num_edges], got "
                f"{edge_index.dtype} tensor of shape {list(edge_index.shape)}"
            )
        num_edges = edge_index.size(1)
        if torch.compiler.is_compiling() and num_edges > 0:
            # inside a compiled graph a Python check would break it: an assert op checks the range instead (its
            # message, one line, is raised as a RuntimeError before any out-of-range gather runs)
            i, j = (1, 0) if module.flow == "source_to_target" else (0, 1)
            ok = edge_index.min() >= 0
            if num_src is not None:
                ok = ok & (edge_index[j].max() < num_src)
            if num_dst is not None:
                ok = ok & (edge_index[i].max() < num_dst)
            torch._assert_async(
                ok, "edge_index: node ids out of range: expected sources and destinations in [0, the node counts of x)"
            )
        elif num_edges > 0:
            i, j = (1, 0) if module.flow == "source_to_target" else (0, 1)
            lo = int(edge_index.min())
            src_max, dst_max = int(edge_index[j].max()), int(edge_index[i].max())
            if lo < 0 or (num_src is not None and src_max >= num_src) or (num_dst is not None and dst_max >= num_dst):
                raise ValueError(
                    f"edge_index: expected sources in [0, {num_src}) and destinations in [0, {num_dst}) "
                    f"(the node counts of x), got min {lo}, max source {src_max}, max destination {dst_max}"
                )
    else:
        raise ValueError(
            f"edge_index: expected a [2, num_edges] tensor, a torch sparse tensor or a SparseTensor, got "
            f"{type(edge_index).__name__}"
        )

    # Edge features.
    if edge_attr is not None and module.lin_edge is not None:
        if not isinstance(edge_attr, Tensor) or edge_attr.dim() not in (1, 2):
            raise ValueError(f"edge_attr: expected a tensor of shape [num_edges, {module.edge_dim}]")
        dim = 1 if edge_attr.dim() == 1 else edge_attr.size(1)
        if module.edge_dim is not None and dim != module.edge_dim:
            raise ValueError(f"edge_attr: expected {module.edge_dim} features per edge (edge_dim), got {dim}")
        if num_edges is not None and edge_attr.size(0) != num_edges:
            raise ValueError(
                f"edge_attr: expected {num_edges} rows (one per edge of edge_index), got {edge_attr.size(0)}"
            )


def _check_heads(heads: Any, out_channels: Any) -> None:
    if isinstance(heads, bool) or not isinstance(heads, int) or heads < 1:
        raise ValueError(f"heads: expected a positive integer, got {heads!r}")
    if isinstance(out_channels, bool) or not isinstance(out_channels, int) or out_channels < 1:
        raise ValueError(f"out_channels: expected a positive integer, got {out_channels!r}")


def _check_drop_attention(drop_attention: Any) -> Optional[DropAttention]:
    if drop_attention is not None and not isinstance(drop_attention, DropAttention):
        raise ValueError(
            f"drop_attention: expected a graph_rma.DropAttention or None, got {type(drop_attention).__name__}"
        )
    return drop_attention


def _message_passing_kwargs(conv: torch.nn.Module) -> Dict[str, Any]:
    """The ``MessagePassing`` options of an existing layer (aggregation, flow, decomposition)."""
    aggr: Any = copy.deepcopy(conv.aggr_module)
    if isinstance(conv.aggr, str) and not any(True for _ in conv.aggr_module.state_dict()):
        try:  # a plain named aggregation ('add', 'mean', ...): pass the name, as the user did
            if type(aggr_resolver(conv.aggr)) is type(conv.aggr_module):
                aggr = conv.aggr
        except Exception:  # e.g. the name of an aggregation module given as an object
            pass
    return dict(aggr=aggr, flow=conv.flow, decomposed_layers=conv.decomposed_layers)


def _conversion_options(options: Dict[str, Any], dropout: float) -> Optional[DropAttention]:
    """The ``drop_attention`` option of :func:`graph_rma.convert` for a layer whose attention dropout is ``dropout``.

    ``DropAttention()`` without ``p`` keeps the layer's rate. An explicit ``p`` different from a non-zero layer
    dropout replaces it, with a warning naming both rates (the layer's ``attention_dropout_rate`` then reads
    ``p``).
    """
    unknown = sorted(set(options) - {"drop_attention"})
    if unknown:
        raise ValueError(f"options: unknown option(s) {unknown} for the GAT layers; expected 'drop_attention'")
    drop = _check_drop_attention(options.get("drop_attention"))
    if drop is not None and drop.p is not None and dropout > 0 and drop.p != dropout:
        warnings.warn(
            f"convert: DropAttention(p={drop.p:g}) replaces the layer's attention dropout {dropout:g} "
            f"(rate in effect: {drop.p:g}); pass DropAttention() without p to keep {dropout:g}",
            UserWarning,
        )
    return copy.deepcopy(drop)


def _stock_arguments(conv: torch.nn.Module, stock: type) -> Dict[str, Any]:
    """Every named argument of ``stock.__init__`` read back from ``conv`` (same-named attributes), so that a
    newer torch-geometric's extra arguments are carried over too. Raises if one cannot be read back."""
    special = {
        "bias": lambda c: c.bias is not None,
        "in_channels": lambda c: c.in_channels,
        "out_channels": lambda c: c.out_channels,
    }
    args: Dict[str, Any] = {}
    for name, param in inspect.signature(stock.__init__).parameters.items():
        if name == "self" or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if name in special:
            args[name] = special[name](conv)
        elif hasattr(conv, name):
            args[name] = getattr(conv, name)
        elif param.default is not inspect.Parameter.empty:
            warnings.warn(
                f"convert: {stock.__name__} argument {name!r} cannot be read back from the layer; the "
                f"converted layer uses its default {param.default!r}"
            )
        else:
            raise ValueError(f"conv: cannot read the {stock.__name__} argument {name!r} back from the layer")
    return args


# ----------------------------------------------------------------------------------------------------------------
# Layers
# ----------------------------------------------------------------------------------------------------------------
class _RepulsiveGATMixin:
    """What :class:`RepulsiveGATConv` and :class:`RepulsiveGATv2Conv` share (``_stock``: the PyG class)."""

    _stock: type
    accepts_drop_attention = True  # graph_rma.variants.apply_variant installs DropAttention here

    def _init_extras(self, drop_attention: Optional[DropAttention], lean: bool) -> None:
        self.drop_attention = _check_drop_attention(drop_attention)
        self.lean = check_lean(self, lean)
        self.csr_cache = CSRCache()

    @classmethod
    def from_stock(cls, conv: torch.nn.Module, **options):
        """A new layer with ``conv``'s constructor arguments (weights are copied by :func:`graph_rma.convert`)."""
        return cls(
            **_stock_arguments(conv, cls._stock),
            drop_attention=_conversion_options(options, conv.dropout),
            **_message_passing_kwargs(conv),
        )

    def reset_cache(self) -> None:
        """Drop the CSRs the lean path keeps (:attr:`csr_cache`)."""
        self.csr_cache.clear()

    @property
    def layout_cache(self) -> CSRCache:
        """Deprecated name of :attr:`csr_cache` (one release)."""
        warn_renamed(f"{type(self).__name__}.layout_cache", f"{type(self).__name__}.csr_cache")
        return self.csr_cache

    @layout_cache.setter
    def layout_cache(self, cache: CSRCache) -> None:
        warn_renamed(f"{type(self).__name__}.layout_cache", f"{type(self).__name__}.csr_cache")
        self.csr_cache = cache

    def __setstate__(self, state: Dict[str, Any]) -> None:
        if "layout_cache" in state:  # a layer pickled before the rename
            state["csr_cache"] = state.pop("layout_cache")
        super().__setstate__(state)

    @property
    def attention_dropout_rate(self) -> float:
        """The attention drop rate in effect: DropAttention's ``p``, or ``dropout`` (plain dropout, or a
        ``DropAttention()`` without ``p``, which takes the layer's rate)."""
        drop = self.drop_attention
        return float(drop.p) if drop is not None and drop.p is not None else float(self.dropout)

    def _softmax_and_drop(
        self, logits: Tensor, src: Tensor, dst: Tensor, ptr: OptTensor, num_src: Optional[int], num_dst: Optional[int]
    ) -> Tensor:
        """Edge softmax, then plain attention dropout (stock behaviour) or DropAttention, on ``[E, H]`` logits."""
        drop = self.drop_attention
        if drop is None:
            alpha = softmax(logits, dst, ptr, num_dst)
            return F.dropout(alpha, p=self.dropout, training=self.training)
        n_dst = num_dst if num_dst is not None else int(dst.max()) + 1
        n_src = num_src if num_src is not None else n_dst
        return drop.sparse_softmax(logits, src, dst, n_src, n_dst, ptr, layer_rate=self.dropout)

    def __repr__(self) -> str:
        extra = f", drop_attention={self.drop_attention!r}" if self.drop_attention is not None else ""
        if self.drop_attention is not None and self.drop_attention.p is None:  # the rate it takes from the layer
            extra += f", attention_dropout_rate={self.attention_dropout_rate:g}"
        extra += ", lean=True" if self.lean else ""
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, heads={self.heads}{extra})"


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
            random draws; for full-batch training on large graphs). Needs a ``[2, E]`` or torch sparse
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
        lean (bool, optional): The memory-lean path of :mod:`graph_rma.nn.lean` (GATv2's score stays chunked);
            see :class:`RepulsiveGATConv`. (default: ``False``)
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
            raise ValueError(
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
