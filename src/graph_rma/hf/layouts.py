r"""Which slices of a HuggingFace attention module form head :math:`h`: :class:`AttentionLayout`.

An attention module (the *layer*) owns the query, key and value projections and the output projection. With head
dimension :math:`d`, head :math:`h` owns rows :math:`[hd, (h+1)d)` of the query projection (weight and bias) and
the same columns of the output projection's weight; the output projection's bias belongs to no head. Key and value
projections have :math:`G` heads of :math:`d` rows each: :math:`G = H` in multi-head attention, :math:`G < H` in
grouped-query attention (Llama-family ``num_key_value_heads``), where query head :math:`h` reads key/value head
:math:`\lfloor h / (H/G) \rfloor`.

**Particles.** With :math:`G = H` a particle is one head's query, key and value rows and output columns (roles
``query``, ``key``, ``value``, ``out``), as for :class:`torch.nn.MultiheadAttention`. With :math:`G < H` the layer
gives two particle groups: :math:`H` particles of a query head's rows with its output columns (roles ``query``,
``out``; the group is named after the layer) and :math:`G` particles of a key/value head's rows (roles ``key``,
``value``; named ``"<layer>:key/value"``); with :math:`G = 1` (multi-query attention) the second group has one
particle and is left out.

Recognised structures (attribute paths inside the layer; the families are examples):

==============  ===================================================  =====================================
structure       query, key, value -> output                          families
==============  ===================================================  =====================================
``bert``        ``self.query``, ``self.key``, ``self.value``         BERT, RoBERTa, ELECTRA, ...
                -> ``output.dense`` (layer: ``...attention``)
``albert``      ``query``, ``key``, ``value`` -> ``dense``           ALBERT
``distilbert``  ``q_lin``, ``k_lin``, ``v_lin`` -> ``out_lin``      DistilBERT
``llama``       ``q_proj``, ``k_proj``, ``v_proj`` -> ``o_proj``     Llama, Mistral, Qwen2, Gemma, ViT, ...
``bart``        ``q_proj``, ``k_proj``, ``v_proj`` -> ``out_proj``   BART, ...
``gpt2``        fused ``c_attn`` (``q_attn`` for cross-attention)    GPT-2
                -> ``c_proj`` (``Conv1D``: weights ``[in, out]``)
==============  ===================================================  =====================================

The head dimension comes from the module (``head_dim``, ``attention_head_size``) or its config (``head_dim``, else
hidden size / number of attention heads); :math:`H` and :math:`G` are the projections' output sizes over :math:`d`,
so a pruned layer (:func:`graph_rma.hf.prune_heads`) is read correctly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from torch import nn
from transformers.pytorch_utils import Conv1D

from ..particles.layouts import HeadParam, ProjectionHeads, register_layout_finder

__all__ = ["AttentionLayout", "ProjectionSlice", "attention_layers", "find_attention_layout"]

# name, (query, key, value) paths, output path, path of the submodule that calls the attention function
_PATTERNS: Tuple[Tuple[str, Tuple[str, str, str], str, str], ...] = (
    ("bert", ("self.query", "self.key", "self.value"), "output.dense", "self"),
    ("albert", ("query", "key", "value"), "dense", ""),
    ("distilbert", ("q_lin", "k_lin", "v_lin"), "out_lin", ""),
    ("llama", ("q_proj", "k_proj", "v_proj"), "o_proj", ""),
    ("bart", ("q_proj", "k_proj", "v_proj"), "out_proj", ""),
)
_ROLES = ("query", "key", "value")


@dataclass(frozen=True)
class ProjectionSlice:
    """One role's share of a projection: output features ``[start, start + length)`` of ``linear`` (all of them
    unless the projection is fused), ``heads`` heads of ``length / heads`` features each."""

    role: str
    path: str
    linear: nn.Module
    start: int
    length: int
    heads: int


@dataclass(frozen=True)
class AttentionLayout:
    """One attention module's heads (see the module docstring).

    Attributes:
        family: the recognised structure (``bert``, ``albert``, ``distilbert``, ``llama``, ``bart``, ``gpt2``).
        module: the layer (owns the input projections and the output projection).
        inputs: the query, key and value slices.
        output_path, output: the output projection (its input features are the heads' outputs, head-major).
        attention_path: the submodule that calls the attention function (``""``: the layer itself).
        heads, kv_heads, head_dim: :math:`H`, :math:`G`, :math:`d`.
    """

    family: str
    module: nn.Module
    inputs: Tuple[ProjectionSlice, ...]
    output_path: str
    output: nn.Module
    attention_path: str
    heads: int
    kv_heads: int
    head_dim: int

    @property
    def attention(self) -> nn.Module:
        """The submodule that calls the attention function (returns ``(output, weights)``)."""
        return self.module.get_submodule(self.attention_path) if self.attention_path else self.module

    def head_params(self) -> List[HeadParam]:
        """The layer's :class:`~graph_rma.HeadParam` list (the particles' slices; frozen ones included)."""
        out: List[HeadParam] = []
        for s in self.inputs:
            axis = 1 if isinstance(s.linear, Conv1D) else 0  # Conv1D weights are [in, out]
            fused = s.length != _out_features(s.linear)
            start, length = (s.start, s.length) if fused else (0, None)
            out.append(HeadParam(f"{s.path}.weight", s.role, s.linear.weight, s.heads, axis, start, length))
            if getattr(s.linear, "bias", None) is not None:
                out.append(HeadParam(f"{s.path}.bias", s.role, s.linear.bias, s.heads, 0, start, length))
        axis = 0 if isinstance(self.output, Conv1D) else 1
        out.append(HeadParam(f"{self.output_path}.weight", "out", self.output.weight, self.heads, axis))
        return out

    def projection_heads(self) -> ProjectionHeads:
        """What :class:`graph_rma.diagnostics.HeadCapture` needs: the output projection and the attention module."""
        return ProjectionHeads(self.heads, self.head_dim, self.output, self.attention)


def _get(module: nn.Module, path: str) -> Optional[nn.Module]:
    obj: object = module
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj if isinstance(obj, nn.Module) else None


def _out_features(linear: nn.Module) -> int:
    return linear.weight.size(1) if isinstance(linear, Conv1D) else linear.weight.size(0)


def _in_features(linear: nn.Module) -> int:
    return linear.weight.size(0) if isinstance(linear, Conv1D) else linear.weight.size(1)


def _head_dim(holder: nn.Module) -> Optional[int]:
    for attr in ("head_dim", "attention_head_size"):
        value = getattr(holder, attr, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    config = getattr(holder, "config", None)
    if config is None:
        return None
    value = getattr(config, "head_dim", None)
    if isinstance(value, int) and value > 0:
        return value
    hidden = next(
        (
            getattr(config, a)
            for a in ("hidden_size", "dim", "n_embd", "d_model")
            if isinstance(getattr(config, a, None), int)
        ),
        None,
    )
    heads = next(
        (
            getattr(config, a)
            for a in ("num_attention_heads", "n_heads", "n_head", "num_heads")
            if isinstance(getattr(config, a, None), int)
        ),
        None,
    )
    return hidden // heads if hidden and heads and hidden % heads == 0 else None


def _linear_layout(module: nn.Module) -> Optional[AttentionLayout]:
    for family, paths, out_path, call_path in _PATTERNS:
        linears = [_get(module, p) for p in paths]
        output = _get(module, out_path)
        if not all(isinstance(m, nn.Linear) for m in linears) or not isinstance(output, nn.Linear):
            continue
        holder = _get(module, call_path) if call_path else module
        d = _head_dim(holder) if holder is not None else None
        q, k, v = (m.out_features for m in linears)
        if d is None or q % d or k % d or k != v or output.in_features != q:
            continue
        H, G = q // d, k // d
        if G == 0 or H % G:
            continue
        inputs = tuple(
            ProjectionSlice(role, p, m, 0, m.out_features, H if role == "query" else G)
            for role, p, m in zip(_ROLES, paths, linears)
        )
        return AttentionLayout(family, module, inputs, out_path, output, call_path, H, G, d)
    return None


def _gpt2_layout(module: nn.Module) -> Optional[AttentionLayout]:
    c_attn, c_proj, q_attn = (getattr(module, a, None) for a in ("c_attn", "c_proj", "q_attn"))
    if not isinstance(c_attn, Conv1D) or not isinstance(c_proj, Conv1D):
        return None
    d = _head_dim(module)
    E = _in_features(c_proj)
    cross = isinstance(q_attn, Conv1D) and getattr(module, "is_cross_attention", False)
    fused = _out_features(c_attn)
    if d is None or E % d or fused != (2 if cross else 3) * E:
        return None
    H = E // d
    if cross:
        inputs = (
            ProjectionSlice("query", "q_attn", q_attn, 0, E, H),
            ProjectionSlice("key", "c_attn", c_attn, 0, E, H),
            ProjectionSlice("value", "c_attn", c_attn, E, E, H),
        )
    else:
        inputs = tuple(ProjectionSlice(role, "c_attn", c_attn, k * E, E, H) for k, role in enumerate(_ROLES))
    return AttentionLayout("gpt2", module, inputs, "c_proj", c_proj, "", H, H, d)


def find_attention_layout(module: nn.Module) -> Optional[AttentionLayout]:
    """The :class:`AttentionLayout` of a ``transformers`` attention module, or ``None`` for any other module."""
    if not type(module).__module__.startswith("transformers."):
        return None
    return _linear_layout(module) or _gpt2_layout(module)


def attention_layers(model: nn.Module) -> Dict[str, AttentionLayout]:
    """Every recognised attention module of ``model``, by qualified name, in module order."""
    out: Dict[str, AttentionLayout] = {}
    for name, module in model.named_modules():
        layout = find_attention_layout(module)
        if layout is not None:
            out[name] = layout
    return out


register_layout_finder(find_attention_layout)  # the one registry: samplers and diagnostics read it
