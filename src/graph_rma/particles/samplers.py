r"""Samplers that turn head gradients into the particle update: :class:`ParticleSampler`, :class:`SVGD`, :class:`SPOS`,
:class:`SGLD` (an optimizer pre-hook, ``attach``/``detach``, ``state_dict``).

PyTorch's semantics are kept:

* A parameter with ``requires_grad=False`` is never touched (no ``.grad`` is created, so no optimizer moves it).
  A head whose slices are partly frozen is a particle made of its trainable slices only (checked at every step,
  so freezing after construction works too); a layer whose head slices are all frozen is skipped.
* Each gradient is transformed once per backward pass: :meth:`ParticleSampler.step` remembers the gradient
  tensors it wrote (and their version counters) and leaves them alone until a new backward pass (or any in-place
  change) touches them. One sampler attached to two optimizers therefore transforms each gradient once.
* Attaching a sampler twice to one optimizer, or attaching a second sampler whose particles share parameters with
  an attached one, raises a ``GraphRMAError``; :meth:`ParticleSampler.detach` undoes :meth:`ParticleSampler.attach`.

A step reads nothing from the device: its checks (finite gradients and heads, identical heads) and the step-limit
count are computed on the device and read when their values have reached the host (:mod:`._deferred`). On the CPU
that is at once: a non-finite gradient raises in the step that sees it, before any gradient is written. On CUDA it
is usually the next step (the step that saw it leaves that layer's loss gradients in place, and ``optimizer.step()``
applies them), at the latest :meth:`ParticleSampler.check` or :meth:`ParticleSampler.state_dict`, which wait for
the device.
"""

from __future__ import annotations

import hashlib
import warnings
import weakref
from typing import Dict, Iterable, List, Optional, Tuple

import torch
from torch import Tensor, nn
from torch.utils.weak import WeakIdKeyDictionary

from .._errors import GraphRMAError
from ._deferred import DeferredFlags
from .kernel import (
    Bandwidth,
    _check_alpha,
    _check_bandwidth,
    _check_flag,
    _check_positive,
    _spos_noise,
    _svgd,
    sgld_direction,
)
from .layouts import LayerSpec, ParticleGroup, find_particle_groups

# Parameters held by an attached sampler: parameter -> weak reference to the sampler.
_CLAIMS: WeakIdKeyDictionary = WeakIdKeyDictionary()


class _Attachment:
    """Handle returned by :meth:`ParticleSampler.attach`; ``remove()`` detaches the sampler from that optimizer."""

    def __init__(self, sampler: "ParticleSampler", optimizer: torch.optim.Optimizer, handle) -> None:
        self._sampler = weakref.ref(sampler)
        self._optimizer = weakref.ref(optimizer)
        self._handle = handle

    def remove(self) -> None:
        sampler, optimizer = self._sampler(), self._optimizer()
        if sampler is not None and optimizer is not None:
            sampler.detach(optimizer)
        else:
            self._handle.remove()


