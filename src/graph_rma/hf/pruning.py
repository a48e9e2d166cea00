r"""Head pruning for HuggingFace models (``transformers`` 5 removed ``prune_heads``): :func:`prune_heads`.

Pruning head :math:`h` of a layer removes its rows :math:`[hd, (h+1)d)` from the query, key and value projections
(weights and biases) and the same columns from the output projection's weight. The output projection computes
:math:`\sum_{h'} o_{h'} W_{o,h'}^\top + b_o`, so the pruned layer's output equals the unpruned layer's with the
pruned heads' outputs :math:`o_h` set to zero (:func:`graph_rma.diagnostics.mask_heads`, Michel et al.'s
:math:`\xi_h = 0`), up to the order of floating-point summation.

**Grouped-query attention** (:math:`H` query heads, :math:`G < H` key/value heads, :math:`r = H/G` query heads per
key/value head): only whole groups can be pruned, i.e. query heads :math:`gr, \dots, (g+1)r - 1` together with
key/value head :math:`g`, so that every remaining query head still reads its own key/value head (the model repeats
each key/value head :math:`r` times). Pruning part of a group raises a ``ValueError`` naming the group.

The projections are shrunk in place (the ``nn.Linear`` modules stay, so hooks on them survive; each new weight keeps
its dtype, device and ``requires_grad``); head counts stored on the modules (``num_attention_heads``,
``all_head_size``, ``num_heads``, ``n_heads``, ``num_key_value_heads``) follow. The config is left alone (it
describes every layer). Build the optimizer and any sampler after pruning: they hold the old parameters.
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Mapping, Tuple, Union

import torch
from torch import nn

from .layouts import AttentionLayout, attention_layers

__all__ = ["prune_heads"]


def _shrink(linear: nn.Linear, index: torch.Tensor, dim: int) -> None:
    """Keep ``index`` along ``dim`` of ``linear``'s weight (``dim=0``: also the bias), in place."""
    with torch.no_grad():
        weight = linear.weight
        linear.weight = nn.Parameter(
            weight.index_select(dim, index.to(weight.device)).clone(), requires_grad=weight.requires_grad
        )
        if dim == 0 and linear.bias is not None:
            bias = linear.bias
            linear.bias = nn.Parameter(
                bias.index_select(0, index.to(bias.device)).clone(), requires_grad=bias.requires_grad
            )
    if dim == 0:
        linear.out_features = index.numel()
    else:
        linear.in_features = index.numel()


def _rows(keep: List[int], d: int) -> torch.Tensor:
    return torch.tensor([h * d + i for h in keep for i in range(d)], dtype=torch.long)


def _kept(name: str, layout: AttentionLayout, heads: List[int]) -> Tuple[List[int], List[int]]:
    """The query heads and key/value heads that remain after pruning ``heads`` (a ``ValueError`` if not allowed)."""
    H, G = layout.heads, layout.kv_heads
    if layout.family == "gpt2":
        raise ValueError(
            f"heads: {name} ({type(layout.module).__name__}) fuses its projections (c_attn); pruning "
            f"it is not supported"
        )
    bad = [h for h in heads if not 0 <= h < H]
    if bad:
        raise ValueError(f"heads: {name} has {H} heads (0 to {H - 1}), got {bad}")
    if len(heads) == H:
        raise ValueError(f"heads: pruning all {H} heads of {name} would leave an empty layer; keep at least one")
    r = H // G
    groups = sorted({h // r for h in heads})
    partial = [g for g in groups if any(h not in heads for h in range(g * r, (g + 1) * r))]
    if partial:
        g = partial[0]
        raise ValueError(
            f"heads: {name} uses grouped-query attention ({H} query heads share {G} key/value heads, "
            f"{r} each): prune whole groups; query heads {list(range(g * r, (g + 1) * r))} share "
            f"key/value head {g}"
        )
    return [h for h in range(H) if h not in heads], [g for g in range(G) if g not in groups]


def _prune_layer(layout: AttentionLayout, keep_q: List[int], keep_kv: List[int]) -> None:
    d = layout.head_dim
    for s in layout.inputs:
        _shrink(s.linear, _rows(keep_q if s.role == "query" else keep_kv, d), 0)
    _shrink(layout.output, _rows(keep_q, d), 1)
    holders = [layout.module] + ([layout.attention] if layout.attention is not layout.module else [])
    for holder in holders:
        for attr, value in (
            ("num_attention_heads", len(keep_q)),
            ("num_heads", len(keep_q)),
            ("n_heads", len(keep_q)),
            ("all_head_size", len(keep_q) * d),
            ("num_key_value_heads", len(keep_kv)),
        ):
            if isinstance(getattr(holder, attr, None), int) and not isinstance(getattr(holder, attr), bool):
                setattr(holder, attr, value)


def prune_heads(model: nn.Module, heads: Mapping[Union[int, str], Iterable[int]]) -> Dict[str, List[int]]:
    """Remove attention heads from a HuggingFace model by shrinking the projections (see the module docstring).

    Example::

        prune_heads(model, {0: [1, 2], "bert.encoder.layer.3.attention": [0]})

    Args:
        model: a ``transformers`` model (or a module holding one).
        heads: layer -> head indices to remove. A layer is a qualified module name (the keys of
            :func:`graph_rma.hf.attention_layers`) or an ``int``, the position of the layer among them (module
            order: the encoder's ``layer.0.attention`` is ``0``). Head indices are the layer's current ones.

    Returns:
        The heads removed, by layer name.

    Raises:
        ValueError: an unknown layer, a head index out of range, every head of a layer, part of a key/value group
            (grouped-query attention) or a fused projection (GPT-2).
    """
    layers = attention_layers(model)
    names = list(layers)
    plan: Dict[str, List[int]] = {}
    for key, listed in heads.items():
        if isinstance(key, int) and not isinstance(key, bool):
            if not 0 <= key < len(names):
                raise ValueError(f"heads: layer {key} does not exist; the model has {len(names)} attention layers")
            name = names[key]
        elif isinstance(key, str) and key in layers:
            name = key
        else:
            shown = ", ".join(repr(n) for n in names[:3]) + (", ..." if len(names) > 3 else "")
            raise ValueError(
                f"heads: {key!r} is not an attention layer of {type(model).__name__} (layers: {shown}, "
                f"or their positions 0 to {len(names) - 1})"
            )
        plan[name] = sorted(set(plan.get(name, [])) | {int(h) for h in listed})
    kept = {name: _kept(name, layers[name], listed) for name, listed in plan.items() if listed}  # check all first
    for name, (keep_q, keep_kv) in kept.items():
        _prune_layer(layers[name], keep_q, keep_kv)
    return {name: listed for name, listed in plan.items() if listed}
