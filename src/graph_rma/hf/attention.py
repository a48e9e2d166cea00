r"""DropAttention inside HuggingFace models: a registered attention function and :func:`use_drop_attention`.

``transformers`` 5 computes attention in most families through a function looked up by name,
``ALL_ATTENTION_FUNCTIONS.get_interface(config._attn_implementation, eager_attention_forward)``, called as
``fn(module, query, key, value, attention_mask, *, scaling, dropout, **kwargs)`` with ``query`` ``[B, H, L, d]``,
``key``/``value`` ``[B, G, S, d]`` and returning ``(output [B, L, H, d], weights [B, H, L, S] or None)``.
:func:`drop_attention_forward` is registered under :data:`ATTENTION_NAME` together with ``transformers``' eager mask
function (``AttentionMaskInterface``), so that the padding / causal mask reaches it as the eager additive mask. It
computes what the families' eager functions compute,

.. math::
    A = \mathrm{softmax}\!\left(s\, Q K^\top + M\right), \qquad O = \mathrm{DropAttention}(A)\, V,

(:math:`s` the module's ``scaling``, :math:`M` the additive mask, key/value heads repeated :math:`H/G` times for
grouped-query attention, the softmax in float32) with the attention dropout replaced by the module's
:class:`graph_rma.DropAttention` (the package's dense DropAttention on ``[B, H, L, S]``: element or column mode,
windows, both rescalings; see :mod:`graph_rma.dropattention`). Contract:

* masked positions have weight 0 before and after the drop (the mask is kept exactly);
* ``module.training`` false, or a rate of 0: ``A`` unchanged, so outputs equal the eager implementation's
  (bit-identical in float32, where the arithmetic is the same);
* the weights returned (``output_attentions=True``) are the weights after DropAttention;
* ``DropAttention()`` without ``p`` takes the layer's own attention dropout rate (the ``dropout`` the module passes
  in training: BERT's ``attention_probs_dropout_prob``, Llama's ``attention_dropout``, ...); an explicit ``p``
  replaces it (a warning names both when they differ).

Families that compute attention in their own code (DeBERTa, MPNet, Longformer, BigBird, XLNet, ...) get one
``GraphRMAError`` naming the model class and its ``model_type``.
"""

from __future__ import annotations

import copy
import inspect
import warnings
from typing import Any, Dict, List, Optional, Tuple

import torch
from torch import Tensor, nn
from transformers import PreTrainedModel
from transformers.masking_utils import AttentionMaskInterface, eager_mask
from transformers.modeling_utils import AttentionInterface

from .._errors import GraphRMAError
from ..dropattention import DropAttention, drop_attention_dense
from ..variants import register_drop_attention_installer

__all__ = ["ATTENTION_NAME", "attention_function_modules", "drop_attention_forward", "use_drop_attention"]

#: The ``attn_implementation`` under which :func:`drop_attention_forward` (and the eager mask) are registered.
ATTENTION_NAME = "graph_rma_drop_attention"

_PREVIOUS = "_graph_rma_previous_attn_implementation"  # set on each switched PreTrainedModel
_OWN_CONFIG = "_graph_rma_own_config"  # the private config copy a switched PreTrainedModel got
_UNSUPPORTED_KWARGS = ("softcap", "s_aux")


def drop_attention_forward(
    module: nn.Module,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Optional[Tensor],
    scaling: Optional[float] = None,
    dropout: float = 0.0,
    **kwargs: Any,
) -> Tuple[Tensor, Tensor]:
    """The attention function registered as :data:`ATTENTION_NAME` (see the module docstring).

    Args:
        module: the attention module calling it; its ``drop_attention`` (installed by :func:`use_drop_attention`)
            drops the weights while ``module.training``.
        query: ``[B, H, L, d]``.
        key: ``[B, G, S, d]`` (``H`` a multiple of ``G``: grouped-query attention repeats each key head ``H/G``
            times).
        value: ``[B, G, S, d]``.
        attention_mask: the additive eager mask ``[B, 1 or H, L, S]`` or ``None``.
        scaling: the score scale (default ``d ** -0.5``).
        dropout: the layer's attention dropout rate (0 outside training), used when the DropAttention has no ``p``.
        **kwargs: ``position_bias`` is added to the scores (as ``sdpa`` does); ``softcap`` and ``s_aux`` (attention
            sinks) raise a ``GraphRMAError``; others are ignored, as the eager functions ignore them.

    Returns:
        tuple: ``(output [B, L, H, d], weights [B, H, L, S])``, the weights after DropAttention.
    """
    drop = getattr(module, "drop_attention", None)
    if not isinstance(drop, DropAttention):
        raise GraphRMAError(
            f"{type(module).__name__} runs attn_implementation={ATTENTION_NAME!r} without a DropAttention "
            f"installed; call graph_rma.hf.use_drop_attention(model, graph_rma.DropAttention(...))"
        )
    unsupported = [k for k in _UNSUPPORTED_KWARGS if kwargs.get(k) is not None]
    if unsupported:
        raise GraphRMAError(
            f"{type(module).__name__}: DropAttention's attention function does not support "
            f"{', '.join(unsupported)} (this family's eager attention does more than softmax(QK^T)V)"
        )
    if scaling is None:
        scaling = query.size(-1) ** -0.5
    groups = query.size(1) // key.size(1)
    if groups > 1:  # grouped-query attention: key/value head g serves query heads g*groups ... (g+1)*groups-1
        key, value = key.repeat_interleave(groups, dim=1), value.repeat_interleave(groups, dim=1)
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        scores = scores + attention_mask
    if kwargs.get("position_bias") is not None:
        scores = scores + kwargs["position_bias"]
    weights = nn.functional.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    if module.training:
        p = drop.rate(dropout) if drop.p is None else drop.p
        weights = drop_attention_dense(weights, p, drop.window, drop.mode, drop.rescale, drop.training)
    output = torch.matmul(weights, value).transpose(1, 2).contiguous()
    return output, weights