class ParticleSampler:
    r"""Base class: replaces each particle group's gradient by :math:`-\epsilon\,\phi` (see :meth:`direction`).

    Call :meth:`step` after ``loss.backward()`` (and after gradients are all-reduced in a distributed run), or
    :meth:`attach` it to an optimizer so that it runs before every ``optimizer.step()``.

    Arguments layers, roles, min_heads: which heads become particles (:func:`find_particle_groups`).

    Args:
        model: the model whose attention layers hold the heads.
        eps: step size :math:`\epsilon`; the gradient becomes ``-eps * phi``.
        seed: seed of the sampler's own noise generator (SPOS/SGLD). The same seed on every process gives the
            same noise on every process, so replicas of a distributed run stay identical.
        warmup: number of steps (backward passes) that keep the plain gradients before the particle update starts;
            :attr:`steps` counts them, and :meth:`state_dict` keeps the count for resumption.
        strict: a model with no multi-head attention layer to sample (after ``layers``/``min_heads``) is an error;
            ``False`` (for generic code) attaches a sampler that does nothing, with a warning.
    """

    def __init__(
        self,
        model: nn.Module,
        eps: float = 1.0,
        layers: LayerSpec = None,
        roles: Optional[Iterable[str]] = None,
        min_heads: int = 2,
        seed: int = 0,
        warmup: int = 0,
        strict: bool = True,
    ) -> None:
        _check_positive("eps", eps)
        if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
            raise GraphRMAError(f"warmup: expected a number of steps >= 0, got {warmup!r}")
        self.eps = float(eps)
        self.seed = int(seed)
        self.warmup = warmup
        self.steps = 0  # steps seen (backward passes whose gradients reached step()), warm-up included
        self.groups = find_particle_groups(model, layers=layers, roles=roles, min_heads=min_heads)
        if not self.groups:
            where = f" among layers={layers!r}" if layers is not None else ""
            if strict:
                raise GraphRMAError(
                    f"model: {type(model).__name__} holds no multi-head attention layer to sample (none "
                    f"with at least {min_heads} heads{where}): give the model {min_heads} or more heads (on the "
                    f"command line: --heads), or train it plain (variant ma); from Python, strict=False attaches a "
                    f"sampler that does nothing"
                )
            warnings.warn(
                f"{type(self).__name__}: the model has no multi-head attention layer to sample{where}; "
                f"step() does nothing"
            )
        self._generator: Optional[torch.Generator] = None
        self._generator_state: Optional[Tensor] = None
        self._attachments: Dict[int, Tuple[weakref.ref, object]] = {}  # id(optimizer) -> (optimizer ref, hook handle)
        self._written: Dict[int, List[Tuple[weakref.ref, int]]] = {}  # group index -> gradients written last step
        self._flags = DeferredFlags()  # the steps' checks, read when they reach the host
        self._limited: Optional[Tensor] = None  # the step limit's count on the device (SVGD/SPOS)
        self.limited_steps = 0

    @property
    def limited_steps(self) -> int:
        """The steps (one per particle group) at which the repulsion step limit acted (SVGD/SPOS). Counted on the
        device: reading it waits for the device."""
        return self._limited_steps + (int(self._limited) if self._limited is not None else 0)

    @limited_steps.setter
    def limited_steps(self, value: int) -> None:
        self._limited_steps, self._limited = int(value), None

    def _count_limited(self, limited: Optional[Tensor]) -> None:
        if limited is not None:
            self._limited = limited.long() if self._limited is None else self._limited + limited

    @property
    def generator(self) -> torch.Generator:
        if self._generator is None:
            device = self.groups[0].params[0].param.device if self.groups else torch.device("cpu")
            self._generator = torch.Generator(device=device)
            self._generator.manual_seed(self.seed)
            if self._generator_state is not None:
                _set_generator_state(self._generator, self._generator_state)
        return self._generator

    def direction(self, theta: Tensor, grad: Tensor) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def _direction_flagged(self, theta: Tensor, grad: Tensor) -> Tuple[Tensor, Optional[Tensor]]:
        """``(phi, theta_bad)``: the direction and, where the sampler checks its particles, a 0-d bool tensor on the
        device that is true when ``theta`` is not finite."""
        return self.direction(theta, grad), None

    @staticmethod
    def _trainable(group: ParticleGroup) -> Optional[ParticleGroup]:
        """``group`` restricted to the parameters with ``requires_grad`` (``None`` when none is left)."""
        params = [p for p in group.params if p.param.requires_grad]
        if len(params) == len(group.params):
            return group
        return ParticleGroup(group.name, group.module, group.num_heads, params) if params else None

    def _already_written(self, index: int, group: ParticleGroup) -> bool:
        written = self._written.get(index)
        if written is None or len(written) != len(group.params):
            return False
        for (ref, version), p in zip(written, group.params):
            g = p.param.grad
            if g is None or ref() is not g or g._version != version:
                return False
        return True

    def _check_particles(self, group: ParticleGroup, theta: Tensor) -> Optional[Tensor]:
        """Hook for subclasses: called with each group's particles before the direction is computed; returns a 0-d
        bool tensor on the device, true when the group has identical heads (reported by :meth:`_identical_heads`),
        or ``None``."""
        return None

    def _identical_heads(self, label: str) -> None:  # pragma: no cover - only samplers that check call it
        raise NotImplementedError

    @torch.no_grad()
    def step(self) -> None:
        """Replace every particle group's gradient by ``-eps * phi``.

        Frozen parameters (``requires_grad=False``) are left out. A gradient this method already transformed and
        that no backward pass has touched since is not transformed again. During the first ``warmup`` steps the
        gradients are left as they are.

        Reads nothing from the device: a non-finite gradient (or non-finite heads, SVGD/SPOS) raises a
        ``GraphRMAError`` naming the parameters when the check's value reaches the host: in this step on the CPU
        (before any gradient is written), usually in the next one on CUDA (this step then leaves that group's loss
        gradients in place), at the latest in :meth:`check`.
        """
        self._flags.poll()  # the checks of earlier steps that have reached the host
        warming, fresh = self.steps < self.warmup, False
        for index, full in enumerate(self.groups):
            group = self._trainable(full)
            if group is None or self._already_written(index, group):
                continue
            fresh = True
            if warming:  # plain gradients; remembered so that a second optimizer's call does not count again
                self._remember(index, group)
                continue
            theta, grad = group.theta(), group.grad()
            if theta.is_meta:
                raise GraphRMAError(
                    f"model: {group.name or 'model'}'s parameters are on the meta device (no values to "
                    f"move); materialise the model first (model.to_empty(device=...) and initialise it)"
                )
            bad_columns = ~torch.isfinite(grad).all(dim=0)
            same = self._check_particles(group, theta)
            phi, theta_bad = self._direction_flagged(theta, grad)
            bad = bad_columns.any() if theta_bad is None else bad_columns.any() | theta_bad
            extra = {k: t for k, t in (("theta", theta_bad), ("identical", same)) if t is not None}
            self._flags.add(
                torch.cat([bad_columns] + [t.reshape(1) for t in extra.values()]), self._reporter(group, list(extra))
            )
            self._flags.poll()  # on the CPU: raises here, before the gradient is written
            group.set_grad(torch.where(bad, grad.to(phi.dtype), phi.mul(-self.eps)))
            self._remember(index, group)
        self.steps += fresh

    def _reporter(self, group: ParticleGroup, extra: List[str]):
        """The function that reads one step's flags of ``group``: per gradient column whether it is finite, then the
        ``extra`` flags (``"theta"``: non-finite heads, ``"identical"``: identical heads)."""
        label = group.name or "model"
        spans, start = [], 0
        for p in group.params:
            spans.append((p.name, start, start + p.size))
            start += p.size

        def report(values) -> None:
            columns, flags = values[:start], dict(zip(extra, values[start:]))
            if columns.any():
                bad = [name for name, lo, hi in spans if columns[lo:hi].any()]
                raise GraphRMAError(f"grad: non-finite gradient in {label} ({', '.join(bad)})")
            if flags.get("theta"):
                raise GraphRMAError(f"theta: the heads of {label} contain NaN or Inf")
            if flags.get("identical"):
                self._identical_heads(label)

        return report

    def check(self) -> None:
        """Wait for the device and report every check of the steps taken so far (:meth:`step` reports them
        without waiting, when they have reached the host): raises the ``GraphRMAError`` of a non-finite gradient or
        heads, and gives the warnings."""
        self._flags.poll(wait=True)

    def _remember(self, index: int, group: ParticleGroup) -> None:
        """Record the gradients :meth:`step` saw for group ``index`` (see :meth:`_already_written`)."""
        self._written[index] = [
            (weakref.ref(p.param.grad), p.param.grad._version) for p in group.params if p.param.grad is not None
        ]

    def _params(self) -> List[nn.Parameter]:
        seen: Dict[int, nn.Parameter] = {}
        for group in self.groups:
            for p in group.params:
                seen.setdefault(id(p.param), p.param)
        return list(seen.values())

    def attach(self, optimizer: torch.optim.Optimizer) -> _Attachment:
        """Run :meth:`step` before every ``optimizer.step()``; returns a handle whose ``remove()`` detaches it.

        Raises a ``GraphRMAError`` when this sampler is already attached to ``optimizer``, or when another attached
        sampler holds some of the same parameters (both would transform the same gradients). Attaching to several
        optimizers is fine: each gradient is still transformed once per backward pass.
        """
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise GraphRMAError(f"optimizer: expected a torch.optim.Optimizer, got {type(optimizer).__name__}")
        entry = self._attachments.get(id(optimizer))
        if entry is not None and entry[0]() is optimizer:
            raise GraphRMAError(
                f"optimizer: {type(self).__name__} is already attached to this "
                f"{type(optimizer).__name__}; attach it once (detach() undoes attach)"
            )
        for group in self.groups:
            for p in group.params:
                ref = _CLAIMS.get(p.param)
                other = ref() if ref is not None else None
                if other is not None and other is not self and other._attachments:
                    raise GraphRMAError(
                        f"optimizer: {group.name or 'model'}.{p.name} is already sampled by an attached "
                        f"{type(other).__name__}; two samplers over the same parameters would both transform its "
                        f"gradient (detach the other one first)"
                    )
        handle = optimizer.register_step_pre_hook(lambda opt, args, kwargs: self.step())
        self._attachments[id(optimizer)] = (weakref.ref(optimizer), handle)
        for param in self._params():
            _CLAIMS[param] = weakref.ref(self)
        return _Attachment(self, optimizer, handle)

    def detach(self, optimizer: Optional[torch.optim.Optimizer] = None) -> None:
        """Stop running before ``optimizer.step()`` (every optimizer when ``None``). Detaching from an optimizer
        it is not attached to is a no-op."""
        keys = list(self._attachments) if optimizer is None else [id(optimizer)]
        for key in keys:
            entry = self._attachments.pop(key, None)
            if entry is not None:
                entry[1].remove()
        if not self._attachments:
            for param in self._params():
                ref = _CLAIMS.get(param)
                if ref is not None and ref() is self:
                    del _CLAIMS[param]

    def state_dict(self) -> Dict[str, Tensor]:
        """The noise generator's state and the step count (warm-up), for exact resumption on the same kind of device
        (a state loaded on another kind seeds the generator from its bytes, with a warning). Calls :meth:`check`
        first: a checkpoint is never written after a failed check."""
        self.check()
        return {"generator": self.generator.get_state(), "steps": torch.tensor(self.steps)}

    def load_state_dict(self, state: Dict[str, Tensor]) -> None:
        if not isinstance(state, dict) or "generator" not in state:
            found = sorted(state) if isinstance(state, dict) else type(state).__name__
            raise GraphRMAError(
                f"state: expected a {type(self).__name__}.state_dict() with the key 'generator' (the noise "
                f"generator's state), got {found}"
            )
        unknown = sorted(set(state) - {"generator", "steps"})
        if unknown:
            raise GraphRMAError(f"state: unknown key(s) {unknown}; expected 'generator' and 'steps'")
        gen_state = state["generator"]
        sizes = (torch.Generator().get_state().numel(), _CUDA_STATE_BYTES)
        if (
            not isinstance(gen_state, Tensor)
            or gen_state.dtype != torch.uint8
            or tuple(gen_state.shape) not in {(n,) for n in sizes}
        ):
            what = (
                type(gen_state).__name__
                if not isinstance(gen_state, Tensor)
                else f"a {gen_state.dtype} tensor of shape {tuple(gen_state.shape)}"
            )
            raise GraphRMAError(
                f"state: 'generator' must be a torch.Generator state (a uint8 tensor of {sizes[0]} bytes from a CPU "
                f"generator or {sizes[1]} from a CUDA one), got {what}"
            )
        steps = state.get("steps", 0)  # absent in state dicts written before the warm-up option
        if isinstance(steps, Tensor):
            steps = steps.item() if steps.numel() == 1 and not steps.is_floating_point() else steps.tolist()
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
            raise GraphRMAError(f"state: 'steps' must be an integer >= 0, got {steps!r}")
        self._generator_state = gen_state.cpu()
        if self._generator is not None:
            _set_generator_state(self._generator, self._generator_state)
        self.steps = steps

    def _extra_repr(self) -> str:
        return f"eps={self.eps}" + (f", warmup={self.warmup}" if self.warmup else "")

    def __repr__(self) -> str:
        groups = ", ".join(f"{g.name or 'model'}[{g.num_heads}x{g.dim}]" for g in self.groups)
        return f"{type(self).__name__}({self._extra_repr()}, groups=[{groups}])"


