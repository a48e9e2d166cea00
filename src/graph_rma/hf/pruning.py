r"""Head pruning for HuggingFace models (``transformers`` 5 removed ``prune_heads``): :func:`prune_heads`, and
loading a pruned model back: :func:`from_pretrained`.

Pruning head :math:`h` of a layer removes its rows :math:`[hd, (h+1)d)` from the query, key and value projections
(weights and biases) and the same columns from the output projection's weight. The output projection computes
:math:`\sum_{h'} o_{h'} W_{o,h'}^\top + b_o`, so the pruned layer's output equals the unpruned layer's with the
pruned heads' outputs :math:`o_h` set to zero (:func:`graph_rma.diagnostics.mask_heads`, Michel et al.'s
:math:`\xi_h = 0`), up to the order of floating-point summation.

**Indexes** are those of the original (unpruned) layer, as in ``transformers`` 4: the pruned heads are remembered in
the model's config as ``config.pruned_heads`` (layer position -> original head indexes, saved by
``save_pretrained``), so pruning ``{0: [1]}`` and then ``{0: [2]}`` removes original heads 1 and 2, and a head
already pruned is skipped. The model gets its own copy of its config the first time it is pruned: a config object
the user built other models from is never changed.

**Grouped-query attention** (:math:`H` query heads, :math:`G < H` key/value heads, :math:`r = H/G` query heads per
key/value head): only whole groups can be pruned, i.e. query heads :math:`gr, \dots, (g+1)r - 1` together with
key/value head :math:`g`, so that every remaining query head still reads its own key/value head (the model repeats
each key/value head :math:`r` times). Pruning part of a group is refused, naming the group.

The projections are shrunk in place (the ``nn.Linear`` modules stay, so hooks on them survive; each new weight keeps
its dtype, device and ``requires_grad``); head counts stored on the modules (``num_attention_heads``,
``all_head_size``, ``num_heads``, ``n_heads``, ``num_key_value_heads``) follow. The new weights are new
``Parameter`` objects: an optimizer passed as ``optimizer`` gets them in place of the old ones (with its state
sliced alike); a sampler attached to an optimizer (:meth:`graph_rma.particles.ParticleSampler.attach`) holds the
old ones and its head counts, so pruning is refused until it is detached (build it again after pruning).

``save_pretrained`` writes the pruned weights and ``config.pruned_heads``; ``transformers``' own
``from_pretrained`` no longer reads that field and refuses the smaller weights, so load a pruned model with
:func:`from_pretrained` (it builds the model from the config, prunes the recorded heads and loads the weights).
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Mapping
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from torch import nn
from transformers import PreTrainedModel

from .._errors import GraphRMAError
from ..particles.samplers import _CLAIMS
from .layouts import AttentionLayout, attention_layers

__all__ = ["from_pretrained", "prune_heads"]

_MODULE_RECORD = "_graph_rma_pruned_heads"  # original indexes pruned, on a layer outside any PreTrainedModel
_Swap = Tuple[nn.Parameter, nn.Parameter, int, torch.Tensor]  # old, new, dim, kept index


def _rows(keep: List[int], d: int) -> torch.Tensor:
    return torch.tensor([h * d + i for h in keep for i in range(d)], dtype=torch.long)


def _shrink(linear: nn.Linear, index: torch.Tensor, dim: int) -> List[_Swap]:
    """Keep ``index`` along ``dim`` of ``linear``'s weight (``dim=0``: also the bias), in place."""
    swaps = []
    names = ("weight", "bias") if dim == 0 and linear.bias is not None else ("weight",)
    with torch.no_grad():
        for attr in names:
            old = getattr(linear, attr)
            at = dim if attr == "weight" else 0
            new = nn.Parameter(old.index_select(at, index.to(old.device)).clone(), requires_grad=old.requires_grad)
            setattr(linear, attr, new)
            swaps.append((old, new, at, index))
    if dim == 0:
        linear.out_features = index.numel()
    else:
        linear.in_features = index.numel()
    return swaps


def _head_index(value: object, where: str) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, torch.Tensor))
        or (isinstance(value, torch.Tensor) and (value.numel() != 1 or value.is_floating_point()))
    ):
        raise GraphRMAError(f"heads: {where} lists {value!r}; head indexes are non-negative ints")
    index = int(value)
    if index < 0:
        raise GraphRMAError(f"heads: {where} lists {index}; head indexes are non-negative ints (0 is the first)")
    return index


