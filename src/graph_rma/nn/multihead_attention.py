r"""A drop-in for :class:`torch.nn.MultiheadAttention` with DropAttention and heads exposed as particles.

Each of the :math:`H` heads computes

.. math::
    \mathbf{A}_h = \mathrm{softmax}\!\left(\frac{(\mathbf{Q} \mathbf{W}^Q_h)(\mathbf{K} \mathbf{W}^K_h)^\top}
        {\sqrt{d}} + \mathbf{M}\right), \qquad
    \mathrm{head}_h = \mathrm{DropAttention}(\mathbf{A}_h)\, \mathbf{V} \mathbf{W}^V_h,

and the output is :math:`[\mathrm{head}_1, \dots, \mathrm{head}_H] \mathbf{W}^O`, with :math:`\mathbf{M}` the
merged ``attn_mask`` / ``key_padding_mask`` (``-inf`` where masked) and :math:`d` the head dimension.

:class:`RepulsiveMultiheadAttention` *is* an :class:`torch.nn.MultiheadAttention` (a subclass with the same
parameters, attributes and ``state_dict``), so

* the head layout of ``nn.MultiheadAttention`` applies: head :math:`h`'s particle is its rows of
  :math:`\mathbf{W}^Q, \mathbf{W}^K, \mathbf{W}^V` (and biases, roles ``query``/``key``/``value``) and its
  columns of :math:`\mathbf{W}^O` (role ``out``), so ``SVGD(model, roles=("query", "key"))`` reproduces the
  paper's Table 10 ablations;
* ``nn.TransformerEncoderLayer``/``DecoderLayer`` keep using it, including their inference fast path (taken
  only in eval mode without autograd, where DropAttention is inactive anyway);
* with the extra options off, ``forward`` *is* ``nn.MultiheadAttention.forward`` (identical outputs).

The extra options switch to an explicit path that materialises the attention probabilities ``[B, H, L, S]``:
``drop_attention`` (a :class:`graph_rma.DropAttention`, applied in training mode before the layer's ordinary
``dropout``) and ``store_attention`` (keep the probabilities, with autograd, in :attr:`last_attention` for a
regulariser or a heatmap; see :func:`record_attention`).
"""

from __future__ import annotations

import contextlib
import math
from typing import Iterator, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .._errors import GraphRMAError

__all__ = ["RepulsiveMultiheadAttention", "record_attention"]


def _checked_masks(attn_mask, key_padding_mask, dtype, L: int, S: int, B: int, H: int):
    """``attn_mask`` as a float ``[1 or B*H, L, S]`` mask and ``key_padding_mask`` as a float ``[B, S]`` one (each
    ``None`` when not given), their shapes checked."""
    mask = _float_mask(attn_mask, "attn_mask", dtype)
    kpm = _float_mask(key_padding_mask, "key_padding_mask", dtype)
    if mask is not None:
        if mask.dim() == 2 and mask.shape != (L, S):
            raise GraphRMAError(f"attn_mask: expected shape {(L, S)} (2-D), got {tuple(mask.shape)}")
        if mask.dim() == 3 and mask.shape != (B * H, L, S):
            raise GraphRMAError(f"attn_mask: expected shape {(B * H, L, S)} (3-D), got {tuple(mask.shape)}")
        if mask.dim() not in (2, 3):
            raise GraphRMAError(f"attn_mask: expected a 2-D or 3-D mask, got {mask.dim()}-D")
        mask = mask.reshape(-1, L, S)
    if kpm is not None and kpm.shape != (B, S):
        raise GraphRMAError(f"key_padding_mask: expected shape {(B, S)}, got {tuple(kpm.shape)}")
    return mask, kpm