# Both registrations write the interfaces' class-wide mappings; transformers builds no mask at all for an
# implementation missing from the mask mapping (masking_utils._preprocess_mask_arguments), hence the second one.
AttentionInterface.register(ATTENTION_NAME, drop_attention_forward)
AttentionMaskInterface.register(ATTENTION_NAME, eager_mask)


_CALLS: Dict[type, bool] = {}


def _calls_interface(cls: type) -> bool:
    """Whether ``cls.forward`` looks its attention function up in ``ALL_ATTENTION_FUNCTIONS`` (cached per class)."""
    if cls not in _CALLS:
        try:
            _CALLS[cls] = "ALL_ATTENTION_FUNCTIONS" in inspect.getsource(cls.forward)
        except (OSError, TypeError):
            _CALLS[cls] = False
    return _CALLS[cls]


def _recorded_attention_classes(model: PreTrainedModel) -> set:
    """The classes ``model`` records attention weights from (``_can_record_outputs``)."""
    out = set()
    for key, spec in (getattr(model, "_can_record_outputs", None) or {}).items():
        if "attention" not in key:
            continue
        for item in spec if isinstance(spec, (list, tuple)) else [spec]:
            target = item if isinstance(item, type) else getattr(item, "target_class", None)
            if isinstance(target, type):
                out.add(target)
    return out


def _pretrained_roots(model: nn.Module) -> List[PreTrainedModel]:
    """The outermost ``PreTrainedModel`` modules of ``model`` (the model itself when it is one)."""
    roots: List[PreTrainedModel] = []
    seen: List[str] = []
    for name, m in model.named_modules():
        if isinstance(m, PreTrainedModel) and not any(s == "" or name.startswith(s + ".") for s in seen):
            seen.append(name)
            roots.append(m)
    return roots


def attention_function_modules(model: nn.Module) -> Dict[str, nn.Module]:
    """The modules of ``model`` that call ``transformers``' attention function, by qualified name.

    Raises a ``GraphRMAError`` naming the family when ``model`` holds no ``transformers`` model, or one that does not
    compute attention through the ``AttentionInterface``.
    """
    roots = _pretrained_roots(model)
    if not roots:
        raise GraphRMAError(f"model: {type(model).__name__} holds no transformers PreTrainedModel")
    for root in roots:
        for sub in root.modules():
            check = getattr(type(sub), "_can_set_attn_implementation", None)  # transformers' own test, 5.x
            if isinstance(sub, PreTrainedModel) and callable(check) and not check():
                raise GraphRMAError(
                    f"model: {type(sub).__name__} (model_type {getattr(sub.config, 'model_type', '?')!r}) computes "
                    f"attention in its own code, not through transformers' AttentionInterface, so DropAttention "
                    f"cannot be installed in it (families that use the interface include BERT, RoBERTa, ELECTRA, "
                    f"ALBERT, DistilBERT, ViT, Llama, Mistral, Qwen2, GPT-2, BART)"
                )
    recorded = set().union(*(_recorded_attention_classes(r) for r in roots))
    found = {
        name: m
        for name, m in model.named_modules()
        if type(m).__module__.startswith("transformers.") and (type(m) in recorded or _calls_interface(type(m)))
    }
    if not found:
        names = ", ".join(sorted({type(r).__name__ for r in roots}))
        raise GraphRMAError(f"model: no module of {names} calls transformers' attention function (AttentionInterface)")
    return found


def _layer_rate(module: nn.Module) -> Optional[float]:
    config = getattr(module, "config", None)
    for attr in ("attention_probs_dropout_prob", "attention_dropout", "attn_pdrop"):
        value = getattr(config, attr, None)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None