def _layer_name(model: nn.Module, names: List[str], key: object) -> str:
    if not names:
        config = getattr(model, "config", None)
        family = f" (model_type {getattr(config, 'model_type', '?')!r})" if config is not None else ""
        raise GraphRMAError(
            f"heads: {type(model).__name__}{family} has no attention module whose projections graph_rma.hf "
            f"recognises (BERT-, ALBERT-, DistilBERT-, Llama-, BART- or GPT-2-like), so prune_heads cannot prune it"
        )
    if isinstance(key, int) and not isinstance(key, bool):
        if not 0 <= key < len(names):
            raise GraphRMAError(
                f"heads: layer {key} does not exist; {type(model).__name__} has {len(names)} attention layers "
                f"(0 to {len(names) - 1})"
            )
        return names[key]
    if isinstance(key, str) and key in names:
        return key
    shown = ", ".join(repr(n) for n in names[:3]) + (", ..." if len(names) > 3 else "")
    raise GraphRMAError(
        f"heads: {key!r} is not an attention layer of {type(model).__name__} (layers: {shown}, "
        f"or their positions 0 to {len(names) - 1})"
    )


def _plan(model: nn.Module, names: List[str], heads: object) -> Dict[str, List[int]]:
    """``heads`` read as layer name -> sorted original head indexes (every key and index checked)."""
    if not isinstance(heads, Mapping):
        raise GraphRMAError(
            f"heads: expected a mapping layer -> head indexes, e.g. {{0: [1, 3]}}, got {type(heads).__name__} {heads!r}"
        )
    plan: Dict[str, List[int]] = {}
    for key, listed in heads.items():
        name = _layer_name(model, names, key)
        if isinstance(listed, (str, bytes)) or not isinstance(listed, (Sequence, set, frozenset, torch.Tensor)):
            raise GraphRMAError(
                f"heads: layer {key!r} maps to {listed!r}; give a list of head indexes, e.g. {{{key!r}: [1, 3]}}"
            )
        indexes = {_head_index(h, f"layer {key!r}") for h in listed}
        plan[name] = sorted(set(plan.get(name, [])) | indexes)
    return plan


def _owner(model: nn.Module, name: str) -> Tuple[Optional[nn.Module], int]:
    """The outermost ``PreTrainedModel`` holding layer ``name`` and the layer's position among its layers."""
    for prefix, module in model.named_modules():
        if isinstance(module, PreTrainedModel) and (prefix == "" or name.startswith(prefix + ".")):
            inner = name[len(prefix) + 1 :] if prefix else name
            return module, list(attention_layers(module)).index(inner)
    return None, -1


def _recorded(config: object) -> Dict[int, List[int]]:
    """``config.pruned_heads`` with int keys (a saved config has string keys)."""
    raw = getattr(config, "pruned_heads", None) or {}
    if not isinstance(raw, Mapping):
        raise GraphRMAError(f"config.pruned_heads: expected a mapping layer -> head indexes, got {raw!r}")
    return {int(k): sorted(int(h) for h in v) for k, v in raw.items()}


def _already(model: nn.Module, name: str, layout: AttentionLayout) -> List[int]:
    owner, position = _owner(model, name)
    if owner is None:
        return sorted(layout.module.__dict__.get(_MODULE_RECORD, []))
    return _recorded(owner.config).get(position, [])


