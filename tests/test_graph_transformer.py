import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.data import Batch, Data

from graph_rma import SVGD, DropAttention, find_particle_groups
from graph_rma.nn import GraphTransformerEncoder, GraphTransformerLayer


def small_graph(seed=0, n=6, extra_edges=8):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(0, n, (extra_edges,), generator=g)
    dst = torch.randint(0, n, (extra_edges,), generator=g)
    edges = {(int(s), int(d)) for s, d in zip(src, dst) if s != d} | {(i, i) for i in range(n)}
    edge_index = torch.tensor(sorted(edges), dtype=torch.long).t()
    return torch.randn(n, 16, generator=g), edge_index


def dense_reference(layer: GraphTransformerLayer, x, edge_index):
    """The same block with a dense [H, N, N] masked softmax (mask[i, j] = edge j -> i)."""
    N, H, d = x.size(0), layer.heads, layer.head_dim
    mask = torch.zeros(N, N, dtype=torch.bool)
    mask[edge_index[1], edge_index[0]] = True
    q = layer.lin_query(x).view(N, H, d).transpose(0, 1)
    k = layer.lin_key(x).view(N, H, d).transpose(0, 1)
    v = layer.lin_value(x).view(N, H, d).transpose(0, 1)
    scores = q @ k.transpose(1, 2) / math.sqrt(d)
    attn = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)  # [H, N, N]
    a = layer.lin_out((attn @ v).transpose(0, 1).reshape(N, H * d))
    h = F.layer_norm(x + a, (x.size(1),), layer.norm1.weight, layer.norm1.bias)
    f = layer.ffn_out(F.prelu(layer.ffn_in(h), layer.act.weight))
    out = F.layer_norm(h + f, (x.size(1),), layer.norm2.weight, layer.norm2.bias)
    return out, attn