def _unsupported_extras(modules: Dict[str, nn.Module]) -> List[str]:
    """What the modules' eager attention does beyond ``softmax(s QK^T + M) V`` that :func:`drop_attention_forward`
    cannot do: logit soft-capping (Gemma 2) or attention sinks (``s_aux``)."""
    found = []
    for m in modules.values():
        cap = getattr(m, "attn_logit_softcapping", getattr(getattr(m, "config", None), "attn_logit_softcapping", None))
        if cap is not None and "attention logit soft-capping" not in found:
            found.append("attention logit soft-capping")
        if isinstance(getattr(m, "sinks", None), Tensor) and "attention sinks" not in found:
            found.append("attention sinks")
    return found


def _own_configs(root: PreTrainedModel) -> None:
    """Give ``root`` and its modules a private copy of their configuration (sub-configurations included), so that
    switching the attention implementation never changes a config object the user still holds (a model built from
    a config keeps that very object, possibly shared with other models)."""
    if root.__dict__.get(_OWN_CONFIG) is root.config:
        return
    memo: Dict[int, Any] = {}
    mine = copy.deepcopy(root.config, memo)
    for m in root.modules():
        config = m.__dict__.get("config")
        if config is not None and id(config) in memo:
            m.config = memo[id(config)]
    root.__dict__[_OWN_CONFIG] = mine


def use_drop_attention(model: nn.Module, drop_attention: Optional[DropAttention]) -> List[DropAttention]:
    """Make every attention module of a HuggingFace model drop attention weights with ``drop_attention``.

    Each module that calls the attention function gets its own copy as ``module.drop_attention`` (no parameters,
    so the ``state_dict`` is unchanged; it follows ``train()``/``eval()``), and each outermost ``PreTrainedModel``
    switches to ``attn_implementation=`` :data:`ATTENTION_NAME` (its sub-models follow) on a private copy of its
    configuration: the config object the model was built from (which other models may share) is never changed, so
    ``model.config`` is a copy afterwards. ``drop_attention=None`` removes the copies and restores the
    implementation in use before.

    Args:
        model: a ``transformers`` model (or a module holding one) whose family uses the ``AttentionInterface``.
        drop_attention (graph_rma.DropAttention or None): the DropAttention to copy into every attention module.

    Returns:
        The installed copies, in module order (empty when removing).

    Raises:
        GraphRMAError: ``model`` is not a module or holds no ``transformers`` model, its family does not use the
            interface (the message names it), or its attention does more than the function computes (logit
            soft-capping as in Gemma 2, attention sinks).
    """
    if not isinstance(model, nn.Module):
        raise GraphRMAError(f"model: expected a transformers model (a torch.nn.Module), got {type(model).__name__}")
    if drop_attention is not None and not isinstance(drop_attention, DropAttention):
        raise GraphRMAError(
            f"drop_attention: expected a graph_rma.DropAttention or None, got {type(drop_attention).__name__}"
        )
    modules = attention_function_modules(model)
    roots = _pretrained_roots(model)
    if drop_attention is None:
        for m in modules.values():
            if isinstance(getattr(m, "drop_attention", None), DropAttention):
                del m.drop_attention
        for root in roots:
            previous = root.__dict__.pop(_PREVIOUS, None)
            if previous is not None:
                root.set_attn_implementation(previous)
        return []
    extras = _unsupported_extras(modules)
    if extras:
        names = ", ".join(sorted({type(r).__name__ for r in roots}))
        raise GraphRMAError(
            f"model: {names} uses {' and '.join(extras)}, which DropAttention's attention function does not compute "
            f"(its eager attention does more than softmax(QK^T)V); DropAttention cannot be installed in it"
        )
    rates = {r for r in map(_layer_rate, modules.values()) if r}
    if drop_attention.p is not None and rates - {drop_attention.p}:
        layer = ", ".join(f"{r:g}" for r in sorted(rates))
        warnings.warn(
            f"use_drop_attention: DropAttention(p={drop_attention.p:g}) replaces the model's attention "
            f"dropout {layer} (rate in effect: {drop_attention.p:g}); pass DropAttention() without p to keep "
            f"{layer}",
            UserWarning,
            stacklevel=2,
        )
    installed = []
    for m in modules.values():
        copy_ = copy.deepcopy(drop_attention).train(m.training)
        m.drop_attention = copy_
        installed.append(copy_)
    for root in roots:
        if root.config._attn_implementation != ATTENTION_NAME:
            _own_configs(root)
            root.__dict__.setdefault(_PREVIOUS, root.config._attn_implementation)
            root.set_attn_implementation(ATTENTION_NAME)
    return installed


def _install(model: nn.Module, drop_attention: nn.Module) -> Optional[List[nn.Module]]:
    """:func:`graph_rma.apply_variant`'s installer: ``None`` when ``model`` holds no ``transformers`` model."""
    if not _pretrained_roots(model):
        return None
    return use_drop_attention(model, drop_attention)


register_drop_attention_installer(_install)
