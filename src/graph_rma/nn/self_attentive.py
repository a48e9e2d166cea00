r"""The structured self-attentive sentence embedding of Lin et al. (2017), with its ``r`` heads as particles.

A bidirectional LSTM turns the ``n`` word vectors into :math:`\mathbf{H} \in \mathbb{R}^{n \times 2u}`; ``r``
attention heads then read it:

.. math::
    \mathbf{A} = \mathrm{softmax}\left(\mathbf{W}_{s2} \tanh(\mathbf{W}_{s1} \mathbf{H}^\top)\right)
        \in \mathbb{R}^{r \times n}, \qquad \mathbf{M} = \mathbf{A} \mathbf{H} \in \mathbb{R}^{r \times 2u},

with :math:`\mathbf{W}_{s1} \in \mathbb{R}^{d_a \times 2u}`, :math:`\mathbf{W}_{s2} \in \mathbb{R}^{r \times d_a}`
and the softmax over the ``n`` tokens (padding masked). Lin et al.'s regulariser is the Frobenius penalty
:math:`\|\mathbf{A}\mathbf{A}^\top - \mathbf{I}\|_F^2` (:func:`graph_rma.regularizers.frobenius_penalty`).

**Heads as particles.** Head :math:`i` is row :math:`i` of :math:`\mathbf{W}_{s2}` (role ``ws2``). In Lin et
al.'s model :math:`\mathbf{W}_{s1}` is shared by all heads (``shared_ws1=True``, the default): it is a common
feature map, not part of any one head, so it is trained by the optimizer as usual and is *not* a particle, and
heads differ only through their :math:`d_a`-dimensional rows of :math:`\mathbf{W}_{s2}`. With
``shared_ws1=False`` each head gets its own block :math:`\mathbf{W}_{s1}^{(i)} \in \mathbb{R}^{d_a \times 2u}`
(rows :math:`i d_a, \dots, (i+1) d_a - 1` of a ``[r d_a, 2u]`` matrix, role ``ws1``) and the particle is the
pair :math:`(\mathbf{W}_{s1}^{(i)}, \mathbf{w}_{s2}^{(i)})`, i.e. ``r`` independent two-layer scorers.

**DropAttention** (``drop_attention=``) acts on :math:`\mathbf{A}` seen as ``[r, n]`` "queries x keys": element
mode drops single (head, token) weights, column mode drops a token for all ``r`` heads at once.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from .._errors import GraphRMAError
from ..particles import HeadParam, register_head_layout
from ..regularizers import frobenius_penalty

__all__ = ["SelfAttentiveEncoder"]


class SelfAttentiveEncoder(nn.Module):
    r"""BiLSTM + ``r``-head additive self-attention (Lin et al., 2017); see the module docstring.

    Args:
        in_channels: size of the input word vectors.
        hidden_channels: LSTM hidden size :math:`u` per direction (the output rows have :math:`2u` entries).
        attention_channels: :math:`d_a`.
        heads: :math:`r`.
        num_layers: LSTM layers.
        dropout: dropout between LSTM layers (when ``num_layers > 1``) and on the LSTM output.
        shared_ws1: share :math:`\mathbf{W}_{s1}` across heads (Lin et al.) or give each head its own.
        drop_attention: a :class:`graph_rma.DropAttention` applied to :math:`\mathbf{A}` in training mode.

    Shapes:
        input ``x`` ``[B, n, in_channels]`` and ``key_padding_mask`` ``[B, n]`` (``True`` = padding, as in
        :class:`torch.nn.MultiheadAttention`; ``None`` = no padding).
        output ``(M, A)``: ``M`` ``[B, r, 2u]`` and ``A`` ``[B, r, n]`` (before DropAttention; rows sum to 1).
    """

    accepts_drop_attention = True  # graph_rma.variants.apply_variant installs DropAttention here

    def __init__(
        self,
        in_channels: int,
        hidden_channels: int,
        attention_channels: int,
        heads: int,
        num_layers: int = 1,
        dropout: float = 0.0,
        shared_ws1: bool = True,
        drop_attention: Optional[nn.Module] = None,
    ) -> None:
        super().__init__()
        for name, v in (
            ("in_channels", in_channels),
            ("hidden_channels", hidden_channels),
            ("attention_channels", attention_channels),
            ("heads", heads),
            ("num_layers", num_layers),
        ):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise GraphRMAError(f"{name}: expected a positive int, got {v!r}")
        if not 0.0 <= dropout < 1.0:
            raise GraphRMAError(f"dropout: expected a probability in [0, 1), got {dropout!r}")
        if drop_attention is not None and not isinstance(drop_attention, nn.Module):
            raise GraphRMAError(
                f"drop_attention: expected a DropAttention module or None, got {type(drop_attention).__name__}"
            )
        self.in_channels, self.hidden_channels = in_channels, hidden_channels
        self.attention_channels, self.heads, self.shared_ws1 = attention_channels, heads, bool(shared_ws1)
        self.lstm = nn.LSTM(
            in_channels,
            hidden_channels,
            num_layers=num_layers,
            batch_first=True,
            bidirectional=True,
            dropout=dropout if num_layers > 1 else 0.0,
        )
        self.dropout = nn.Dropout(dropout)
        d_s1 = attention_channels if self.shared_ws1 else heads * attention_channels
        self.ws1 = nn.Linear(2 * hidden_channels, d_s1, bias=False)
        self.ws2 = nn.Linear(attention_channels, heads, bias=False)
        self.drop_attention = drop_attention
        self.reset_parameters()

    @property
    def out_channels(self) -> int:
        return 2 * self.hidden_channels

    def reset_parameters(self) -> None:
        self.lstm.reset_parameters()
        self.ws1.reset_parameters()
        self.ws2.reset_parameters()

    def scores(self, h: Tensor) -> Tensor:
        r"""Unnormalised :math:`\mathbf{W}_{s2} \tanh(\mathbf{W}_{s1} \mathbf{H}^\top)`: ``[B, n, 2u] -> [B, r, n]``."""
        t = torch.tanh(self.ws1(h))  # [B, n, d_a] or [B, n, r*d_a]
        if self.shared_ws1:
            return self.ws2(t).transpose(1, 2)
        t = t.view(t.size(0), t.size(1), self.heads, self.attention_channels)
        return torch.einsum("bnrd,rd->brn", t, self.ws2.weight)

    def attention(self, h: Tensor, key_padding_mask: Optional[Tensor] = None) -> Tensor:
        """Attention ``A`` ``[B, r, n]`` over the LSTM states ``h`` ``[B, n, 2u]``."""
        s = self.scores(h)
        if key_padding_mask is not None:
            s = s.masked_fill(key_padding_mask.unsqueeze(1), float("-inf"))
        return torch.softmax(s, dim=-1)

    def forward(self, x: Tensor, key_padding_mask: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
        if x.dim() != 3 or x.size(-1) != self.in_channels:
            raise GraphRMAError(f"x: expected shape [B, n, {self.in_channels}], got {list(x.shape)}")
        B, n, _ = x.shape
        if key_padding_mask is not None:
            if key_padding_mask.shape != (B, n) or key_padding_mask.dtype != torch.bool:
                raise GraphRMAError(
                    f"key_padding_mask: expected a bool tensor of shape {[B, n]} (True = padding), "
                    f"got {key_padding_mask.dtype} {list(key_padding_mask.shape)}"
                )
            lengths = (~key_padding_mask).sum(dim=1)
            if bool((lengths == 0).any()):
                raise GraphRMAError("key_padding_mask: every sequence needs at least one non-padding token")
            packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
            h, _ = pad_packed_sequence(self.lstm(packed)[0], batch_first=True, total_length=n)
        else:
            h, _ = self.lstm(x)
        h = self.dropout(h)
        A = self.attention(h, key_padding_mask)
        A_used = self.drop_attention(A) if self.drop_attention is not None and self.training else A
        M = A_used @ h  # [B, r, 2u]
        return M, A

    @staticmethod
    def penalty(A: Tensor) -> Tensor:
        r"""Lin et al.'s :math:`\|\mathbf{A}\mathbf{A}^\top - \mathbf{I}\|_F^2`, averaged over the batch."""
        return frobenius_penalty(A)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.in_channels}, {self.hidden_channels}, "
            f"attention_channels={self.attention_channels}, heads={self.heads}, shared_ws1={self.shared_ws1})"
        )


def _self_attentive_layout(m: SelfAttentiveEncoder) -> List[HeadParam]:
    out = [HeadParam("ws2.weight", "ws2", m.ws2.weight, m.heads, axis=0)]
    if not m.shared_ws1:
        out.append(HeadParam("ws1.weight", "ws1", m.ws1.weight, m.heads, axis=0))
    return out


register_head_layout(SelfAttentiveEncoder, _self_attentive_layout)