_CUDA_STATE_BYTES = 16  # a CUDA generator's state: its seed and its offset, 8 bytes each


def _set_generator_state(generator: torch.Generator, state: Tensor) -> None:
    """Give ``generator`` a saved state. A state saved on another kind of device (a run saved on CUDA and resumed
    on the CPU, or the other way) cannot be carried over, the two generators' algorithms differ: the generator is
    then seeded from the saved state's bytes (the same state gives the same noise), with a warning."""
    try:
        generator.set_state(state)
    except RuntimeError:
        seed = int.from_bytes(hashlib.sha256(state.numpy().tobytes()).digest()[:8], "little") >> 1
        generator.manual_seed(seed)
        warnings.warn(
            f"sampler noise: the saved generator state ({state.numel()} bytes) is not one of a {generator.device.type} "
            "generator (saved on another device); the noise goes on from a seed derived from it, not the draws an "
            "uninterrupted run would have made",
            stacklevel=3,
        )


#: ``alpha`` of :class:`SVGD` and :class:`SPOS` when none is given: the strength of the one setting where repulsion
#: beat plain heads beyond noise, chosen on validation seeds (GATv2 on chameleon, docs/where-it-helps.md). The paper's
#: 1 was never chosen in any validated sweep (Cora, chameleon, TREC: 0.01-0.1) and costs up to 12 points with many
#: Transformer heads.
DEFAULT_ALPHA = 0.1