def _kept(name: str, layout: AttentionLayout, asked: List[int], gone: List[int]) -> Tuple[List[int], List[int]]:
    """The current query and key/value heads that remain after pruning original heads ``asked`` of a layer whose
    original heads ``gone`` are pruned already (refused when not allowed)."""
    if layout.family == "gpt2":
        raise GraphRMAError(
            f"heads: {name} ({type(layout.module).__name__}) fuses its projections (c_attn); pruning it is not "
            f"supported"
        )
    H0, r = layout.heads + len(gone), layout.heads // layout.kv_heads
    bad = [h for h in asked if h >= H0]
    if bad:
        raise GraphRMAError(f"heads: {name} has {H0} heads (original indexes 0 to {H0 - 1}), got {bad}")
    new = [h for h in asked if h not in gone]
    after = set(gone) | set(new)
    if len(after) == H0:
        raise GraphRMAError(f"heads: pruning all {H0} heads of {name} would leave an empty layer; keep at least one")
    partial = sorted({h // r for h in new if any(q not in after for q in range(h // r * r, (h // r + 1) * r))})
    if partial:
        g = partial[0]
        raise GraphRMAError(
            f"heads: {name} uses grouped-query attention ({r} query heads share each key/value head): prune "
            f"whole groups; query heads {list(range(g * r, (g + 1) * r))} share key/value head {g}"
        )
    alive = [h for h in range(H0) if h not in gone]  # current index -> original index
    alive_groups = sorted({h // r for h in alive})
    keep_q = [i for i, h in enumerate(alive) if h not in new]
    keep_kv = [i for i, g in enumerate(alive_groups) if g * r not in new]
    return keep_q, keep_kv


def _prune_layer(layout: AttentionLayout, keep_q: List[int], keep_kv: List[int]) -> List[_Swap]:
    d = layout.head_dim
    swaps = []
    for s in layout.inputs:
        swaps += _shrink(s.linear, _rows(keep_q if s.role == "query" else keep_kv, d), 0)
    swaps += _shrink(layout.output, _rows(keep_q, d), 1)
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
    return swaps


def _check_holders(name: str, layout: AttentionLayout, optimizer: Optional[torch.optim.Optimizer]) -> None:
    """Refuse when an attached sampler holds the layer's parameters, or ``optimizer`` has state it cannot slice."""
    params = [p for s in layout.inputs for p in s.linear.parameters()] + [layout.output.weight]
    for p in params:
        ref = _CLAIMS.get(p)
        sampler = ref() if ref is not None else None
        if sampler is not None and sampler._attachments:
            raise GraphRMAError(
                f"heads: {name}'s parameters are held by an attached {type(sampler).__name__}, which would keep "
                f"sampling the old heads; prune before building the sampler (or sampler.detach(), prune, then "
                f"build it again)"
            )
        state = optimizer.state.get(p, {}) if optimizer is not None else {}
        for key, value in state.items():
            if isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape != p.shape:
                raise GraphRMAError(
                    f"optimizer: its state {key!r} of {name} has shape {tuple(value.shape)}, not the parameter's "
                    f"{tuple(p.shape)}, so it cannot be pruned alike; build the optimizer after pruning"
                )


def _update_optimizer(optimizer: torch.optim.Optimizer, swaps: List[_Swap]) -> None:
    """Put each new parameter in place of the old one in ``optimizer`` (its state sliced alike)."""
    for old, new, dim, index in swaps:
        for group in optimizer.param_groups:
            group["params"] = [new if p is old else p for p in group["params"]]
        state = optimizer.state.pop(old, None)
        if state is not None:
            optimizer.state[new] = {
                k: v.index_select(dim, index.to(v.device)).clone() if isinstance(v, torch.Tensor) and v.dim() > 0 else v
                for k, v in state.items()
            }


def _own_config(owner: nn.Module) -> object:
    """Give ``owner`` (and its submodules that share the object) a copy of its config; returns the copy."""
    old = owner.config
    new = copy.deepcopy(old)
    for module in owner.modules():
        if module.__dict__.get("config") is old:
            module.config = new
    return new


def _record(model: nn.Module, done: Dict[str, List[int]], layers: Dict[str, AttentionLayout]) -> None:
    """Add the newly pruned original heads to ``config.pruned_heads`` (or to the layer, outside any model)."""
    owners: Dict[int, Tuple[nn.Module, Dict[int, List[int]]]] = {}
    for name, heads in done.items():
        owner, position = _owner(model, name)
        if owner is None:
            module = layers[name].module
            module.__dict__[_MODULE_RECORD] = sorted(set(module.__dict__.get(_MODULE_RECORD, [])) | set(heads))
            continue
        _, record = owners.setdefault(id(owner), (owner, _recorded(owner.config)))
        record[position] = sorted(set(record.get(position, [])) | set(heads))
    for owner, record in owners.values():
        _own_config(owner).pruned_heads = {k: record[k] for k in sorted(record)}


def prune_heads(
    model: nn.Module, heads: Mapping, optimizer: Optional[torch.optim.Optimizer] = None
) -> Dict[str, List[int]]:
    """Remove attention heads from a HuggingFace model by shrinking the projections (see the module docstring).

    Example::

        prune_heads(model, {0: [1, 2], "bert.encoder.layer.3.attention": [0]})
        optimizer = torch.optim.AdamW(model.parameters())  # after pruning (or pass optimizer=)

    Args:
        model (nn.Module): a ``transformers`` model (or a module holding one).
        heads (Mapping): layer -> head indexes to remove. A layer is a qualified module name (the keys of
            :func:`graph_rma.hf.attention_layers`) or an ``int``, the position of the layer among them (module
            order: the encoder's ``layer.0.attention`` is ``0``). Head indexes (ints) are those of the original
            layer; heads already pruned are skipped.
        optimizer (torch.optim.Optimizer, optional): an optimizer holding the model's parameters; the pruned
            parameters replace the old ones in it, with their state (e.g. Adam's moments) sliced alike.
            (default: ``None``)

    Returns:
        The heads removed by this call (original indexes), by layer name.

    Raises:
        GraphRMAError: ``heads`` not a mapping of lists of non-negative ints, an unknown layer, a head index out of
            range, every head of a layer, part of a key/value group (grouped-query attention), a fused projection
            (GPT-2), a layer whose parameters an attached sampler holds, or optimizer state of another shape.
    """
    layers = attention_layers(model)
    plan = _plan(model, list(layers), heads)
    todo = {}
    for name, asked in plan.items():  # check every layer before changing any
        gone = _already(model, name, layers[name])
        keep = _kept(name, layers[name], asked, gone)
        _check_holders(name, layers[name], optimizer)
        if len(keep[0]) < layers[name].heads:
            todo[name] = (keep, [h for h in asked if h not in gone])
    swaps: List[_Swap] = []
    for name, ((keep_q, keep_kv), _) in todo.items():
        swaps += _prune_layer(layers[name], keep_q, keep_kv)
    if optimizer is not None:
        _update_optimizer(optimizer, swaps)
    done = {name: new for name, (_, new) in todo.items()}
    _record(model, done, layers)
    return done


def _saved_weights(path: str) -> Dict[str, torch.Tensor]:
    """The tensors ``save_pretrained`` wrote in folder ``path`` (safetensors, sharded or not; else PyTorch)."""
    from safetensors.torch import load_file

    index = os.path.join(path, "model.safetensors.index.json")
    if os.path.isfile(index):
        with open(index, encoding="utf-8") as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
        return {k: v for name in files for k, v in load_file(os.path.join(path, name)).items()}
    single = os.path.join(path, "model.safetensors")
    if os.path.isfile(single):
        return load_file(single)
    legacy = os.path.join(path, "pytorch_model.bin")
    if os.path.isfile(legacy):
        return torch.load(legacy, map_location="cpu", weights_only=True)
    raise GraphRMAError(f"path: {path} holds no model.safetensors(.index.json) or pytorch_model.bin")


def _load_weights(model: nn.Module, state: Dict[str, torch.Tensor], path: str) -> None:
    missing, unexpected = model.load_state_dict(state, strict=False)
    by_id: Dict[int, List[str]] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        by_id.setdefault(id(p), []).append(name)
    tied = {n for names in by_id.values() if any(m in state for m in names) for n in names}
    missing = [k for k in missing if k not in tied]
    if missing or unexpected:
        what = f"lacks {missing[:3]}" if missing else f"has weights the model does not: {unexpected[:3]}"
        raise GraphRMAError(f"path: the checkpoint in {path} {what}; was it saved from {type(model).__name__}?")


def from_pretrained(model_class: type, path: str) -> nn.Module:
    """Load a model that was pruned with :func:`prune_heads` and saved with ``save_pretrained``.

    Builds ``model_class`` from the saved config, prunes the heads recorded in ``config.pruned_heads`` and loads the
    saved weights; a config without pruned heads is loaded by ``model_class.from_pretrained(path)`` itself.

    Example::

        prune_heads(model, {0: [1, 3]})
        model.save_pretrained("pruned")
        model = graph_rma.hf.from_pretrained(BertForSequenceClassification, "pruned")

    Args:
        model_class (type): a ``transformers`` model class (``BertForSequenceClassification``) or auto class
            (``AutoModelForCausalLM``).
        path (str): a folder written by ``save_pretrained`` (local; nothing is downloaded for a pruned model).

    Returns:
        The model in evaluation mode, as ``from_pretrained`` returns it.
    """
    from transformers import AutoConfig

    if not os.path.isdir(path):
        raise GraphRMAError(f"path: {path} is not a folder written by save_pretrained")
    config = AutoConfig.from_pretrained(path)
    pruned = _recorded(config)
    if not pruned:
        return model_class.from_pretrained(path)
    config = copy.deepcopy(config)
    del config.pruned_heads
    build = (
        model_class._from_config if isinstance(model_class, type) and issubclass(model_class, PreTrainedModel) else None
    )
    model = build(config) if build is not None else model_class.from_config(config)
    prune_heads(model, pruned)
    _load_weights(model, _saved_weights(path), path)
    return model.eval()