def test_attention_and_output_match_dense_masked_softmax():
    torch.manual_seed(0)
    x, edge_index = small_graph()
    layer = GraphTransformerLayer(16, heads=4, dropout=0.3, attention_dropout=0.3).eval()
    out, (ei, alpha) = layer(x, edge_index, return_attention_weights=True)
    ref_out, ref_attn = dense_reference(layer, x, edge_index)
    assert alpha.shape == (edge_index.size(1), 4)
    # alpha of edge j -> i for head h is the dense attn[h, i, j]
    torch.testing.assert_close(alpha, ref_attn[:, edge_index[1], edge_index[0]].t(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(out, ref_out, rtol=1e-5, atol=1e-5)
    # each target's incoming weights sum to one per head
    sums = torch.zeros(x.size(0), 4).index_add_(0, edge_index[1], alpha)
    torch.testing.assert_close(sums, torch.ones_like(sums))


def test_scaled_by_head_dim_not_hidden():
    torch.manual_seed(1)
    x, edge_index = small_graph(1)
    layer = GraphTransformerLayer(16, heads=4).eval()
    _, (_, alpha) = layer(x, edge_index, return_attention_weights=True)
    q = layer.lin_query(x).view(-1, 4, 4)
    k = layer.lin_key(x).view(-1, 4, 4)
    raw = (q[edge_index[1]] * k[edge_index[0]]).sum(-1)
    from torch_geometric.utils import softmax

    # head dim 4: scores divided by sqrt(4) = 2, not by sqrt(hidden) = 4 as in the original

    torch.testing.assert_close(alpha, softmax(raw / 2.0, edge_index[1], num_nodes=x.size(0)))
    assert not torch.allclose(alpha, softmax(raw / 4.0, edge_index[1], num_nodes=x.size(0)))


def test_keys_and_values_receive_gradients():
    torch.manual_seed(0)
    x, edge_index = small_graph()
    layer = GraphTransformerLayer(16, heads=4)
    layer(x, edge_index).pow(2).sum().backward()
    for lin in (layer.lin_query, layer.lin_key, layer.lin_value):
        assert lin.weight.grad is not None and lin.weight.grad.abs().sum() > 0


def test_attention_dropout_only_in_training():
    torch.manual_seed(0)
    x, edge_index = small_graph()
    layer = GraphTransformerLayer(16, heads=4, dropout=0.0, attention_dropout=0.5)
    layer.eval()
    torch.testing.assert_close(layer(x, edge_index), layer(x, edge_index))
    layer.train()
    torch.manual_seed(1)
    a = layer(x, edge_index)
    torch.manual_seed(2)
    b = layer(x, edge_index)
    assert not torch.allclose(a, b)


class RecordingDrop(DropAttention):
    """A graph_rma.DropAttention whose softmax over survivors zeroes every weight and records the call."""

    def __init__(self):
        super().__init__(0.5)
        self.calls = []

    def sparse_softmax(self, logits, src, dst, num_src, num_dst, ptr=None, generator=None, **kwargs):
        self.calls.append((logits.shape, num_dst))
        return torch.zeros_like(logits)


def test_drop_attention_module_is_called_in_training_only():
    torch.manual_seed(0)
    x, edge_index = small_graph()
    drop = RecordingDrop()
    layer = GraphTransformerLayer(16, heads=4, dropout=0.0, drop_attention=drop)
    layer.eval()
    layer(x, edge_index)
    assert drop.calls == []
    layer.train()
    out = layer(x, edge_index)
    assert drop.calls == [((edge_index.size(1), 4), x.size(0))]
    # all weights dropped: the attention sub-block contributes only lin_out's bias (zero at init)
    h = layer.norm1(x)
    ref = layer.norm2(h + layer.ffn_out(layer.act(layer.ffn_in(h))))
    torch.testing.assert_close(out, ref)


def test_batched_graphs_equal_separate_graphs():
    torch.manual_seed(0)
    (x1, e1), (x2, e2) = small_graph(0, n=5), small_graph(3, n=7)
    enc = GraphTransformerEncoder(16, num_layers=2, heads=4).eval()
    batch = Batch.from_data_list([Data(x=x1, edge_index=e1), Data(x=x2, edge_index=e2)])
    out = enc(batch.x, batch.edge_index)
    torch.testing.assert_close(out[:5], enc(x1, e1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out[5:], enc(x2, e2), rtol=1e-5, atol=1e-5)
    _, attention = enc(batch.x, batch.edge_index, return_attention=True)
    assert len(attention) == 2 and attention[0][0].shape == (batch.edge_index.size(1), 4)
    assert torch.equal(attention[0][1], batch.edge_index[1])


def test_heads_are_particles():
    enc = GraphTransformerEncoder(16, num_layers=2, heads=4)
    groups = find_particle_groups(enc)
    assert [g.name for g in groups] == ["layers.0", "layers.1"]
    assert groups[0].roles == ["key", "query", "value"]
    # per head: 4 rows x 16 inputs + 4 biases, for query, key and value
    assert groups[0].theta().shape == (4, 3 * (4 * 16 + 4))
    # head h is rows h*4:(h+1)*4 of lin_query.weight
    torch.testing.assert_close(groups[0].theta()[2, :64], enc.layers[0].lin_query.weight[8:12].reshape(-1))
    qk = find_particle_groups(enc, roles=["query", "key"])
    assert qk[0].theta().shape == (4, 2 * 68)


def test_svgd_replaces_head_gradients():
    torch.manual_seed(0)
    x, edge_index = small_graph()
    enc = GraphTransformerEncoder(16, num_layers=1, heads=4)
    sampler = SVGD(enc, alpha=1.0)
    enc(x, edge_index).pow(2).sum().backward()
    before = enc.layers[0].lin_key.weight.grad.clone()
    ffn_before = enc.layers[0].ffn_in.weight.grad.clone()
    sampler.step()
    assert not torch.allclose(before, enc.layers[0].lin_key.weight.grad)
    assert torch.equal(ffn_before, enc.layers[0].ffn_in.weight.grad)  # not a head parameter


def test_bad_arguments():
    with pytest.raises(ValueError, match="heads"):
        GraphTransformerLayer(10, heads=4)
    with pytest.raises(ValueError, match="attention_dropout"):
        GraphTransformerLayer(16, heads=4, attention_dropout=1.5)
    layer = GraphTransformerLayer(16, heads=4)
    with pytest.raises(ValueError, match="x"):
        layer(torch.randn(3, 8), torch.zeros(2, 1, dtype=torch.long))
    with pytest.raises(ValueError, match="num_layers"):
        GraphTransformerEncoder(16, num_layers=0)


def test_with_graph_rma_drop_attention_variant():
    from graph_rma import make_drop_attention

    torch.manual_seed(0)
    x, edge_index = small_graph()
    drop = make_drop_attention("dropattn:p=0.5")
    layer = GraphTransformerLayer(16, heads=4, dropout=0.0, drop_attention=drop)
    plain = GraphTransformerLayer(16, heads=4, dropout=0.0, attention_dropout=0.0)
    plain.load_state_dict(layer.state_dict())
    layer.eval(), plain.eval()
    torch.testing.assert_close(layer(x, edge_index), plain(x, edge_index))  # inactive at inference
    layer.train(), plain.train()
    torch.manual_seed(5)
    a = layer(x, edge_index)
    torch.manual_seed(5)
    assert torch.equal(a, layer(x, edge_index))  # seeded: reproducible
    assert not torch.allclose(a, plain(x, edge_index))


@pytest.mark.parametrize("sharpness", [1.0, 20.0])
def test_drop_attention_is_a_softmax_over_the_surviving_edges(sharpness):
    """With DropAttention the layer's weights are, per target and head, a softmax over the incoming edges whose
    mask survived (GAT's protocol); a target left without a survivor keeps its plain softmax. ``sharpness`` 20
    makes the survivors' plain-softmax weights underflow to zero, where renormalising dropped weights (the former
    protocol) would have kept the dropped edge's weight."""
    from graph_rma.dropattention import draw_window_mask

    torch.manual_seed(0)
    x, edge_index = small_graph(n=6, extra_edges=10)
    E, N, H, d = edge_index.size(1), x.size(0), 4, 4
    layer = GraphTransformerLayer(16, heads=H, dropout=0.0, drop_attention=DropAttention(0.6)).train()
    with torch.no_grad():
        layer.lin_query.weight.mul_(sharpness)
        layer.lin_key.weight.mul_(sharpness)
    torch.manual_seed(11)
    out, (_, alpha) = layer(x, edge_index, return_attention_weights=True)
    torch.manual_seed(11)  # the mask the layer drew: window 1, element mode, [H, E] in the given edge order
    dropped = draw_window_mask((H, E), 0.6, 1, x.device).t()
    with torch.no_grad():
        q = layer.lin_query(x).view(N, H, d)
        k = layer.lin_key(x).view(N, H, d)
        v = layer.lin_value(x).view(N, H, d)
        agg = torch.zeros(N, H, d)
        weights = torch.zeros(E, H)
        rows_without_survivor = 0
        for i in range(N):
            incoming = (edge_index[1] == i).nonzero().flatten().tolist()
            for h in range(H):
                keep = [e for e in incoming if not dropped[e, h]]
                if not keep:
                    keep, rows_without_survivor = incoming, rows_without_survivor + 1
                s = torch.stack([q[i, h] @ k[edge_index[0, e], h] / math.sqrt(d) for e in keep])
                w = torch.softmax(s, 0)
                for e, we in zip(keep, w):
                    weights[e, h] = we
                    agg[i, h] += we * v[edge_index[0, e], h]
        h1 = layer.norm1(x + layer.lin_out(agg.reshape(N, 16)))
        ref = layer.norm2(h1 + layer.ffn_out(layer.act(layer.ffn_in(h1))))
    assert 0 < int(dropped.sum()) < E * H and rows_without_survivor > 0  # both cases occur in this draw
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    # the returned weights are the plain softmax (what regularisers read), not the dropped ones
    torch.testing.assert_close(alpha, layer.attention(x, edge_index))
    torch.testing.assert_close(weights.sum(0), torch.full((H,), float(N)))  # every row sums to one


def test_edge_order_for_windows_is_computed_once(monkeypatch):
    import graph_rma.dropattention.module as da  # where DropAttention looks the edge order up

    calls = []
    real = da._element_order

    def counting(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(da, "_element_order", counting)
    torch.manual_seed(0)
    x, edge_index = small_graph()
    shared = DropAttention(0.3, window=2)
    enc = GraphTransformerEncoder(16, num_layers=3, heads=4, drop_attention=shared).train()
    assert all(layer.drop_attention is shared for layer in enc.layers)  # one instance given: shared
    for _ in range(3):
        enc(x, edge_index)
    assert len(calls) == 1  # 3 steps x 3 layers, one sort
    own = GraphTransformerEncoder(16, num_layers=3, heads=4, drop_attention={"p": 0.3, "window": 2}).train()
    drops = [layer.drop_attention for layer in own.layers]
    assert len({id(m) for m in drops}) == 3 and all((m.p, m.window) == (0.3, 2) for m in drops)
    for _ in range(2):
        own(x, edge_index)
    assert len(calls) == 1 + 3  # once per layer's own instance
    own(x, edge_index.flip(1))  # other edges (the same set in another order): computed again
    assert len(calls) == 1 + 6
    listed = [DropAttention(0.1), DropAttention(0.2)]
    assert [layer.drop_attention for layer in GraphTransformerEncoder(16, 2, 4, drop_attention=listed).layers] == listed
    with pytest.raises(ValueError, match="drop_attention"):
        GraphTransformerEncoder(16, 2, 4, drop_attention=listed[:1])
    with pytest.raises(ValueError, match="drop_attention"):
        GraphTransformerLayer(16, 4, drop_attention=nn.Dropout(0.1))


def test_drop_attention_without_p_takes_the_layers_attention_dropout():
    x, edge_index = small_graph()
    outs = []
    for drop in (DropAttention(), DropAttention(0.3)):
        torch.manual_seed(0)
        layer = GraphTransformerLayer(x.size(1), heads=2, dropout=0.0, attention_dropout=0.3, drop_attention=drop)
        torch.manual_seed(1)
        outs.append(layer(x, edge_index))
    assert torch.equal(outs[0], outs[1])
    torch.manual_seed(0)
    other = GraphTransformerLayer(
        x.size(1), heads=2, dropout=0.0, attention_dropout=0.3, drop_attention=DropAttention(0.6)
    )
    torch.manual_seed(1)
    assert not torch.equal(other(x, edge_index), outs[0])
