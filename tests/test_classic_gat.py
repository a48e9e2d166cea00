"""ClassicGAT (Luo et al.'s tuned classic GAT): its equation on a small graph against stock PyG, and what each
option changes."""

import pytest
import torch
import torch.nn.functional as F
from torch_geometric.nn import GATConv

from graph_rma.models.classic_gat import ClassicGAT


def _graph():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(12, 5, generator=g)
    edge_index = torch.randint(0, 12, (2, 40), generator=g)
    return x, edge_index


def _stock_conv(model, i):
    conv = model.convs[i]
    stock = GATConv(conv.in_channels, conv.out_channels, heads=conv.heads, bias=False, add_self_loops=model.self_loops)
    stock.load_state_dict(conv.state_dict())
    return stock.eval()


@pytest.mark.parametrize("residual", [True, False])
def test_one_layer_is_the_papers_equation_with_a_stock_gatconv(residual):
    x, ei = _graph()
    torch.manual_seed(0)
    model = ClassicGAT(5, 3, hidden=8, layers=1, dropout=0.0, norm="none", residual=residual).eval()
    z = _stock_conv(model, 0)(x, ei)
    if residual:
        z = z + model.residuals[0](x)
    torch.testing.assert_close(model(x, ei), model.output(F.relu(z)))


def test_two_layers_with_layer_norm_and_a_pre_linear_layer():
    x, ei = _graph()
    torch.manual_seed(0)
    model = ClassicGAT(5, 3, hidden=8, heads=2, layers=2, dropout=0.3, norm="layer", pre_linear=True).eval()
    assert model.convs[0].in_channels == 8 and model.convs[0].heads == 2 and model.convs[0].out_channels == 4
    h = model.input(x)  # eval: no dropout
    for i in range(2):
        h = F.relu(model.norms[i](_stock_conv(model, i)(h, ei) + model.residuals[i](h)))
    torch.testing.assert_close(model(x, ei), model.output(h))


def test_batch_norm_normalises_each_layer_in_training():
    x, ei = _graph()
    torch.manual_seed(0)
    model = ClassicGAT(5, 3, hidden=8, layers=1, dropout=0.0, norm="batch").train()
    assert isinstance(model.norms[0], torch.nn.BatchNorm1d)
    z = model.norms[0](model.convs[0](x, ei) + model.residuals[0](x))  # what forward feeds to ReLU
    torch.testing.assert_close(z.mean(0), torch.zeros(8), atol=1e-5, rtol=0)
    model(x, ei)
    assert model.norms[0].num_batches_tracked.item() == 2  # forward ran the same normalisation


def test_lean_path_gives_the_same_outputs_and_the_kwargs_rebuild_the_model():
    x, ei = _graph()
    torch.manual_seed(0)
    plain = ClassicGAT(5, 3, hidden=8, heads=2, layers=3, dropout=0.0).eval()
    lean = ClassicGAT(**{**plain.model_kwargs, "lean": True}).eval()
    lean.load_state_dict(plain.state_dict())
    torch.testing.assert_close(lean(x, ei), plain(x, ei), atol=1e-5, rtol=1e-5)
    out, atts, first = plain.forward_with_attention(x, ei)
    assert len(atts) == 3 and first.shape == (12, 2, 4)
    torch.testing.assert_close(plain.head_outputs(x, ei), first)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"hidden": 10, "heads": 4}, "hidden: expected a multiple of heads"),
        ({"norm": "group"}, "norm: expected one of"),
        ({"layers": 0}, "layers: expected a positive integer"),
    ],
)
def test_bad_settings_are_one_line(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ClassicGAT(5, 3, **kwargs)
