r"""Samplers that turn head gradients into the particle update: :class:`ParticleSampler`, :class:`SVGD`, :class:`SPOS`,
:class:`SGLD` (an optimizer pre-hook, ``attach``/``detach``, ``state_dict``).
"""
from __future__ import annotations

import math
import warnings
from typing import Dict, Iterable, Optional

import torch
from torch import Tensor, nn

from .kernel import Bandwidth, _all_finite, _check_positive, _spos_noise, _svgd, sgld_direction
from .layouts import LayerSpec, find_particle_groups

class ParticleSampler:
    r"""Base class: replaces each particle group's gradient by :math:`-\epsilon\,\phi` (see :meth:`direction`).

    Call :meth:`step` after ``loss.backward()`` (and after gradients are all-reduced in a distributed run), or
    :meth:`attach` it to an optimizer so that it runs before every ``optimizer.step()``.

    Args:
        model: the model whose attention layers hold the heads.
        eps: step size :math:`\epsilon`; the gradient becomes ``-eps * phi``.
        layers, roles, min_heads: which heads become particles (:func:`find_particle_groups`).
        seed: seed of the sampler's own noise generator (SPOS/SGLD). The same seed on every process gives the
            same noise on every process, so replicas of a distributed run stay identical.
    """

    def __init__(
        self,
        model: nn.Module,
        eps: float = 1.0,
        layers: LayerSpec = None,
        roles: Optional[Iterable[str]] = None,
        min_heads: int = 2,
        seed: int = 0,
    ) -> None:
        _check_positive("eps", eps)
        self.eps = float(eps)
        self.seed = int(seed)
        self.groups = find_particle_groups(model, layers=layers, roles=roles, min_heads=min_heads)
        if not self.groups:
            warnings.warn(f"{type(self).__name__}: the model has no multi-head attention layer to sample; step() does nothing")
        self._generator: Optional[torch.Generator] = None
        self._generator_state: Optional[Tensor] = None

    @property
    def generator(self) -> torch.Generator:
        if self._generator is None:
            device = self.groups[0].params[0].param.device if self.groups else torch.device("cpu")
            self._generator = torch.Generator(device=device)
            self._generator.manual_seed(self.seed)
            if self._generator_state is not None:
                self._generator.set_state(self._generator_state)
        return self._generator

    def direction(self, theta: Tensor, grad: Tensor) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    @torch.no_grad()
    def step(self) -> None:
        """Replace every particle group's gradient by ``-eps * phi``."""
        for group in self.groups:
            theta, grad = group.theta(), group.grad()
            if not _all_finite(grad):
                bad = [p.name for p in group.params if p.param.grad is not None and not bool(torch.isfinite(p.param.grad).all())]
                raise ValueError(f"grad: non-finite gradient in {group.name or 'model'} ({', '.join(bad)})")
            phi = self.direction(theta, grad)
            group.set_grad(phi.mul(-self.eps))

    def attach(self, optimizer: torch.optim.Optimizer):
        """Run :meth:`step` before every ``optimizer.step()``; returns a handle whose ``remove()`` detaches it."""
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise ValueError(f"optimizer: expected a torch.optim.Optimizer, got {type(optimizer).__name__}")
        return optimizer.register_step_pre_hook(lambda opt, args, kwargs: self.step())

    def state_dict(self) -> Dict[str, Tensor]:
        """The noise generator's state, for exact resumption."""
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state: Dict[str, Tensor]) -> None:
        self._generator_state = state["generator"]
        if self._generator is not None:
            self._generator.set_state(self._generator_state)

    def _extra_repr(self) -> str:
        return f"eps={self.eps}"

    def __repr__(self) -> str:
        groups = ", ".join(f"{g.name or 'model'}[{g.num_heads}x{g.dim}]" for g in self.groups)
        return f"{type(self).__name__}({self._extra_repr()}, groups=[{groups}])"


class SVGD(ParticleSampler):
    r"""Stein variational gradient descent over attention heads (Eq. 4): gradient := :math:`-\epsilon\,\phi`.

    Args:
        model: the model; see :class:`ParticleSampler` for ``eps``, ``layers``, ``roles``, ``min_heads``, ``seed``.
        alpha: repulsive weight.
        bandwidth: ``"median"`` (the paper: ``med^2 / log M``), ``"liu"`` (``med^2 / log(M+1)``, median over all
            entries, as in Liu's and the authors' code) or a fixed positive number.
        kernel_grad: ``False`` gives each head its own gradient, coupled only by the repulsion (ablation).
    """

    def __init__(self, model: nn.Module, alpha: float = 1.0, eps: float = 1.0, bandwidth: Bandwidth = "median",
                 kernel_grad: bool = True, **kwargs) -> None:
        super().__init__(model, eps=eps, **kwargs)
        if not math.isfinite(float(alpha)):
            raise ValueError(f"alpha: expected a finite repulsive weight, got {alpha!r}")
        self.alpha, self.bandwidth, self.kernel_grad = float(alpha), bandwidth, bool(kernel_grad)

    def direction(self, theta: Tensor, grad: Tensor) -> Tensor:
        return _svgd(theta, grad, self.alpha, self.bandwidth, self.kernel_grad)

    def _extra_repr(self) -> str:
        return f"alpha={self.alpha}, eps={self.eps}, bandwidth={self.bandwidth!r}"


class SPOS(SVGD):
    r"""Stochastic particle-optimisation sampling over attention heads (Eq. 5).

    Args:
        beta: inverse temperature of the Langevin part; the noise has standard deviation
            :math:`\sqrt{2 / (\beta \epsilon)}` in :math:`\phi` (so :math:`\sqrt{2 \epsilon / \beta}` in the step).
        others: as in :class:`SVGD`.
    """

    def __init__(self, model: nn.Module, alpha: float = 1.0, eps: float = 1.0, beta: float = 1.0, **kwargs) -> None:
        _check_positive("beta", beta)
        super().__init__(model, alpha=alpha, eps=eps, **kwargs)
        self.beta = float(beta)

    def direction(self, theta: Tensor, grad: Tensor) -> Tensor:
        phi = _svgd(theta, grad, self.alpha, self.bandwidth, self.kernel_grad)
        return _spos_noise(phi, theta, grad, self.beta, self.eps, self.generator)

    def _extra_repr(self) -> str:
        return f"alpha={self.alpha}, eps={self.eps}, beta={self.beta}, bandwidth={self.bandwidth!r}"


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
