r"""Sentence classifiers for the text benchmark: a small Transformer encoder and Lin et al.'s self-attentive model.

Both take right-padded token ids ``[B, n]`` (``0`` = padding) and return class logits ``[B, C]``; both accept
``drop_attention=`` (a :class:`graph_rma.DropAttention`) and expose

* :meth:`attention_for_penalty`: the attention of the last forward pass as ``[..., H, S]`` tensors (heads on
  the second-to-last axis), for :func:`graph_rma.regularization_loss` (Lin et al.'s Frobenius penalty);
* :meth:`head_attention`: per-sentence, per-head attention over the tokens ``[B, H, n]`` (for heatmaps and
  head-diversity measures).

:class:`TransformerClassifier` is built from a stock :class:`torch.nn.TransformerEncoder` and converted with
:func:`graph_rma.convert` -- the "one change" a user makes to an existing Transformer model.
"""

from __future__ import annotations

from typing import List, Optional

import torch
from torch import Tensor, nn

from .._errors import GraphRMAError
from ..nn.conversion import convert
from ..nn.multihead_attention import RepulsiveMultiheadAttention, record_attention
from ..nn.self_attentive import SelfAttentiveEncoder

__all__ = ["TransformerClassifier", "SelfAttentiveClassifier", "MODELS", "build_model"]


class TransformerClassifier(nn.Module):
    r"""Token + learned position embeddings, an ``nn.TransformerEncoder`` (post-norm, batch first) whose
    attention is :class:`~graph_rma.nn.RepulsiveMultiheadAttention`, masked mean pooling and a linear layer.

    ``vocab_size`` and ``num_classes`` are the sizes; ``d_model``, ``heads``, ``num_layers``, ``dim_feedforward`` and
    ``dropout`` configure the encoder.

    Args:
        max_len: longest sentence (longer inputs are cut).
        drop_attention: :class:`graph_rma.DropAttention` for every attention layer (``None``: off).
        store_attention: keep each layer's attention of the last forward (needed by the Frobenius penalty).
    """

    def __init__(
        self,
        vocab_size: int,
        num_classes: int,
        d_model: int = 64,
        heads: int = 4,
        num_layers: int = 2,
        dim_feedforward: int = 128,
        dropout: float = 0.1,
        max_len: int = 128,
        drop_attention: Optional[nn.Module] = None,
        store_attention: bool = False,
    ) -> None:
        super().__init__()
        if isinstance(heads, bool) or not isinstance(heads, int) or heads < 1 or d_model % heads:
            valid = [h for h in range(1, d_model + 1) if d_model % h == 0]
            raise GraphRMAError(
                f"heads: the Transformer's width {d_model} must split evenly over its heads; expected one "
                f"of {valid}, got {heads!r}"
            )
        self.max_len = max_len
        self.embed = nn.Embedding(vocab_size, d_model, padding_idx=0)
        self.pos = nn.Embedding(max_len, d_model)
        layer = nn.TransformerEncoderLayer(d_model, heads, dim_feedforward, dropout, batch_first=True)
        encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.encoder = convert(encoder, drop_attention=drop_attention, store_attention=store_attention)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(d_model, num_classes)

    @property
    def attention_layers(self) -> List[RepulsiveMultiheadAttention]:
        return [m for m in self.modules() if isinstance(m, RepulsiveMultiheadAttention)]

    def forward(self, tokens: Tensor) -> Tensor:
        tokens = tokens[:, : self.max_len]
        pad = tokens == 0
        pos = torch.arange(tokens.size(1), device=tokens.device)
        x = self.embed(tokens) + self.pos(pos)  # N(0, 1) embeddings, no sqrt(d) scale: keeps softmax logits O(1)
        h = self.encoder(x, src_key_padding_mask=pad)
        keep = (~pad).unsqueeze(-1).to(h.dtype)
        pooled = (h * keep).sum(1) / keep.sum(1).clamp(min=1)
        return self.out(self.dropout(pooled))

    def attention_for_penalty(self) -> List[Tensor]:
        """Each layer's attention of the last forward as ``[B, L, H, S]`` (needs ``store_attention``)."""
        maps = [m.last_attention for m in self.attention_layers]
        if any(a is None for a in maps):
            raise GraphRMAError("store_attention: build the model with store_attention=True to use attention penalties")
        return [a.transpose(1, 2) for a in maps]

    @torch.no_grad()
    def head_attention(self, tokens: Tensor, layer: int = -1) -> Tensor:
        """``[B, H, n]``: attention each token receives from head ``h`` of ``layer``, averaged over the
        sentence's (non-padding) query positions."""
        tokens = tokens[:, : self.max_len]
        with record_attention(self) as layers:
            self(tokens)
        a = layers[layer].last_attention  # [B, H, L, S]
        valid = (tokens != 0).to(a.dtype)  # [B, L]
        return (a * valid[:, None, :, None]).sum(2) / valid.sum(1).clamp(min=1)[:, None, None]

    @torch.no_grad()
    def query_attention(self, tokens: Tensor) -> List[Tensor]:
        """Every layer's full attention ``[B, H, L, S]`` (for head-diversity measures)."""
        with record_attention(self) as layers:
            self(tokens[:, : self.max_len])
        return [m.last_attention for m in layers]


