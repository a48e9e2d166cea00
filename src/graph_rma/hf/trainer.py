r"""Repulsive heads with ``transformers.Trainer``: :class:`SamplerCallback`.

``Trainer``'s optimizer step runs, in this order: gradient clipping (``max_grad_norm``), the callbacks'
``on_pre_optimizer_step``, ``optimizer.step()``. The callback runs the sampler in ``on_pre_optimizer_step``, so each
particle group's gradient becomes :math:`-\epsilon\,\phi` right before the step, once per optimizer step (after
gradient accumulation), the position of :meth:`graph_rma.particles.ParticleSampler.attach` in the package's own
loops (clipping, then the sampler, then the step).

Under ``accelerate`` / DDP this is the package's rule for distributed training
(:mod:`graph_rma.engine.distributed`): gradients are all-reduced during the backward pass of the step's last
micro-batch, so the sampler sees the same averaged gradients on every rank, and SPOS/SGLD noise comes from the
sampler's own generator seeded alike on every rank (``seed``, default ``TrainingArguments.seed``), so the replicas stay
identical.

Parameters must be whole on every rank (DDP, not FSDP or DeepSpeed ZeRO-3, whose sharded parameters hold no
complete head).

A resumed run (``trainer.train(resume_from_checkpoint=...)``) sets the sampler's step count to the restored global
step (its warm-up counts optimizer steps); the SPOS/SGLD noise stream restarts from ``seed``.
"""

from __future__ import annotations

from typing import Optional, Union

from torch import nn
from transformers import TrainerCallback

from .._errors import GraphRMAError
from ..particles import ParticleSampler
from ..variants import Variant, VariantSetup, apply_variant, parse_variant

__all__ = ["SamplerCallback"]


class SamplerCallback(TrainerCallback):
    """A ``transformers.Trainer`` callback that trains repulsive heads (see the module docstring).

    Example::

        trainer = Trainer(model, args, train_dataset=..., callbacks=[SamplerCallback("svgd:alpha=0.1,eps=1")])

    Args:
        sampler (str, Variant or ParticleSampler): a variant spec (``"svgd:alpha=0.1"``, ``"spos:..."``,
            ``"sgld:..."``, optionally ``"+dropattn:p=0.1"``; :mod:`graph_rma.variants`), applied with
            :func:`graph_rma.apply_variant` to ``Trainer``'s model when training begins, or a sampler already built
            over that model. ``reg`` variants need a term in the loss and are refused.
        seed (int or None): the sampler's noise seed for a spec (default ``None``: ``TrainingArguments.seed``).

    Attributes:
        setup: the :class:`graph_rma.VariantSetup` once training began (``None`` for a given sampler).

    One callback serves one model: a callback whose sampler moves another model's heads (a sampler built over
    another model, or a callback reused for a second ``Trainer`` in a seed loop) is refused when training begins,
    with a :class:`graph_rma.GraphRMAError`; build one callback per ``Trainer``.
    """

    def __init__(self, sampler: Union[str, Variant, ParticleSampler], seed: Optional[int] = None) -> None:
        self.variant: Optional[Variant] = None
        self.sampler: Optional[ParticleSampler] = None
        if isinstance(sampler, ParticleSampler):
            self.sampler = sampler
        else:
            self.variant = parse_variant(sampler)
            if self.variant.reg is not None:
                raise GraphRMAError(
                    f"sampler: {self.variant.spec!r} adds a regularisation term to the loss, which a "
                    f"callback cannot do; compute VariantSetup.penalty in Trainer.compute_loss"
                )
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise GraphRMAError(f"seed: expected an int or None, got {seed!r}")
        self.seed = seed
        self.setup: Optional[VariantSetup] = None

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if self.variant is not None and self.setup is None:
            if model is None:
                raise GraphRMAError("model: Trainer passed no model to the callback")
            seed = args.seed if self.seed is None else self.seed
            self.setup = apply_variant(self.variant, model, optimizer=None, seed=seed)
            self.sampler = self.setup.sampler
        elif model is not None and self.sampler is not None:
            self._check_model(model)
        if self.sampler is not None and state.global_step > self.sampler.steps:
            self.sampler.steps = state.global_step  # resumed: the warm-up counts optimizer steps
        return control

    def _check_model(self, model: nn.Module) -> None:
        """Refuse a sampler whose heads are not ``model``'s (it would move another model and train this one plain)."""
        own = {id(p) for p in model.parameters()}
        if all(id(hp.param) in own for g in self.sampler.groups for hp in g.params):
            return
        if self.setup is not None:
            raise GraphRMAError(
                f"SamplerCallback({self.variant.spec!r}) already trains the model of an earlier Trainer; build one "
                f"SamplerCallback per Trainer (e.g. inside the seed loop)"
            )
        raise GraphRMAError(
            f"SamplerCallback: the {type(self.sampler).__name__} was built over another model than the Trainer's, "
            f"which would train plain; build it over the Trainer's model, or pass a spec such as 'svgd:alpha=0.1'"
        )

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        if self.sampler is not None:
            self.sampler.step()
        return control
