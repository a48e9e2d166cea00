r"""Capture (and optionally mask) the individual heads of an attention layer inside a model, through hooks.

:class:`HeadCapture` is a context manager around one layer; while it is open, every forward call of the layer
records

* ``outputs``: each head's output before heads are concatenated / averaged, shape ``[..., H, C]``;
* the attention: ``alpha`` ``[E, H]`` with its ``edge_index`` ``[2, E]`` (self-loops included, as the layer used
  them) for sparse graph attention, or ``attn`` ``[B, H, L, S]`` for dense attention;

and, with ``mask=[h, ...]``, removes the listed heads' contributions from the layer's output (Michel et al.,
2019: the head's output is multiplied by :math:`\xi_h = 0`).

Supported layers:

* PyG message-passing attention layers with a ``heads`` attribute and a ``return_attention_weights`` argument
  (``GATConv``, ``GATv2Conv``, ``TransformerConv`` and their subclasses). Head outputs are the ``[N, H, C]``
  result of ``propagate`` (read by a propagate forward hook); the attention is obtained by calling the layer with
  ``return_attention_weights=True`` (the hook strips it again so the model sees its usual output). Masking zeroes
  head :math:`h`'s ``[N, C]`` slice of the propagate result, i.e. its slice ``h*C:(h+1)*C`` of the concatenated
  output (bias and residual still added), or its term of the head mean for ``concat=False``.
* :class:`torch.nn.MultiheadAttention` (without ``add_bias_kv`` / ``add_zero_attn``). The layer is run with
  ``need_weights=True, average_attn_weights=False``; head outputs :math:`o_h = A_h V_h` are recomputed from the
  value projection, and masking subtracts head :math:`h`'s term :math:`o_h W_{o,h}^\top` of the output
  projection. Outputs are ``[B, L, H, d]`` (``[L, H, d]`` for unbatched input).
* Layers described by a :class:`~graph_rma.particles.layouts.ProjectionHeads` (the head-layout registry's
  :func:`~graph_rma.particles.layouts.projection_heads`: a layout finder registered with
  :func:`~graph_rma.particles.register_layout_finder`; :mod:`graph_rma.hf` registers one for HuggingFace
  ``transformers`` attention modules, loaded by itself): the
  input of the layer's output projection is the concatenation ``[..., H * d]`` of the heads' outputs, read (and, for
  masking, zeroed: head :math:`h`'s slice ``h*d:(h+1)*d``, the projection's bias still added) by a pre-hook on that
  projection. Outputs are ``[..., L, H, d]``; the attention ``[B, H, L, S]`` is recorded when the module that
  computes it returns it as the second element of its output (an implementation that computes the weights, e.g.
  ``attn_implementation="eager"``), else ``attn`` stays ``None``.
"""

from __future__ import annotations

import inspect
from typing import List, Optional, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .._errors import GraphRMAError
from ..particles.layouts import ProjectionHeads, projection_heads

__all__ = ["HeadCapture", "ProjectionHeads", "num_heads"]


def _is_pyg_attention(layer: nn.Module) -> bool:
    try:
        from torch_geometric.nn import MessagePassing
    except ImportError:  # pragma: no cover
        return False
    if not isinstance(layer, MessagePassing) or not isinstance(getattr(layer, "heads", None), int):
        return False
    return "return_attention_weights" in inspect.signature(layer.forward).parameters


def num_heads(layer: nn.Module) -> int:
    """The number of heads of a supported attention layer."""
    if isinstance(layer, nn.MultiheadAttention):
        return layer.num_heads
    if _is_pyg_attention(layer):
        return layer.heads
    found = projection_heads(layer)
    if found is not None:
        return found.heads
    raise GraphRMAError(
        f"layer: expected a PyG attention layer (GATConv, GATv2Conv, TransformerConv, ...), nn.MultiheadAttention "
        f"or a HuggingFace transformers attention module (graph_rma.hf), got {type(layer).__name__}"
    )


