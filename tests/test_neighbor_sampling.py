"""NeighborLoader mini-batch training with a sampler attached; runs where pyg-lib or torch-sparse is installed."""
import importlib.util
import pathlib

import pytest
import torch
from torch_geometric.data import Data

spec = importlib.util.spec_from_file_location(
    "neighbor_sampling", pathlib.Path(__file__).resolve().parents[1] / "examples" / "neighbor_sampling.py")
example = importlib.util.module_from_spec(spec)
spec.loader.exec_module(example)

OK, WHY = example.neighbor_loader_available()


def test_availability_reason_is_explicit():
    assert OK or "pyg-lib" in WHY and "torch-sparse" in WHY


@pytest.mark.skipif(not OK, reason=WHY)
def test_minibatch_training_with_svgd_learns():
    g = torch.Generator().manual_seed(0)
    N = 400
    y = torch.randint(0, 2, (N,), generator=g)
    x = torch.randn(N, 8, generator=g) + 2.0 * y[:, None].float()  # separable
    edge_index = torch.randint(0, N, (2, 2000), generator=g)
    data = Data(x=x, edge_index=edge_index, y=y, train_mask=torch.ones(N, dtype=torch.bool))
    model, losses = example.train(data, epochs=5, batch_size=64)
    assert all(torch.isfinite(torch.tensor(losses)))
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5
