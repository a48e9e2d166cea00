"""NeighborLoader mini-batch training with a sampler attached; runs where pyg-lib or torch-sparse is installed."""

import importlib.util
import pathlib

import pytest
import torch
from torch_geometric.data import Data

spec = importlib.util.spec_from_file_location(
    "neighbor_sampling", pathlib.Path(__file__).resolve().parents[1] / "examples" / "neighbor_sampling.py"
)
example = importlib.util.module_from_spec(spec)
spec.loader.exec_module(example)

OK, WHY = example.neighbor_loader_available()


def toy_data(N=400):
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 2, (N,), generator=g)
    x = torch.randn(N, 8, generator=g) + 2.0 * y[:, None].float()  # separable
    edge_index = torch.randint(0, N, (2, 2000), generator=g)
    return Data(x=x, edge_index=edge_index, y=y, train_mask=torch.ones(N, dtype=torch.bool))


@pytest.mark.skipif(OK, reason="pyg-lib or torch-sparse is installed: the example runs (tested below)")
def test_without_the_extensions_neighbor_loader_really_fails():
    """The example's check is not over-cautious: without pyg-lib and torch-sparse PyG's loader itself refuses."""
    with pytest.warns(UserWarning, match="pyg-lib"), pytest.raises(ImportError, match="pyg-lib.*torch-sparse"):
        example.train(toy_data(40), epochs=1, batch_size=8)


def test_user_sees_the_install_hint_when_the_extensions_are_missing(monkeypatch, capsys):
    """What ``python examples/neighbor_sampling.py`` prints: one line on stderr named like every example's error
    (nothing on stdout), exit status 1, before any data is loaded."""
    import torch_geometric.typing as pyg_typing

    monkeypatch.setattr(pyg_typing, "WITH_PYG_LIB", False)
    monkeypatch.setattr(pyg_typing, "WITH_TORCH_SPARSE", False)
    assert example.neighbor_loader_available() == (
        False,
        "PyG's NeighborLoader needs pyg-lib or torch-sparse, and neither is installed",
    )
    assert example.main(["--epochs", "1", "--root", "/nonexistent"]) == 1
    printed = capsys.readouterr()
    assert printed.out == "" and printed.err == (
        "neighbor_sampling.py: PyG's NeighborLoader needs pyg-lib or torch-sparse, and neither is installed (see this "
        "file's docstring for the install)\n"
    )
    monkeypatch.setattr(pyg_typing, "WITH_TORCH_SPARSE", True)
    assert example.neighbor_loader_available() == (True, "")


@pytest.mark.skipif(not OK, reason=WHY)
def test_minibatch_training_with_svgd_learns():
    model, losses = example.train(toy_data(), epochs=5, batch_size=64)
    assert all(torch.isfinite(torch.tensor(losses)))
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5