class SVGD(ParticleSampler):
    r"""Stein variational gradient descent over attention heads (Eq. 4): gradient := :math:`-\epsilon\,\phi`.

    Exactly identical heads cannot separate under SVGD (the kernel gradient between identical particles is zero and
    they receive identical updates): the sampler warns once when it sees two identical heads; use :class:`SPOS`
    (its noise separates them) or initialise the heads differently (e.g. add small noise).

    Args:
        model: the model; see :class:`ParticleSampler` for ``eps``, ``layers``, ``roles``, ``min_heads``, ``seed``.
        alpha: repulsive weight (``>= 0``; default :data:`DEFAULT_ALPHA`, 0.1, chosen on validation data, not the
            paper's 1).
        bandwidth: ``"median"`` (the paper: ``med^2 / log M``), ``"liu"`` (``med^2 / log(M+1)``, median over all
            entries, as in Liu's and the authors' code) or a fixed positive number.
        kernel_grad: ``False`` gives each head its own gradient, coupled only by the repulsion (ablation).
        allow_attraction: accept a negative ``alpha`` (the kernel term then pulls heads together).
        max_repulsive_step: the numerical-safety step limit :math:`c` (see :mod:`graph_rma.particles`): one step
            moves a particle by at most :math:`c \sqrt{h}` through the repulsion; ``None`` disables it (the
            paper's equation even where it blows up).
    """

    _separates_identical = False

    def __init__(
        self,
        model: nn.Module,
        alpha: float = DEFAULT_ALPHA,
        eps: float = 1.0,
        bandwidth: Bandwidth = "median",
        kernel_grad: bool = True,
        allow_attraction: bool = False,
        max_repulsive_step: Optional[float] = 1.0,
        **kwargs,
    ) -> None:
        alpha = _check_alpha(alpha, allow_attraction)
        _check_bandwidth(bandwidth)
        if max_repulsive_step is not None:
            _check_positive("max_repulsive_step", max_repulsive_step)
        super().__init__(model, eps=eps, **kwargs)
        self.alpha, self.bandwidth = alpha, bandwidth
        # a tensor bandwidth read once here, so that a step reads nothing from the device
        self._h = float(bandwidth) if isinstance(bandwidth, Tensor) else bandwidth
        self.kernel_grad = _check_flag("kernel_grad", kernel_grad)
        self.max_repulsive_step = None if max_repulsive_step is None else float(max_repulsive_step)
        self._warned_identical = False

    def _check_particles(self, group: ParticleGroup, theta: Tensor) -> Optional[Tensor]:
        if self._separates_identical or self._warned_identical or self.alpha == 0.0 or theta.size(0) < 2:
            return None
        same = (theta.unsqueeze(0) == theta.unsqueeze(1)).all(dim=-1)
        same.fill_diagonal_(False)
        return same.any()

    def _identical_heads(self, label: str) -> None:
        if self._warned_identical:
            return
        self._warned_identical = True
        warnings.warn(
            f"{type(self).__name__}: {label} has identical heads; SVGD cannot separate identical "
            f"particles (their kernel gradient is zero and their updates are equal). Use SPOS, whose noise "
            f"separates them, or initialise the heads differently (e.g. add small noise)"
        )

    def _phi(self, theta: Tensor, grad: Tensor) -> Tuple[Tensor, Optional[Tensor]]:
        phi, limited, finite = _svgd(
            theta, grad, self.alpha, self._h, self.kernel_grad, self.eps, self.max_repulsive_step
        )
        self._count_limited(limited)
        return phi, None if finite is None else ~finite

    def _direction_flagged(self, theta: Tensor, grad: Tensor) -> Tuple[Tensor, Optional[Tensor]]:
        return self._phi(theta, grad)

    def direction(self, theta: Tensor, grad: Tensor) -> Tensor:
        return self._direction_flagged(theta, grad)[0]

    def _extra_repr(self) -> str:
        return f"alpha={self.alpha}, {super()._extra_repr()}, bandwidth={self.bandwidth!r}"


