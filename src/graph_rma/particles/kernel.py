r"""The method's numerics on ``[M, D]`` particle tensors: RBF kernel, bandwidths, SVGD/SPOS/SGLD directions.

Pure functions; no knowledge of layers or optimizers. See :mod:`graph_rma.particles` for the equations.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Optional, Tuple, Union

import torch
from torch import Tensor

from .._errors import GraphRMAError

Bandwidth = Union[None, float, str, Tensor]


def _work_dtype(dtype: torch.dtype) -> torch.dtype:
    # Half precision (and float32) inputs are computed in float32, float64 in float64.
    return torch.float64 if dtype == torch.float64 else torch.float32


def _check_theta(theta: Tensor, name: str = "theta") -> None:
    if not isinstance(theta, Tensor):
        raise GraphRMAError(f"{name}: expected a Tensor of shape [M, D], got {type(theta).__name__}")
    if theta.dim() != 2 or theta.size(0) < 1 or theta.size(1) < 1:
        raise GraphRMAError(
            f"{name}: expected shape [M, D] (M >= 1 particles of dimension D >= 1), got {list(theta.shape)}"
        )
    if theta.is_meta:
        raise GraphRMAError(
            f"{name}: a meta tensor has no values to move (materialise the model first, e.g. "
            f"model.to_empty(device='cpu') and initialise it)"
        )
    if not theta.is_floating_point():
        raise GraphRMAError(f"{name}: expected a floating-point tensor, got {theta.dtype}")


def _all_finite(x: Tensor) -> bool:
    # A sum is the cheapest vectorised pass and propagates NaN/Inf; only if it overflows is the exact check run.
    return x.numel() == 0 or bool(torch.isfinite(x.sum())) or bool(torch.isfinite(x).all())


def _max_abs(x: Tensor) -> Tensor:
    lo, hi = torch.aminmax(x)  # NaN propagates
    return torch.maximum(hi, -lo)


def _check_grad(theta: Tensor, grad: Tensor) -> None:
    if not isinstance(grad, Tensor) or grad.shape != theta.shape:
        shape = list(grad.shape) if isinstance(grad, Tensor) else type(grad).__name__
        raise GraphRMAError(f"grad: expected the shape of theta {list(theta.shape)}, got {shape}")
    if not _all_finite(grad):
        raise GraphRMAError("grad: contains NaN or Inf (non-finite loss gradient)")


def _normalize(theta: Tensor) -> Tuple[Tensor, Tensor]:
    """Centre and scale ``theta`` (in the working dtype) so that distances neither overflow nor underflow.

    Returns ``(theta_n, s)`` with ``theta = s * theta_n + mean``; ``s = 1`` when all particles coincide.
    Distances scale by ``s``, the bandwidth by ``s**2``, and the kernel is unchanged. Raises if ``theta`` is
    not finite (a host read; the samplers use :func:`_normalize_flagged`).
    """
    x, s, finite = _normalize_flagged(theta)
    if not bool(finite):
        raise GraphRMAError("theta: contains NaN or Inf")
    return x, s


def _normalize_flagged(theta: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    """:func:`_normalize` without a host read: ``(theta_n, s, finite)``, ``finite`` a 0-d bool tensor on the device
    (``theta_n`` is then not finite either)."""
    x = theta.to(_work_dtype(theta.dtype))
    x = x - x.mean(dim=0, keepdim=True)
    s = _max_abs(x)
    finite = torch.isfinite(s)
    s = torch.where(s > 0, s, torch.ones_like(s))
    return x / s, s, finite


def _squared_distances(x: Tensor) -> Tensor:
    # x is centred and scaled to max |x| = 1 (see _normalize), so the Gram form loses no useful precision: the
    # kernel only needs d^2 / h, and the repulsion uses the differences x_i - x_j directly.
    sq = (x * x).sum(dim=1)
    d2 = (sq.unsqueeze(1) + sq.unsqueeze(0) - 2.0 * (x @ x.t())).clamp_min_(0.0)
    return d2.fill_diagonal_(0.0)


def _pairwise_distances(x: Tensor) -> Tensor:
    return _squared_distances(x).sqrt()


def _median(values: Tensor) -> Tensor:
    # The usual median: the mean of the two middle values for an even count (as numpy.median).
    v, _ = values.sort()
    n = v.numel()
    return v[(n - 1) // 2] if n % 2 == 1 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def _check_bandwidth(bandwidth: Any) -> None:
    """Raise unless ``bandwidth`` is ``None``, ``"median"``, ``"liu"`` or a positive finite number."""
    if bandwidth is None or (isinstance(bandwidth, str) and bandwidth in ("median", "liu")):
        return
    ok = False
    if isinstance(bandwidth, Tensor):
        ok = bandwidth.numel() == 1 and bool(torch.isfinite(bandwidth).all()) and bool((bandwidth > 0).all())
    elif isinstance(bandwidth, numbers.Real) and not isinstance(bandwidth, bool):
        ok = math.isfinite(float(bandwidth)) and float(bandwidth) > 0
    if not ok:
        raise GraphRMAError(f"bandwidth: expected None, 'median', 'liu' or a positive finite number, got {bandwidth!r}")


def _check_alpha(alpha: Any, allow_attraction: Optional[bool] = False, name: str = "alpha") -> float:
    """``alpha`` as a float; raises a ``GraphRMAError`` naming ``name`` for a non-number, NaN/Inf, or (unless
    ``allow_attraction``) a negative value. ``allow_attraction=None``: the caller has no such option."""
    if isinstance(alpha, Tensor) and alpha.numel() == 1:
        alpha = alpha.item()
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not math.isfinite(float(alpha)):
        raise GraphRMAError(f"{name}: expected a finite repulsive weight (a number >= 0), got {alpha!r}")
    if float(alpha) < 0 and not allow_attraction:
        hint = "; pass allow_attraction=True if that is intended" if allow_attraction is not None else ""
        raise GraphRMAError(f"{name}: a negative repulsive weight ({alpha!r}) makes the kernel term attractive{hint}")
    return float(alpha)


def _median_or_max(values: Tensor) -> Tensor:
    """The median of ``values``, or their largest value where the median is not positive (more than half of them
    are zero), chosen on the device (no host read)."""
    med = _median(values)
    return torch.where(med <= 0, values.max(), med)


def _normalized_bandwidth(dist: Tensor, bandwidth: Bandwidth, s: Tensor) -> Tensor:
    """Bandwidth in the normalised coordinates (``h / s**2``). The median's fallbacks (the largest distance when more
    than half of the pairs coincide, ``1`` when all do) are chosen on the device: no host read."""
    M = dist.size(0)
    one = torch.ones((), dtype=dist.dtype, device=dist.device)
    if bandwidth is None or (isinstance(bandwidth, str) and bandwidth == "median"):
        if M < 2:
            return one
        iu = torch.triu_indices(M, M, offset=1, device=dist.device)
        med = _median_or_max(dist[iu[0], iu[1]])
        # all particles coincide (med = 0): K = 1 and no repulsion for any positive h
        return torch.where(med <= 0, one, med**2 / math.log(M))
    if isinstance(bandwidth, str):
        if bandwidth != "liu":
            raise GraphRMAError(f"bandwidth: expected None, 'median', 'liu' or a positive number, got {bandwidth!r}")
        # Liu & Wang's SVGD code: median over all M^2 entries (diagonal zeros included), log(M + 1).
        med = _median_or_max(dist.flatten())
        return torch.where(med <= 0, one, med**2 / math.log(M + 1))
    if isinstance(bandwidth, numbers.Real) and not isinstance(bandwidth, bool):
        if not (math.isfinite(float(bandwidth)) and float(bandwidth) > 0):
            raise GraphRMAError(f"h: expected a positive finite bandwidth, got {bandwidth!r}")
        return float(bandwidth) / s / s
    h = torch.as_tensor(bandwidth, dtype=dist.dtype, device=dist.device)
    if h.numel() != 1 or not bool(torch.isfinite(h)) or not bool(h > 0):
        raise GraphRMAError(f"h: expected a positive finite bandwidth, got {bandwidth!r}")
    return h.reshape(()) / s / s


def median_bandwidth(theta: Tensor) -> Tensor:
    r"""The paper's bandwidth :math:`h = \mathrm{med}^2 / \log M`.

    ``med`` is the median (numpy's: the mean of the two middle values for an even count) of the Euclidean
    distances over the :math:`M(M-1)/2` distinct pairs. Defined cases: when more than half of the pairs coincide
    (``med = 0``) the largest pairwise distance is used instead; when all particles coincide ``h = 1`` (the kernel
    is then 1 and the repulsion 0 for any positive ``h``). Computed in float32 (float64 for float64 input).

    Args:
        theta: particles, shape ``[M, D]`` with ``M >= 2``.
    """
    _check_theta(theta)
    if theta.size(0) < 2:
        raise GraphRMAError(f"theta: median_bandwidth needs at least M = 2 particles, got M = {theta.size(0)}")
    x, s = _normalize(theta)
    return _normalized_bandwidth(_pairwise_distances(x), None, s) * s * s


def _kernel_normalized(x: Tensor, s: Tensor, bandwidth: Bandwidth) -> Tuple[Tensor, Tensor, Tensor]:
    """Kernel, repulsion and bandwidth from normalised particles, all in the normalised coordinates.

    The repulsion in the original scale is ``rep_n / s``, the bandwidth ``h_n * s**2``.
    """
    dist = _pairwise_distances(x)
    h_n = _normalized_bandwidth(dist, bandwidth, s)
    K = torch.exp(-(dist**2) / h_n)
    # repulsion_i = sum_j (2/h) (theta_i - theta_j) K_ij, with theta = s * x: (2 / (h_n s)) (x_i rowsum(K) - K x)
    rep_n = (2.0 / h_n) * (x * K.sum(dim=1, keepdim=True) - K @ x)
    return K, rep_n, h_n


def _step_limit(rep_n: Tensor, h_n: Tensor, s: Tensor, alpha: float, eps: float, M: int, max_step: float) -> Tensor:
    r"""Per-particle factors ``f_i`` in ``(0, 1]`` that bound one step's repulsive displacement (see
    :mod:`graph_rma.particles`, *numerical safety*): :math:`\epsilon |lpha| f_i \|\mathrm{rep}_i\| / M \le
    c \sqrt{h}`, computed in float64 from the normalised quantities so that neither side overflows. Returns
    ``f`` ``[M, 1]``; ``rep_n * (f / s)`` is the (limited) repulsion in the original scale."""
    norm = rep_n.double().norm(dim=1)  # ||rep_i|| = norm / s
    s64, h64 = s.double(), h_n.double()
    # eps |alpha| norm / (s M) <= c sqrt(h_n) s  <=>  norm <= c sqrt(h_n) s^2 M / (eps |alpha|)
    limit = max_step * torch.sqrt(h64) * s64 * s64 * M / (eps * abs(alpha))
    f = torch.where(norm > limit, limit / norm.clamp_min(torch.finfo(torch.float64).tiny), torch.ones_like(norm))
    return f.unsqueeze(1)


def _finite(x: Tensor, dtype: torch.dtype) -> Tensor:
    """``x`` cast to ``dtype``, with values beyond the dtype's range clamped to its largest finite value (and NaN,
    from an overflowing repulsion of absurdly close particles, set to 0), on the device: no host read."""
    big = torch.finfo(dtype).max
    if dtype != x.dtype and torch.finfo(dtype).max < torch.finfo(x.dtype).max:
        x = x.clamp(-big, big)
    else:
        x = torch.nan_to_num(x, nan=0.0, posinf=big, neginf=-big)
    return x.to(dtype)


def rbf_kernel(theta: Tensor, h: Bandwidth = None) -> Tuple[Tensor, Tensor]:
    r"""RBF kernel matrix and the summed kernel gradient (the repulsion) of ``M`` particles.

    .. math::
        K_{ij} = \exp(-\|\theta_i - \theta_j\|^2 / h), \qquad
        \mathrm{rep}_i = \sum_j \nabla_{\theta_j} k(\theta_j, \theta_i)
                       = \sum_j \frac{2}{h} (\theta_i - \theta_j) K_{ij}.

    Args:
        theta: particles ``[M, D]``.
        h: bandwidth; ``None`` or ``"median"`` for :func:`median_bandwidth`, ``"liu"`` for Liu's
            ``med^2 / log(M + 1)`` over all entries, or a positive number.

    Returns:
        ``(K, repulsion)`` of shapes ``[M, M]`` and ``[M, D]``, in float32 (float64 for float64 input; half
        precision inputs are computed in float32). Never NaN: scales are normalised before squaring.
    """
    _check_theta(theta)
    x, s = _normalize(theta)
    K, rep_n, _ = _kernel_normalized(x, s, h)
    return K, _finite(rep_n / s, x.dtype)


def svgd_direction(
    theta: Tensor,
    grad: Tensor,
    alpha: float = 1.0,
    h: Bandwidth = None,
    kernel_grad: bool = True,
    allow_attraction: bool = False,
) -> Tensor:
    r"""SVGD direction, Eq. (4) of the repulsive-attention paper with repulsive weight ``alpha``.

    .. math::
        \phi_i = \frac{1}{M} \sum_j \left[-K_{ji}\, g_j + \alpha\, \nabla_{\theta_j} k(\theta_j, \theta_i)\right]

    with :math:`g_j` = ``grad[j]`` the loss gradient of particle ``j``. With ``M = 1`` there is no repulsion and
    ``phi = -grad`` exactly.

    Args:
        theta: particles ``[M, D]``.
        grad: loss gradients ``[M, D]`` (the gradient of the potential :math:`U`).
        alpha: repulsive weight (``0`` gives kernel-smoothed gradient descent).
        h: bandwidth, see :func:`rbf_kernel`.
        kernel_grad: ``True`` (Eq. 4) smooths the gradients with the kernel, mixing heads' gradients;
            ``False`` lets each particle follow its own gradient, ``phi_i = -g_i + (alpha / M) rep_i``, the
            repulsion then being the only coupling (an ablation, not the paper's method).
        allow_attraction: accept a negative ``alpha`` (the kernel term then attracts).

    Returns:
        ``phi`` with the shape and dtype of ``theta``. This is the paper's equation exactly, without the
        samplers' step limit (see *numerical safety* in :mod:`graph_rma.particles`).
    """
    _check_theta(theta)
    _check_grad(theta, grad)
    alpha = _check_alpha(alpha, allow_attraction)
    _check_bandwidth(h)
    phi, _, finite = _svgd(theta, grad, alpha, h, kernel_grad)
    if finite is not None and not bool(finite):
        raise GraphRMAError("theta: contains NaN or Inf")
    return phi


def _svgd(
    theta: Tensor,
    grad: Tensor,
    alpha: float,
    h: Bandwidth,
    kernel_grad: bool,
    eps: Optional[float] = None,
    max_step: Optional[float] = None,
) -> Tuple[Tensor, Optional[Tensor], Optional[Tensor]]:
    """``(phi, limited, finite)`` without a host read; with ``eps`` and ``max_step`` the repulsion is step-limited
    (:func:`_step_limit`). ``limited`` (whether the limit acted) and ``finite`` (whether ``theta`` is finite) are
    0-d bool tensors on the device, or ``None`` where they do not apply (no limit; ``M = 1``)."""
    M = theta.size(0)
    if M == 1:
        return (-grad).to(theta.dtype), None, None
    x, s, finite = _normalize_flagged(theta)
    K, rep_n, h_n = _kernel_normalized(x, s, h)
    g = grad.to(x.dtype)
    drive = K.t() @ g if kernel_grad else M * g
    limited = None
    if eps is not None and max_step is not None and alpha != 0.0:
        f = _step_limit(rep_n, h_n, s, alpha, eps, M, max_step)
        limited = (f < 1.0).any()
        rep = rep_n * (f / s.double()).to(x.dtype)
    else:
        rep = rep_n / s
    phi = (-drive + alpha * rep) / M
    return _finite(phi, theta.dtype), limited, finite


def _noise(shape, device, dtype, generator: Optional[torch.Generator]) -> Tensor:
    gen_device = generator.device if generator is not None else device
    xi = torch.randn(shape, generator=generator, device=gen_device, dtype=dtype)
    return xi.to(device)


def _check_positive(name: str, value: float) -> None:
    if not (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0):
        raise GraphRMAError(f"{name}: expected a positive finite number, got {value!r}")


def _check_flag(name: str, value: bool) -> bool:
    """``value`` if it is a bool (numpy's included); a string such as ``"false"`` is refused, never read as True."""
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return bool(value)
    raise GraphRMAError(f"{name}: expected True or False, got {value!r}")


def spos_direction(
    theta: Tensor,
    grad: Tensor,
    alpha: float = 1.0,
    beta: float = 1.0,
    eps: float = 1.0,
    h: Bandwidth = None,
    generator: Optional[torch.Generator] = None,
    kernel_grad: bool = True,
    allow_attraction: bool = False,
) -> Tensor:
    r"""SPOS direction, Eq. (5): :math:`\phi^{SVGD}_i - g_i / \beta + \sqrt{2 / (\beta \epsilon)}\, \xi_i`.

    ``xi ~ N(0, I)`` is drawn (in float32, or float64 for float64 input) from ``generator`` on the generator's
    device, so a fixed seed reproduces it on CPU and GPU alike and on every process of a distributed run.

    Arguments theta, grad, alpha, h, kernel_grad, allow_attraction: as in :func:`svgd_direction`.

    Args:
        beta: inverse temperature of the Langevin part (``> 0``).
        eps: the step the update is taken with (``> 0``); it scales the noise.
        generator: source of the Gaussian noise (``None``: torch's global generator).
    """
    _check_positive("beta", beta)
    _check_positive("eps", eps)
    phi = svgd_direction(theta, grad, alpha=alpha, h=h, kernel_grad=kernel_grad, allow_attraction=allow_attraction)
    return _spos_noise(phi, theta, grad, beta, eps, generator)


def _spos_noise(
    phi: Tensor, theta: Tensor, grad: Tensor, beta: float, eps: float, generator: Optional[torch.Generator]
) -> Tensor:
    work = _work_dtype(theta.dtype)
    xi = _noise(theta.shape, theta.device, work, generator)
    out = phi.to(work) - grad.to(work) / beta + math.sqrt(2.0 / (beta * eps)) * xi
    return _finite(out, theta.dtype)


def sgld_direction(
    grad: Tensor,
    beta: float = 1.0,
    eps: float = 1.0,
    generator: Optional[torch.Generator] = None,
) -> Tensor:
    r"""SGLD direction (the paper's Table 8 baseline): :math:`-g_i + \sqrt{2 / (\beta \epsilon)}\, \xi_i`.

    Each particle moves independently: the update :math:`\theta \leftarrow \theta + \epsilon \phi` is Langevin
    dynamics :math:`\theta - \epsilon g + \sqrt{2 \epsilon / \beta}\,\xi` at inverse temperature ``beta``.
    """
    _check_theta(grad, "grad")
    _check_positive("beta", beta)
    _check_positive("eps", eps)
    work = _work_dtype(grad.dtype)
    xi = _noise(grad.shape, grad.device, work, generator)
    return _finite(-grad.to(work) + math.sqrt(2.0 / (beta * eps)) * xi, grad.dtype)
