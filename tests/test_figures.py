"""The one way the package makes and writes a picture: a Figure on the Agg canvas, written whole as a PNG."""

import struct

import pytest
from test_optional import _hide

from graph_rma.engine.figures import new_figure, save_png
from graph_rma.engine.optional import MissingExtraError

pytest.importorskip("matplotlib")


def _png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])  # the IHDR chunk's width and height in pixels


def test_save_png_writes_the_figure_whole_at_its_resolution(tmp_path):
    fig = new_figure(3.0, 2.0, "a test picture", dpi=50)
    fig.add_subplot().plot([0, 1], [1, 0])
    out = save_png(fig, tmp_path / "sub" / "a.png")  # the folder is made
    assert out == tmp_path / "sub" / "a.png"
    assert _png_size(out) == (150, 100)  # 3 x 2 inches at the figure's 50 dpi
    save_png(fig, out, dpi=20)  # replaces it, at the resolution asked for
    assert _png_size(out) == (60, 40)
    assert sorted(p.name for p in out.parent.iterdir()) == ["a.png"]  # no temporary file left behind


def test_new_figure_without_matplotlib_names_the_picture_and_the_extra(monkeypatch):
    _hide(monkeypatch, "matplotlib")
    with pytest.raises(
        MissingExtraError, match=r"^the evidence picture needs matplotlib: pip install 'graph-rma\[plots\]'$"
    ):
        new_figure(3.0, 2.0, "the evidence picture")