class SelfAttentiveClassifier(nn.Module):
    r"""Lin et al. (2017): embeddings, :class:`~graph_rma.nn.SelfAttentiveEncoder` (BiLSTM + ``r`` heads), the
    flattened sentence matrix :math:`\mathbf{M}` into a one-hidden-layer MLP.

    ``vocab_size`` and ``num_classes`` are the sizes; ``embed_dim``, ``hidden_channels`` (:math:`u`),
    ``attention_channels`` (:math:`d_a`), ``heads`` (:math:`r`), ``mlp_channels`` and ``dropout`` configure the model;
    ``shared_ws1`` and ``drop_attention`` are as in the encoder.
    """

    def __init__(
        self,
        vocab_size: int,
        num_classes: int,
        embed_dim: int = 64,
        hidden_channels: int = 64,
        attention_channels: int = 64,
        heads: int = 4,
        mlp_channels: int = 128,
        dropout: float = 0.2,
        shared_ws1: bool = True,
        drop_attention: Optional[nn.Module] = None,
        max_len: int = 128,
    ) -> None:
        super().__init__()
        self.max_len = max_len
        self.embed = nn.Embedding(vocab_size, embed_dim, padding_idx=0)
        self.encoder = SelfAttentiveEncoder(
            embed_dim,
            hidden_channels,
            attention_channels,
            heads,
            dropout=dropout,
            shared_ws1=shared_ws1,
            drop_attention=drop_attention,
        )
        self.mlp = nn.Sequential(
            nn.Linear(heads * 2 * hidden_channels, mlp_channels),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(mlp_channels, num_classes),
        )
        self.last_attention: Optional[Tensor] = None

    def forward(self, tokens: Tensor) -> Tensor:
        tokens = tokens[:, : self.max_len]
        M, A = self.encoder(self.embed(tokens), key_padding_mask=tokens == 0)
        self.last_attention = A
        return self.mlp(M.flatten(1))

    def attention_for_penalty(self) -> List[Tensor]:
        """The last forward's ``A`` ``[B, r, n]``."""
        if self.last_attention is None:
            raise GraphRMAError("attention_for_penalty: run a forward pass first")
        return [self.last_attention]

    @torch.no_grad()
    def head_attention(self, tokens: Tensor, layer: int = -1) -> Tensor:
        self(tokens)
        return self.last_attention

    @torch.no_grad()
    def query_attention(self, tokens: Tensor) -> List[Tensor]:
        """``A`` as ``[B, r, 1, n]`` (one "query" per head), for the same diversity code as the Transformer."""
        self(tokens)
        return [self.last_attention.unsqueeze(2)]


MODELS = ("transformer", "selfattn")


def build_model(
    name: str,
    vocab_size: int,
    num_classes: int,
    drop_attention: Optional[nn.Module] = None,
    store_attention: bool = False,
    **kwargs,
) -> nn.Module:
    """``transformer`` (:class:`TransformerClassifier`) or ``selfattn`` (:class:`SelfAttentiveClassifier`)."""
    if name == "transformer":
        return TransformerClassifier(
            vocab_size, num_classes, drop_attention=drop_attention, store_attention=store_attention, **kwargs
        )
    if name == "selfattn":
        return SelfAttentiveClassifier(vocab_size, num_classes, drop_attention=drop_attention, **kwargs)
    raise GraphRMAError(f"model: expected one of {MODELS}, got {name!r}")