class SPOS(SVGD):
    r"""Stochastic particle-optimisation sampling over attention heads (Eq. 5).

    The other arguments are as in :class:`SVGD`.

    Args:
        beta: inverse temperature of the Langevin part; the noise has standard deviation
            :math:`\sqrt{2 / (\beta \epsilon)}` in :math:`\phi` (so :math:`\sqrt{2 \epsilon / \beta}` in the step).
    """

    _separates_identical = True

    def __init__(
        self, model: nn.Module, alpha: float = DEFAULT_ALPHA, eps: float = 1.0, beta: float = 1.0, **kwargs
    ) -> None:
        _check_positive("beta", beta)
        super().__init__(model, alpha=alpha, eps=eps, **kwargs)
        self.beta = float(beta)

    def _direction_flagged(self, theta: Tensor, grad: Tensor) -> Tuple[Tensor, Optional[Tensor]]:
        phi, theta_bad = self._phi(theta, grad)
        return _spos_noise(phi, theta, grad, self.beta, self.eps, self.generator), theta_bad

    def _extra_repr(self) -> str:
        return (
            f"alpha={self.alpha}, {ParticleSampler._extra_repr(self)}, beta={self.beta}, bandwidth={self.bandwidth!r}"
        )


class SGLD(ParticleSampler):
    r"""Stochastic gradient Langevin dynamics on each head independently (the paper's Table 8 baseline).

    Gradient := :math:`-\epsilon\,\phi` with :math:`\phi = -g + \sqrt{2 / (\beta \epsilon)}\,\xi`.
    """

    def __init__(self, model: nn.Module, eps: float = 1.0, beta: float = 1.0, **kwargs) -> None:
        _check_positive("beta", beta)
        super().__init__(model, eps=eps, **kwargs)
        self.beta = float(beta)

    def direction(self, theta: Tensor, grad: Tensor) -> Tensor:
        return sgld_direction(grad, beta=self.beta, eps=self.eps, generator=self.generator)

    def _extra_repr(self) -> str:
        return f"eps={self.eps}, beta={self.beta}"
