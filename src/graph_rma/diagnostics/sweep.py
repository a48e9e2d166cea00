r"""Heads-count sweep (the repulsive-attention paper's Figure 3): error as a function of the number of heads M.

The training itself is the caller's: ``train_and_eval(num_heads) -> error`` (or ``(num_heads, seed) -> error``
when ``seeds`` is given) trains one model and returns its test error. :func:`heads_sweep` loops over the head
counts and seeds and summarises; :func:`graph_rma.diagnostics.plot_heads_sweep` draws the curves.
"""

from __future__ import annotations

import math
from typing import Callable, Dict, List, Optional, Sequence

from .._errors import GraphRMAError

__all__ = ["heads_sweep"]


def heads_sweep(
    train_and_eval: Callable[..., float],
    head_counts: Sequence[int],
    seeds: Optional[Sequence[int]] = None,
    progress: bool = False,
) -> Dict[str, List]:
    """Run ``train_and_eval`` for every head count (and seed) and return ``{"num_heads", "errors", "mean",
    "std"}``: ``errors[i]`` lists the runs for ``num_heads[i]``; ``std`` is the population standard deviation
    (0 for a single run)."""
    if not callable(train_and_eval):
        raise GraphRMAError("train_and_eval: expected a callable num_heads -> error")
    counts = list(head_counts)
    if not counts or any(not isinstance(m, int) or isinstance(m, bool) or m < 1 for m in counts):
        raise GraphRMAError(f"head_counts: expected a non-empty list of positive integers, got {head_counts!r}")
    if len(set(counts)) != len(counts):
        raise GraphRMAError(f"head_counts: expected distinct head counts, got {counts}")
    if seeds is not None and len(list(seeds)) == 0:
        raise GraphRMAError("seeds: expected at least one seed (or None)")
    jobs = [(m, s) for m in counts for s in (seeds if seeds is not None else [None])]
    if progress:
        from tqdm.auto import tqdm

        jobs = tqdm(jobs, desc="heads sweep")
    runs: Dict[int, List[float]] = {m: [] for m in counts}
    for m, s in jobs:
        err = train_and_eval(m) if s is None else train_and_eval(m, s)
        err = float(err)
        if not math.isfinite(err):
            raise GraphRMAError(f"train_and_eval: returned a non-finite error {err} for num_heads={m}")
        runs[m].append(err)
    errors = [runs[m] for m in counts]
    mean = [sum(e) / len(e) for e in errors]
    std = [math.sqrt(sum((x - mu) ** 2 for x in e) / len(e)) for e, mu in zip(errors, mean)]
    return {"num_heads": counts, "errors": errors, "mean": mean, "std": std}