def _float_mask(mask: Optional[Tensor], name: str, dtype: torch.dtype) -> Optional[Tensor]:
    """A boolean (``True`` = masked) or additive float mask as an additive float mask of ``dtype``."""
    if mask is None:
        return None
    if mask.dtype == torch.bool:
        return torch.zeros_like(mask, dtype=dtype).masked_fill_(mask, float("-inf"))
    if not torch.is_floating_point(mask):
        raise GraphRMAError(f"{name}: expected a bool or floating-point mask, got {mask.dtype}")
    return mask.to(dtype)


def _autocast(t: Tensor) -> bool:
    """Whether autocast is on for ``t``'s device (inputs of another dtype than the weights are then expected)."""
    try:
        return torch.is_autocast_enabled(t.device.type)
    except TypeError:  # pragma: no cover - torch < 2.4 takes no device type
        return torch.is_autocast_enabled() or torch.is_autocast_cpu_enabled()


class RepulsiveMultiheadAttention(nn.MultiheadAttention):
    r"""Multi-head attention whose heads are particles, with optional DropAttention (see the module docstring).

    Arguments embed_dim, num_heads, dropout, bias, add_bias_kv, add_zero_attn, kdim, vdim, batch_first, device,
    dtype: exactly as in :class:`torch.nn.MultiheadAttention`.

    Args:
        drop_attention: a :class:`graph_rma.DropAttention` module applied to the attention probabilities
            ``[B, H, L, S]`` in training mode (``None``: off).
        store_attention: keep the attention probabilities of the last forward in :attr:`last_attention`
            (``[B, H, L, S]``, before any dropout, differentiable). Inside ``nn.TransformerEncoderLayer`` an
            eval-mode ``no_grad`` forward may take torch's fast path, which never calls this layer's ``forward``;
            use :func:`record_attention`, which switches that path off, to read attention at inference.

    Forward arguments and return values are those of :meth:`torch.nn.MultiheadAttention.forward`.
    """

    accepts_drop_attention = True  # graph_rma.variants.apply_variant installs DropAttention here

    last_attention: Optional[Tensor]

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        add_bias_kv: bool = False,
        add_zero_attn: bool = False,
        kdim: Optional[int] = None,
        vdim: Optional[int] = None,
        batch_first: bool = False,
        device=None,
        dtype=None,
        *,
        drop_attention: Optional[nn.Module] = None,
        store_attention: bool = False,
    ) -> None:
        if not isinstance(embed_dim, int) or embed_dim <= 0:
            raise GraphRMAError(f"embed_dim: expected a positive int, got {embed_dim!r}")
        if not isinstance(num_heads, int) or num_heads <= 0 or embed_dim % num_heads != 0:
            raise GraphRMAError(f"num_heads: expected a positive divisor of embed_dim={embed_dim}, got {num_heads!r}")
        if drop_attention is not None and not isinstance(drop_attention, nn.Module):
            raise GraphRMAError(
                "drop_attention: expected a graph_rma.DropAttention module or None, "
                f"got {type(drop_attention).__name__}"
            )
        super().__init__(
            embed_dim,
            num_heads,
            dropout=dropout,
            bias=bias,
            add_bias_kv=add_bias_kv,
            add_zero_attn=add_zero_attn,
            kdim=kdim,
            vdim=vdim,
            batch_first=batch_first,
            device=device,
            dtype=dtype,
        )
        self.drop_attention = drop_attention
        self.store_attention = bool(store_attention)
        self.last_attention = None

    @classmethod
    def from_stock(cls, module: nn.MultiheadAttention, **options) -> "RepulsiveMultiheadAttention":
        """A new layer with ``module``'s constructor arguments (weights are copied by :func:`graph_rma.convert`)."""
        ref = next(iter(module.parameters()))
        return cls(
            module.embed_dim,
            module.num_heads,
            dropout=module.dropout,
            bias=module.in_proj_bias is not None,
            add_bias_kv=module.bias_k is not None,
            add_zero_attn=module.add_zero_attn,
            kdim=module.kdim,
            vdim=module.vdim,
            batch_first=module.batch_first,
            device=ref.device,
            dtype=ref.dtype,
            **options,
        )

    def _explicit(self) -> bool:
        return self.store_attention or self._dropping()

    def _dropping(self) -> bool:
        return self.drop_attention is not None and self.training

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask: Optional[Tensor] = None,
        need_weights: bool = True,
        attn_mask: Optional[Tensor] = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> Tuple[Tensor, Optional[Tensor]]:
        self._check_inputs(query, key, value)
        if not self._explicit():
            return super().forward(
                query,
                key,
                value,
                key_padding_mask=key_padding_mask,
                need_weights=need_weights,
                attn_mask=attn_mask,
                average_attn_weights=average_attn_weights,
                is_causal=is_causal,
            )
        return self._explicit_forward(
            query, key, value, key_padding_mask, need_weights, attn_mask, average_attn_weights, is_causal
        )

    def _check_inputs(self, query: Tensor, key: Tensor, value: Tensor) -> None:
        """A ``GraphRMAError`` naming the argument, instead of torch's bare assertion or matmul error, for inputs of the
        wrong shape, width or dtype (nested tensors from torch's encoder fast path are left to torch)."""
        inputs = (
            ("query", query, self.embed_dim, "embed_dim"),
            ("key", key, self.kdim, "kdim"),
            ("value", value, self.vdim, "vdim"),
        )
        for name, t, width, attr in inputs:
            if not isinstance(t, Tensor):
                raise GraphRMAError(f"{name}: expected a tensor, got {type(t).__name__}")
            if t.is_nested:
                return
            if t.dim() != query.dim() or t.dim() not in (2, 3):
                raise GraphRMAError(
                    f"{name}: expected a 2-D [L, E] or a batched 3-D tensor like query's "
                    f"{list(query.shape)}, got shape {list(t.shape)}"
                )
            if t.size(-1) != width:
                raise GraphRMAError(
                    f"{name}: expected {width} features in the last dimension (the layer's {attr}), "
                    f"got shape {list(t.shape)}"
                )
        if key.shape[:-1] != value.shape[:-1]:
            raise GraphRMAError(
                f"value: expected the shape of key {list(key.shape[:-1])} up to the features, got {list(value.shape)}"
            )
        dtype = self.out_proj.weight.dtype
        if dtype.is_floating_point and not _autocast(query):
            for name, t, _, _ in inputs:
                if t.dtype != dtype:
                    raise GraphRMAError(
                        f"{name}: expected dtype {dtype} (the layer's parameters), got {t.dtype}; "
                        f"convert the input or the layer (.to(dtype))"
                    )

    def _explicit_forward(
        self, query, key, value, key_padding_mask, need_weights, attn_mask, average_attn_weights, is_causal
    ) -> Tuple[Tensor, Optional[Tensor]]:
        if query.dim() not in (2, 3):
            raise GraphRMAError(f"query: expected shape [L, E] or a batched 3-D tensor, got {list(query.shape)}")
        if is_causal and attn_mask is None:
            raise GraphRMAError(
                "attn_mask: needed with the is_causal hint (e.g. nn.Transformer.generate_square_subsequent_mask)"
            )
        batched = query.dim() == 3
        if not batched:  # [L, E] -> [L, 1, E]
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif self.batch_first:  # [B, L, E] -> [L, B, E]
            query, key, value = (x.transpose(0, 1) for x in (query, key, value))
        L, B, E = query.shape
        H, d = self.num_heads, self.head_dim
        if E != self.embed_dim:
            raise GraphRMAError(f"query: expected embedding dimension {self.embed_dim}, got {E}")

        if self._qkv_same_embed_dim:
            w_q, w_k, w_v = self.in_proj_weight.chunk(3)
        else:
            w_q, w_k, w_v = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        b_q, b_k, b_v = self.in_proj_bias.chunk(3) if self.in_proj_bias is not None else (None, None, None)
        q, k, v = F.linear(query, w_q, b_q), F.linear(key, w_k, b_k), F.linear(value, w_v, b_v)

        mask, kpm = _checked_masks(attn_mask, key_padding_mask, q.dtype, L, k.size(0), B, H)
        if self.bias_k is not None:
            k = torch.cat([k, self.bias_k.repeat(1, B, 1)])
            v = torch.cat([v, self.bias_v.repeat(1, B, 1)])
            mask = F.pad(mask, (0, 1)) if mask is not None else None
            kpm = F.pad(kpm, (0, 1)) if kpm is not None else None
        q = q.reshape(L, B * H, d).transpose(0, 1)
        k = k.reshape(k.size(0), B * H, d).transpose(0, 1)
        v = v.reshape(v.size(0), B * H, d).transpose(0, 1)
        if self.add_zero_attn:
            k = torch.cat([k, k.new_zeros(B * H, 1, d)], dim=1)
            v = torch.cat([v, v.new_zeros(B * H, 1, d)], dim=1)
            mask = F.pad(mask, (0, 1)) if mask is not None else None
            kpm = F.pad(kpm, (0, 1)) if kpm is not None else None
        S = k.size(1)
        if kpm is not None:
            kpm = kpm.view(B, 1, 1, S).expand(-1, H, -1, -1).reshape(B * H, 1, S)
            mask = kpm if mask is None else mask + kpm

        scores = torch.bmm(q * math.sqrt(1.0 / d), k.transpose(-2, -1))
        if mask is not None:
            scores = scores + mask
        scores = scores.view(B, H, L, S)
        attn = self._weights(scores)
        if self.dropout > 0.0 and self.training:
            attn = F.dropout(attn, p=self.dropout)
        out = torch.bmm(attn.reshape(B * H, L, S), v)  # [B*H, L, d]
        out = out.transpose(0, 1).reshape(L * B, E)
        out = F.linear(out, self.out_proj.weight, self.out_proj.bias).view(L, B, E)

        weights: Optional[Tensor] = None
        if need_weights:
            weights = attn.mean(dim=1) if average_attn_weights else attn
        if not batched:
            out = out.squeeze(1)
            weights = weights.squeeze(0) if weights is not None else None
        elif self.batch_first:
            out = out.transpose(0, 1)
        return out, weights

    def _weights(self, scores: Tensor) -> Tensor:
        """The attention weights ``[B, H, L, S]`` of ``scores``: the softmax (kept in ``last_attention`` when
        ``store_attention``), then DropAttention when it drops."""
        plain = torch.softmax(scores, dim=-1) if self.store_attention or not self._dropping() else None
        self.last_attention = plain if self.store_attention else None
        if not self._dropping():
            return plain
        # Softmax over the surviving keys: the same weights as renormalising after the drop, but stable for very
        # peaked rows (see DropAttention.dense_softmax).
        dense_softmax = getattr(self.drop_attention, "dense_softmax", None)
        return dense_softmax(scores) if dense_softmax is not None else self.drop_attention(torch.softmax(scores, -1))

    def extra_repr(self) -> str:
        s = f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, batch_first={self.batch_first}"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.store_attention:
            s += ", store_attention=True"
        return s


@contextlib.contextmanager
def record_attention(model: nn.Module) -> Iterator[List[RepulsiveMultiheadAttention]]:
    """Within the block, every :class:`RepulsiveMultiheadAttention` in ``model`` keeps its attention in
    ``last_attention``; the torch MHA inference fast path (which bypasses ``forward``) is switched off meanwhile.

    Yields the layers in module order. Example::

        with record_attention(model) as layers:
            model(x)
        maps = [m.last_attention for m in layers]   # each [B, H, L, S]
    """
    layers = [m for m in model.modules() if isinstance(m, RepulsiveMultiheadAttention)]
    before = [m.store_attention for m in layers]
    fast = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    for m in layers:
        m.store_attention = True
    try:
        yield layers
    finally:
        torch.backends.mha.set_fastpath_enabled(fast)
        for m, b in zip(layers, before):
            m.store_attention = b
