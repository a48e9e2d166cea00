r"""Summary statistics every study reports: mean and sample standard deviation, and paired comparisons.

For two arms run on the same seeds (same initialisation, data order and split), the paired difference
:math:`d_s = b_s - a_s` has mean :math:`\bar d` and standard error

.. math::
    \mathrm{SE}(\bar d) = \frac{\mathrm{sd}(d)}{\sqrt{n}}, \qquad
    \mathrm{sd}(d) = \sqrt{\tfrac{1}{n-1} \textstyle\sum_s (d_s - \bar d)^2},

and :math:`\bar d / \mathrm{SE}` says how many standard errors the difference is from zero. Wins, ties and losses
count the seeds on which ``b`` is above, equal to, or below ``a``.
"""

from __future__ import annotations

import math
import statistics
from typing import Dict, Mapping, Sequence, Tuple

__all__ = ["format_spread", "mean_std", "paired_comparison"]


def mean_std(values: Sequence[float]) -> Tuple[float, float]:
    """Mean and sample standard deviation (``nan`` for no values, std 0 for one value)."""
    values = [float(v) for v in values]
    if not values:
        return float("nan"), float("nan")
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def paired_comparison(a: Mapping[int, float], b: Mapping[int, float]) -> Dict[str, float]:
    """``b - a`` over the seeds both have: ``n``, ``mean``, ``se``, ``z`` (= mean / se), ``wins``/``ties``/``losses``.

    Args:
        a: one value per seed (``{seed: value}``), the reference arm.
        b: one value per seed, the compared arm; only the seeds in both are compared.
    """
    seeds = sorted(set(a) & set(b))
    d = [float(b[s]) - float(a[s]) for s in seeds]
    n = len(d)
    if n == 0:
        return {"n": 0, "mean": float("nan"), "se": float("nan"), "z": float("nan"), "wins": 0, "ties": 0, "losses": 0}
    mean = statistics.fmean(d)
    se = statistics.stdev(d) / math.sqrt(n) if n > 1 else float("nan")
    z = mean / se if se and math.isfinite(se) and se > 0 else float("nan")
    return {
        "n": n,
        "mean": mean,
        "se": se,
        "z": z,
        "wins": sum(x > 0 for x in d),
        "ties": sum(x == 0 for x in d),
        "losses": sum(x < 0 for x in d),
    }


def format_spread(mean: float, spread: float, n: int, digits: int = 2, sign: bool = False) -> str:
    """``"mean ± spread"`` with ``digits`` decimals, or ``mean`` alone when ``n < 2`` values stand behind it or the
    spread is not finite: one seed has no standard deviation or standard error to state (``± 0.00``, ``± nan``).
    ``sign``: always print the mean's sign (a difference)."""
    value = f"{mean:+.{digits}f}" if sign else f"{mean:.{digits}f}"
    if n < 2 or not math.isfinite(spread):
        return value
    return f"{value} ± {spread:.{digits}f}"
