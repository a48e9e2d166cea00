r"""Pictures without pyplot: every picture the package draws starts from :func:`new_figure` (a matplotlib ``Figure``
on the Agg canvas: no global state, no display) and is written by :func:`save_png` (whole or not at all, as the
result files are). Both need matplotlib, the ``plots`` extra: without it :func:`new_figure` raises
:class:`~graph_rma.engine.optional.MissingExtraError` naming ``what`` needs it.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Optional

from .files import PathLike, atomic_write_bytes
from .optional import require

__all__ = ["new_figure", "save_png"]


def new_figure(width: float, height: float, what: str, dpi: float = 100.0):
    """An empty ``Figure`` of ``width`` x ``height`` inches at ``dpi``, drawn on the Agg canvas.

    Args:
        width: the width in inches.
        height: the height in inches.
        what: what the picture is, for the one-line error without matplotlib (``"the accuracy plot"``).
        dpi: dots per inch (:func:`save_png` writes at this resolution unless told another).
    """
    figure = require("matplotlib.figure", "plots", what)
    backend = require("matplotlib.backends.backend_agg", "plots", what)
    fig = figure.Figure(figsize=(width, height), dpi=dpi)
    backend.FigureCanvasAgg(fig)
    return fig


def save_png(fig, path: PathLike, dpi: Optional[float] = None) -> Path:
    """Write ``fig`` as a PNG at ``path`` (its folder made if needed) through a temporary file, so that a reader
    never sees half a picture; at ``dpi``, or the figure's own when ``None``. Returns ``path``."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi="figure" if dpi is None else dpi)
    return atomic_write_bytes(path, buffer.getvalue())
