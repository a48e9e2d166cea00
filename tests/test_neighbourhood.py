"""Per-head attention of a node's neighbourhood: networkx graph (exact weights) and the PNG drawn from it."""

import pytest
import torch
from torch_geometric.nn import GATConv

from graph_rma.diagnostics import (
    neighbourhood_attention_figure,
    neighbourhood_attention_graph,
    plot_neighbourhood_attention,
)

PNG = b"\x89PNG\r\n\x1a\n"


def _attention():
    torch.manual_seed(0)
    # 0 <- 1, 2, 3; 1 <- 4; 2 <- 4, 5; 6 -> 7 is elsewhere. GATConv adds self-loops.
    edge_index = torch.tensor([[1, 2, 3, 4, 4, 5, 6], [0, 0, 0, 1, 2, 2, 7]])
    conv = GATConv(5, 4, heads=3).eval()
    _, (ei, alpha) = conv(torch.randn(8, 5), edge_index, return_attention_weights=True)
    return ei, alpha.detach()


def test_graph_holds_each_heads_exact_attention():
    ei, alpha = _attention()
    g = neighbourhood_attention_graph(ei, alpha, node=0)
    assert sorted(g.edges) == [(0, 0), (1, 0), (2, 0), (3, 0)]
    for e, (j, i) in enumerate(ei.t().tolist()):
        if i == 0:
            assert g.edges[j, i]["attention"] == pytest.approx(alpha[e].double().tolist(), abs=0)
    # softmax over the incoming edges of node 0, per head
    total = torch.tensor([a for _, _, a in g.edges(data="attention")]).sum(0)
    assert total.tolist() == pytest.approx([1.0] * 3, abs=1e-6)
    two = neighbourhood_attention_graph(ei, alpha, node=0, hops=2)
    assert sorted(two.edges) == [(0, 0), (1, 0), (1, 1), (2, 0), (2, 2), (3, 0), (3, 3), (4, 1), (4, 2), (5, 2)]
    assert dict(two.nodes(data="hop")) == {0: 0, 1: 1, 2: 1, 3: 1, 4: 2, 5: 2}
    with pytest.raises(ValueError, match="node: expected a node with incoming edges"):
        neighbourhood_attention_graph(ei, alpha, node=42)
    with pytest.raises(ValueError, match="attention: expected"):
        neighbourhood_attention_graph(ei, alpha[:-1], node=0)


def test_png_edge_widths_are_the_attention_weights(tmp_path):
    pytest.importorskip("matplotlib")
    ei, alpha = _attention()
    fig = neighbourhood_attention_figure(ei, alpha, node=2, hops=2, width_scale=5.0)
    g = neighbourhood_attention_graph(ei, alpha, node=2, hops=2)
    axes = fig.get_axes()
    assert [ax.get_title() for ax in axes] == ["head 0", "head 1", "head 2"]
    for h, ax in enumerate(axes):
        widths = [p.get_linewidth() for p in ax.patches]  # one arrow per edge, in the graph's edge order
        assert len(widths) == g.number_of_edges() == 5  # 2<-2, 2<-4, 2<-5, 4<-4, 5<-5
        assert widths == pytest.approx([5.0 * a[h] for _, _, a in g.edges(data="attention")], rel=1e-6)
    path = plot_neighbourhood_attention(ei, alpha, node=2, path=tmp_path / "n2.png", hops=2, heads=[1], layout="spring")
    data = path.read_bytes()
    assert data[:8] == PNG and len(data) > 1000
    with pytest.raises(ValueError, match="heads: expected indices"):
        plot_neighbourhood_attention(ei, alpha, node=2, path=tmp_path / "x.png", heads=[3])
    assert not (tmp_path / "x.png").exists()
