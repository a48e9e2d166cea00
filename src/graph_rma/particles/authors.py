r"""The authors' published update (compatibility option, never the default).

The public PyTorch code of the repulsive-attention paper (repository ``bangann/Repulsive-Attention``, commits
``44f4a7e``/``f480b5c``; the two files below are identical in both) computes a different update from the paper's
Eqs. (4)-(5), which :mod:`graph_rma.particles.kernel` implements. This module reproduces the published code's
update so that its effect can be measured; nothing here is used unless asked for by name (:class:`AuthorsSVGD`,
:class:`AuthorsSPOS`, or the variant option ``update=authors``, see :mod:`graph_rma.variants`).

**Their update.** Particles :math:`\theta \in \mathbb{R}^{M \times D}`, loss gradients :math:`g`, squared
distances :math:`d^2_{ij} = \|\theta_i - \theta_j\|^2`. With :math:`m` the *lower* median (``torch.median``) of all
:math:`M^2` entries of :math:`d^2` (the :math:`M` zeros of the diagonal and every pair twice),

.. math::
    h = \sqrt{\frac{m}{2 \log(M + 1)}}, \qquad K_{ij} = \exp\left(-\frac{d^2_{ij}}{2 h^2}\right), \qquad
    R_i = \frac{1}{h} \sum_j K_{ij} (\theta_i - \theta_j),

and the gradient handed to the optimizer (which then *descends* it) is

.. math::
    \tilde g^{\mathrm{SVGD}} = \frac{1}{M}\left(K g - w R\right), \qquad
    \tilde g^{\mathrm{SPOS}} = \tilde g^{\mathrm{SVGD}} + \beta g
        - \sqrt{2 \beta / s}\; \mathrm{med}(|g|)\; \xi, \quad \xi \sim \mathcal{N}(0, I),

with :math:`w` their ``d_kernel_weight`` (``alpha`` on their sentence-classification command line),
:math:`\beta` their ``beta``, :math:`s` their ``stepsize`` and :math:`\mathrm{med}(|g|)` the lower median of the
absolute gradient entries of the whole ``[M, D]`` block.

**Differences from the paper's text** (where they are in their code):

1. *Particles are not heads* (``GraphWriter/train.py``, ``weight_bayesian``): a projection weight
   :math:`W \in \mathbb{R}^{H d \times \mathrm{in}}` (``nn.Linear``, heads = contiguous output rows) becomes
   ``W.t().contiguous().view(H, -1)``: particle :math:`i` holds input features
   :math:`i\,\mathrm{in}/H \ldots (i+1)\,\mathrm{in}/H - 1` of *every* head's projection (or, when ``in`` is not a
   multiple of ``H``, a contiguous run of that flattened transpose). In their sentence classifier
   (``SentenceClassification/scripts/embedding_svgd.py``, ``Linear_SVGD.backward``) the particles are the rows of
   ``Weight2`` ``[hops, attention_unit]``, one per hop: there they *are* heads. :class:`MixingHeadParam` is the
   GraphWriter view (``view="mixing"``, the default); ``view="heads"`` is the sentence classifier's.
2. *Each weight is its own particle set*: GraphWriter calls the update separately for ``key_layer``,
   ``query_layer`` and ``value_layer`` (``train``), each with its own kernel and bandwidth; the paper (and
   :class:`graph_rma.particles.SVGD`) concatenates a head's parameters into one particle.
3. *Bandwidth* (``rbf`` in both ``GraphWriter/train.py`` and ``SentenceClassification/scripts/utils.py``):
   :math:`2h^2 = m / \log(M+1)`, the median over all :math:`M^2` entries including the diagonal zeros, the lower
   middle value for an even count (``torch.median``), and of squared distances; the paper's text has
   :math:`h = \mathrm{med}^2 / \log M` over the :math:`M(M-1)/2` pairs. For :math:`M = 2` their lower median is 0
   and their code divides by zero (NaN); see *defined cases* below.
4. *Repulsion divided by* :math:`h` *instead of* :math:`h^2` (``rbf``): the exact kernel gradient is
   :math:`\sum_j K_{ij}(\theta_i - \theta_j)/h^2`. Since :math:`h` is proportional to the particles' spread,
   :math:`R` does not depend on the particles' scale at all (a fixed-size push), while the paper's repulsion
   grows as :math:`1/\mathrm{spread}`.
5. *Weights* (``svgd``): the kernel term is weighted by :math:`w` (0.01 in their GraphWriter README command,
   ``-d_kernel_weight 0.01``; their ``pargs.py`` default is 1; 1, 0.01 and 0.005 for Yelp, Age and SNLI in their
   sentence-classification README), and the gradient term has weight 1.
6. *SPOS* (``spos``): adds :math:`+\beta g` (the paper: :math:`-\nabla U / \beta` in the ascent direction, i.e.
   :math:`+g/\beta`), and the noise standard deviation :math:`\sqrt{2\beta/s}` is multiplied by
   :math:`\mathrm{med}(|g|)` in ``SentenceClassification/scripts/utils.py`` but *not* in
   ``GraphWriter/train.py`` (``grad_scaled_noise=False`` reproduces the latter).
7. *Step size*: the sentence classifier multiplies :math:`\tilde g` by ``stepsize`` before the optimizer
   (``Linear_SVGD.backward``); GraphWriter does not (its ``stepsize`` only enters the SPOS noise; its optimizer is
   SGD, lr 0.1, momentum 0.9, with gradient clipping *after* the update). :class:`AuthorsSVGD`'s ``eps`` is that
   multiplier (the sentence classifier's convention; ``eps=1`` is GraphWriter's).
8. *Which attention* (``GraphWriter/train.py``, ``train``; ``models/newmodel.py``): GraphWriter applies it to
   ``m.attn``, the decoder's attention over the entity encodings, not to the graph encoder.

**Defined cases (not in their code).** When the lower median :math:`m` is 0 (always for :math:`M = 2`, or when
more than half of the entries coincide) the largest squared distance is used instead; when all particles
coincide :math:`h = 1` (then :math:`K = 1` and :math:`R = 0`). Inputs are centred and scaled before squaring
(:math:`K` and :math:`R` are scale-invariant), computed in float32 (float64 for float64 input).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional, Tuple

import torch
from torch import Tensor, nn

from .._errors import GraphRMAError
from .kernel import (
    _check_alpha,
    _check_flag,
    _check_grad,
    _check_positive,
    _check_theta,
    _finite,
    _noise,
    _normalize,
    _squared_distances,
    _work_dtype,
)
from .layouts import HeadParam, LayerSpec, ParticleGroup
from .samplers import ParticleSampler

__all__ = [
    "authors_bandwidth",
    "authors_kernel",
    "authors_svgd_grad",
    "authors_spos_grad",
    "MixingHeadParam",
    "mixing_groups",
    "VIEWS",
    "AuthorsSVGD",
    "AuthorsSPOS",
]


def _lower_median(values: Tensor) -> Tensor:
    # torch.median's convention: the lower of the two middle values for an even count.
    return values.flatten().sort().values[(values.numel() - 1) // 2]


def _bandwidth_normalized(d2: Tensor) -> Tensor:
    """``h`` from squared distances (in the coordinates ``d2`` is in), with the defined fallbacks."""
    M = d2.size(0)
    m = _lower_median(d2)
    if m <= 0:
        m = d2.max()
    if m <= 0:
        return torch.ones((), dtype=d2.dtype, device=d2.device)
    return torch.sqrt(0.5 * m / math.log(M + 1))


def authors_bandwidth(theta: Tensor) -> Tensor:
    r"""Their bandwidth :math:`h = \sqrt{m / (2 \log(M + 1))}`, :math:`m` the lower median of all :math:`M^2`
    squared distances (see the module docstring, including the fallbacks for :math:`m = 0`).

    Args:
        theta: particles ``[M, D]``.
    """
    _check_theta(theta)
    x, s = _normalize(theta)
    return _bandwidth_normalized(_squared_distances(x)) * s


def _kernel(theta: Tensor) -> Tuple[Tensor, Tensor]:
    x, _ = _normalize(theta)
    d2 = _squared_distances(x)
    h = _bandwidth_normalized(d2)
    K = torch.exp(-d2 / (2.0 * h * h))
    R = (x * K.sum(dim=1, keepdim=True) - K @ x) / h  # scale-invariant: the same in the original coordinates
    return K, R


def authors_kernel(theta: Tensor) -> Tuple[Tensor, Tensor]:
    r"""Their kernel and repulsion :math:`K_{ij} = \exp(-d^2_{ij} / 2h^2)`,
    :math:`R_i = \sum_j K_{ij} (\theta_i - \theta_j) / h` (divided by :math:`h`, not :math:`h^2`).

    Args:
        theta: particles ``[M, D]``.

    Returns:
        ``(K, R)`` of shapes ``[M, M]`` and ``[M, D]``, in float32 (float64 for float64 input).
    """
    _check_theta(theta)
    return _kernel(theta)


def authors_svgd_grad(theta: Tensor, grad: Tensor, w: float = 1.0) -> Tensor:
    r"""Their SVGD gradient :math:`\tilde g = (K g - w R) / M` (to be *descended*: ``theta -= lr * g~``).

    Args:
        theta: particles ``[M, D]``.
        grad: loss gradients ``[M, D]``.
        w: weight of the kernel term (their ``d_kernel_weight``), ``>= 0``.

    Returns:
        :math:`\tilde g` with the shape and dtype of ``theta``.
    """
    _check_theta(theta)
    _check_grad(theta, grad)
    w = _check_alpha(w, None, "w")
    return _svgd_grad(theta, grad, w)


def _svgd_grad(theta: Tensor, grad: Tensor, w: float) -> Tensor:
    K, R = _kernel(theta)
    out = (K @ grad.to(K.dtype) - w * R) / theta.size(0)
    return _finite(out, theta.dtype)


def authors_spos_grad(
    theta: Tensor,
    grad: Tensor,
    w: float = 1.0,
    beta: float = 1.0,
    stepsize: float = 1.0,
    generator: Optional[torch.Generator] = None,
    grad_scaled_noise: bool = True,
) -> Tensor:
    r"""Their SPOS gradient :math:`\tilde g^{\mathrm{SVGD}} + \beta g - \sqrt{2\beta/s}\,\mathrm{med}(|g|)\,\xi`.

    Arguments theta, grad, w: as in :func:`authors_svgd_grad`.

    Args:
        beta: their ``beta`` (``> 0``), the weight of the added gradient and of the noise.
        stepsize: their ``stepsize`` :math:`s` (``> 0``).
        generator: source of :math:`\xi \sim \mathcal{N}(0, I)` (``None``: torch's global generator), drawn in
            float32 (float64 for float64 input) on the generator's device.
        grad_scaled_noise: multiply the noise by the lower median of :math:`|g|` over the whole block
            (``SentenceClassification/scripts/utils.py``); ``False`` is ``GraphWriter/train.py``'s noise.
    """
    _check_theta(theta)
    _check_grad(theta, grad)
    w = _check_alpha(w, None, "w")
    _check_positive("beta", beta)
    _check_positive("stepsize", stepsize)
    return _spos_grad(theta, grad, w, float(beta), float(stepsize), generator, bool(grad_scaled_noise))


def _spos_grad(
    theta: Tensor,
    grad: Tensor,
    w: float,
    beta: float,
    stepsize: float,
    generator: Optional[torch.Generator],
    grad_scaled_noise: bool,
) -> Tensor:
    work = _work_dtype(theta.dtype)
    g = grad.to(work)
    xi = _noise(theta.shape, theta.device, work, generator)
    scale = math.sqrt(2.0 * beta / stepsize)
    noise = xi * (scale * _lower_median(g.abs()) if grad_scaled_noise else scale)
    out = _svgd_grad(theta, grad, w).to(work) + beta * g - noise
    return _finite(out, theta.dtype)


@dataclass(frozen=True)
class MixingHeadParam(HeadParam):
    r"""The authors' particle view of one parameter: ``W.t().reshape(H, -1)``.

    The parameter's region (see :class:`~graph_rma.particles.HeadParam`) is read as a matrix whose rows are the
    head-major axis (``[H d, rest]``; for an ``nn.Linear`` weight ``[H d, in]``), transposed to ``[rest, H d]`` and
    cut into ``H`` contiguous chunks. Particle ``i`` then mixes every head's weights on one block of inputs. A 1-D
    region (a bias) is its own transpose, so there the view is the head view.
    """

    def heads(self, t: Tensor) -> Tensor:
        region = self._region(t)
        if region.numel() % self.num_heads != 0:
            raise GraphRMAError(
                f"{self.name}: {region.numel()} entries are not divisible by {self.num_heads} particles"
            )
        return region.reshape(region.size(0), -1).t().reshape(self.num_heads, -1)

    def write(self, t: Tensor, value: Tensor) -> None:
        region = self._region(t)
        rows = region.size(0)
        region.copy_(value.reshape(-1, rows).t().reshape(region.shape))


VIEWS = ("mixing", "heads")


def mixing_groups(groups: List[ParticleGroup], view: str = "mixing") -> List[ParticleGroup]:
    """The authors' particle sets for ``groups``: one group per parameter (each weight its own kernel), read
    through :class:`MixingHeadParam` (``view="mixing"``, GraphWriter) or as heads (``view="heads"``, their
    sentence classifier's ``Weight2`` rows). Group names are ``"<layer>.<parameter>"``."""
    if view not in VIEWS:
        raise GraphRMAError(f"view: expected one of {', '.join(VIEWS)}, got {view!r}")
    cls = MixingHeadParam if view == "mixing" else HeadParam
    out: List[ParticleGroup] = []
    for group in groups:
        for p in group.params:
            mixed = cls(p.name, p.role, p.param, p.num_heads, p.axis, p.start, p.length)
            name = f"{group.name}.{p.name}" if group.name else p.name
            out.append(ParticleGroup(name, group.module, group.num_heads, [mixed]))
    return out


class AuthorsSVGD(ParticleSampler):
    r"""The authors' published SVGD update (compatibility option; see the module docstring for every difference
    from the paper's Eq. 4): each selected weight ``W`` of an attention layer is its own particle set
    ``W.t().reshape(H, -1)``, and its gradient becomes ``eps * (K g - w R) / M``.

    Args:
        model: the model; ``layers``, ``roles``, ``min_heads``, ``seed`` as in
            :class:`~graph_rma.particles.ParticleSampler`.
        w: weight of the kernel term (their ``d_kernel_weight``), ``>= 0``.
        eps: multiplier of the new gradient (their sentence classifier's ``stepsize``; GraphWriter: 1).
        view: ``"mixing"`` (``W.t().reshape(H, -1)``, GraphWriter) or ``"heads"`` (one particle per head, as their
            sentence classifier's ``Weight2`` rows); either way each weight is its own particle set.
    """

    def __init__(
        self,
        model: nn.Module,
        w: float = 0.01,
        eps: float = 1.0,
        layers: LayerSpec = None,
        roles=None,
        min_heads: int = 2,
        seed: int = 0,
        view: str = "mixing",
        warmup: int = 0,
    ) -> None:
        self.w = _check_alpha(w, None, "w")
        if view not in VIEWS:
            raise GraphRMAError(f"view: expected one of {', '.join(VIEWS)}, got {view!r}")
        super().__init__(model, eps=eps, layers=layers, roles=roles, min_heads=min_heads, seed=seed, warmup=warmup)
        self.view = view
        self.groups = mixing_groups(self.groups, view)

    def direction(self, theta: Tensor, grad: Tensor) -> Tensor:
        # The base class writes -eps * direction; their gradient is +eps * g~.
        return -_svgd_grad(theta, grad, self.w)

    def _extra_repr(self) -> str:
        return f"w={self.w}, eps={self.eps}, view={self.view!r}"


class AuthorsSPOS(AuthorsSVGD):
    r"""The authors' published SPOS update (compatibility option): the gradient of each particle set becomes
    ``eps * (g~_SVGD + beta g - sqrt(2 beta / stepsize) med(|g|) xi)``.

    The other arguments are as in :class:`AuthorsSVGD`.

    Args:
        beta: their ``beta`` (``> 0``).
        stepsize: the :math:`s` in the noise; ``None`` uses ``eps`` (their sentence classifier, where one
            ``stepsize`` is both). GraphWriter: ``eps=1``, ``stepsize`` its ``-stepsize``,
            ``grad_scaled_noise=False``.
        grad_scaled_noise: multiply the noise by the lower median of ``|g|`` (their sentence classifier).
    """

    def __init__(
        self,
        model: nn.Module,
        w: float = 0.01,
        eps: float = 1.0,
        beta: float = 1.0,
        stepsize: Optional[float] = None,
        grad_scaled_noise: bool = True,
        **kwargs,
    ) -> None:
        _check_positive("beta", beta)
        if stepsize is not None:
            _check_positive("stepsize", stepsize)
        super().__init__(model, w=w, eps=eps, **kwargs)
        self.beta = float(beta)
        self.stepsize = self.eps if stepsize is None else float(stepsize)
        self.grad_scaled_noise = _check_flag("grad_scaled_noise", grad_scaled_noise)

    def direction(self, theta: Tensor, grad: Tensor) -> Tensor:
        return -_spos_grad(theta, grad, self.w, self.beta, self.stepsize, self.generator, self.grad_scaled_noise)

    def _extra_repr(self) -> str:
        return f"w={self.w}, eps={self.eps}, beta={self.beta}, stepsize={self.stepsize}, view={self.view!r}"