class HeadCapture:
    """Record per-head outputs and attention of ``layer`` (and mask heads) while the context is open.

    Example::

        with HeadCapture(model.conv1) as cap:
            model(x, edge_index)
        cap.outputs      # [N, H, C]
        cap.alpha        # [E, H], cap.edge_index [2, E]

    Args:
        layer: a supported attention layer (see the module docstring).
        mask: heads whose contribution is removed from the layer's output while open (default: none).
        record: keep the tensors of the last call (set ``False`` when only masking).
    """

    def __init__(self, layer: nn.Module, mask: Optional[Sequence[int]] = None, record: bool = True):
        self.layer = layer
        self.heads = num_heads(layer)
        self._projection = None
        if isinstance(layer, nn.MultiheadAttention):
            self.kind = "mha"
        elif _is_pyg_attention(layer):
            self.kind = "pyg"
        else:
            self.kind, self._projection = "projection", projection_heads(layer)
        mask = [] if mask is None else [int(h) for h in mask]
        for h in mask:
            if not 0 <= h < self.heads:
                raise GraphRMAError(f"mask: head indices must lie in [0, {self.heads}), got {h}")
        if self.kind == "mha" and (layer.bias_k is not None or layer.add_zero_attn):
            raise GraphRMAError("layer: nn.MultiheadAttention with add_bias_kv or add_zero_attn is not supported")
        self.mask = sorted(set(mask))
        self.record = record
        self.outputs: Optional[Tensor] = None
        self.alpha: Optional[Tensor] = None
        self.edge_index: Optional[Tensor] = None
        self.attn: Optional[Tensor] = None
        self.calls = 0
        self._handles: List = []
        self._strip = False
        self._want_weights = True
        self._average = True
        self._value: Optional[Tensor] = None

    # -- context -------------------------------------------------------------------------------------------
    def __enter__(self) -> "HeadCapture":
        if self._handles:
            raise RuntimeError("HeadCapture is already open")
        if self.kind == "projection":
            site = self._projection
            self._handles.append(site.projection.register_forward_pre_hook(self._projection_hook))
            if site.attention is not None and self.record:
                self._handles.append(site.attention.register_forward_hook(self._attention_hook))
            return self
        self._handles.append(self.layer.register_forward_pre_hook(self._pre_hook, with_kwargs=True))
        self._handles.append(self.layer.register_forward_hook(self._post_hook))
        if self.kind == "pyg":
            self._handles.append(self.layer.register_propagate_forward_hook(self._propagate_hook))
        return self

    def __exit__(self, *exc) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []
        self._value = None

    @property
    def index(self) -> Optional[Tensor]:
        """Each captured edge's destination node (``edge_index[1]``), the grouping of the sparse softmax."""
        return None if self.edge_index is None else self.edge_index[1]

    # -- hooks ---------------------------------------------------------------------------------------------
    def _bind(self, args, kwargs) -> dict:
        return dict(inspect.signature(self.layer.forward).bind(*args, **kwargs).arguments)

    def _pre_hook(self, module, args, kwargs):
        bound = self._bind(args, kwargs)
        if self.kind == "pyg":
            if not self.record:
                self._strip = False
                return None  # only masking: leave the call as it is
            self._strip = not bool(bound.get("return_attention_weights"))
            bound["return_attention_weights"] = True
            return (), bound
        # nn.MultiheadAttention
        self._want_weights = bool(bound.get("need_weights", True))
        self._average = bool(bound.get("average_attn_weights", True))
        self._value = bound["value"]
        bound["need_weights"] = True
        bound["average_attn_weights"] = False
        return (), bound

    def _projection_hook(self, module, args):
        self.calls += 1
        x = args[0]
        H, d = self.heads, self._projection.head_dim
        if not isinstance(x, Tensor) or x.size(-1) != H * d:
            raise GraphRMAError(
                f"layer: expected the output projection's input [..., {H * d}] ({H} heads of {d}), got "
                f"{getattr(x, 'shape', type(x))}"
            )
        if self.mask:
            heads = x.reshape(*x.shape[:-1], H, d).clone()
            heads[..., self.mask, :] = 0
            x = heads.reshape(x.shape)
        if self.record:
            self.outputs = x.detach().reshape(*x.shape[:-1], H, d)
        return (x,) + tuple(args[1:]) if self.mask else None

    def _attention_hook(self, module, args, output):
        weights = output[1] if isinstance(output, (tuple, list)) and len(output) > 1 else None
        if isinstance(weights, Tensor) and weights.dim() == 4 and weights.size(1) == self.heads:
            self.attn = weights.detach()

    def _propagate_hook(self, module, inputs, out):
        if not isinstance(out, Tensor) or out.dim() != 3 or out.size(1) != self.heads:
            raise GraphRMAError(
                f"layer: expected propagate to return per-head outputs [N, {self.heads}, C], got "
                f"{getattr(out, 'shape', type(out))}"
            )
        if self.mask:
            out = out.clone()
            out[:, self.mask] = 0
        if self.record:
            self.outputs = out.detach()
        return out

    def _post_hook(self, module, args, output):
        self.calls += 1
        if self.kind == "pyg":
            if not isinstance(output, tuple):
                return None
            out, att = output
            if self.record:
                self._store_sparse(att)
            return out if self._strip else output
        out, weights = output  # weights [B, H, L, S] or [H, L, S]
        value, self._value = self._value, None
        heads_out = self._mha_head_outputs(value, weights)  # [..., L, H, d]
        if self.mask:
            out = out - self._mha_head_terms(heads_out, self.mask, out)
            heads_out = heads_out.clone()
            heads_out[..., self.mask, :] = 0
        if self.record:
            self.attn = weights.detach()
            self.outputs = heads_out.detach()
        if not self._want_weights:
            weights = None
        elif self._average:
            weights = weights.mean(dim=-3)
        return out, weights

    def _store_sparse(self, att) -> None:
        if isinstance(att, tuple):
            ei, alpha = att
            if not isinstance(ei, Tensor) or ei.is_sparse or ei.dim() != 2 or ei.size(0) != 2:
                raise GraphRMAError("edge_index: HeadCapture needs a [2, E] edge_index tensor or a SparseTensor")
            self.edge_index, self.alpha = ei.detach(), alpha.detach()
        else:  # torch_sparse.SparseTensor adj_t: rows are destinations, columns sources
            row, col, value = att.coo()
            self.edge_index, self.alpha = torch.stack([col, row]).detach(), value.detach()
        if self.alpha.dim() == 1:
            self.alpha = self.alpha.unsqueeze(-1)

    # -- nn.MultiheadAttention helpers ---------------------------------------------------------------------
    def _mha_value_weights(self):
        m = self.layer
        E = m.embed_dim
        w = m.in_proj_weight[2 * E :] if m._qkv_same_embed_dim else m.v_proj_weight
        b = None if m.in_proj_bias is None else m.in_proj_bias[2 * E :]
        return w, b

    def _mha_head_outputs(self, value: Tensor, weights: Tensor) -> Tensor:
        """:math:`o_h = A_h V_h` as ``[B, L, H, d]`` (or ``[L, H, d]`` unbatched)."""
        m = self.layer
        H, d = m.num_heads, m.head_dim
        unbatched = weights.dim() == 3
        v = F.linear(value, *self._mha_value_weights())
        if unbatched:
            v = v.unsqueeze(0)
            weights = weights.unsqueeze(0)
        elif not m.batch_first:
            v = v.transpose(0, 1)  # [B, S, E]
        B, S, _ = v.shape
        v = v.view(B, S, H, d).transpose(1, 2)  # [B, H, S, d]
        o = (weights @ v).transpose(1, 2)  # [B, L, H, d]
        return o.squeeze(0) if unbatched else o

    def _mha_head_terms(self, heads_out: Tensor, heads: Sequence[int], like: Tensor) -> Tensor:
        """The listed heads' summed contribution :math:`\\sum_h o_h W_{o,h}^\\top` to the output, laid out as
        ``like``."""
        m = self.layer
        d = m.head_dim
        W = m.out_proj.weight  # [E, E]; columns h*d:(h+1)*d belong to head h
        term = sum(heads_out[..., h, :] @ W[:, h * d : (h + 1) * d].t() for h in heads)  # [B, L, E] / [L, E]
        if term.dim() == 3 and not m.batch_first:
            term = term.transpose(0, 1)
        return term
