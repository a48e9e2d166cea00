"""graph_rma.diagnostics: every measure against a direct computation (explicit loops / hand-worked numbers)."""

import itertools
import math

import pytest
import torch
import torch.nn.functional as F
from torch_geometric.nn import GATConv, GATv2Conv, TransformerConv

from graph_rma.diagnostics import (
    HeadCapture,
    attention_disagreement,
    attention_div,
    attention_entropy,
    calibration_bins,
    empirical_cdf,
    expected_calibration_error,
    head_distance,
    head_diversity,
    head_importance,
    heads_sweep,
    mask_heads,
    overconfidence_error,
    plot_entropy_cdf,
    plot_head_entropy,
    plot_head_importance,
    plot_heads_sweep,
    predictive_entropy,
    reliability_diagram,
)
from graph_rma.dropattention import DropAttention
from graph_rma.nn import RepulsiveGATConv, RepulsiveGATv2Conv

PNG = b"\x89PNG\r\n\x1a\n"


# ----------------------------------------------------------------------------------------------- references
def loop_dist(out):  # out [B, H, C] as nested lists
    vals = []
    for node in out.tolist():
        pairs = [math.dist(node[h], node[k]) for h, k in itertools.combinations(range(len(node)), 2)]
        vals.append(sum(pairs) / len(pairs))
    return sum(vals) / len(vals)


def groups(alpha, index):
    """{node: [H lists of incoming weights]} from sparse attention."""
    H = alpha.size(1)
    g = {}
    for e, i in enumerate(index.tolist()):
        g.setdefault(i, [[] for _ in range(H)])
        for h in range(H):
            g[i][h].append(float(alpha[e, h]))
    return g


def loop_div(rows):  # rows: H lists (one per head) over the same keys
    H = len(rows)
    total = 0.0
    for h in range(H):
        for k in range(H):
            dot = sum(a * b for a, b in zip(rows[h], rows[k]))
            total += (dot - (1.0 if h == k else 0.0)) ** 2
    return total


def loop_cos(rows):
    H = len(rows)
    cs = []
    for h, k in itertools.combinations(range(H), 2):
        dot = sum(a * b for a, b in zip(rows[h], rows[k]))
        cs.append(dot / math.sqrt(sum(a * a for a in rows[h]) * sum(b * b for b in rows[k])))
    return sum(cs) / len(cs)


def loop_entropy(row):
    return -sum(a * math.log(a) for a in row if a > 0)


def sparse_attention(N=6, E=14, H=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    dst = torch.cat([torch.arange(N - 1), torch.randint(0, N - 1, (E - (N - 1),), generator=g)])  # node N-1 has none
    src = torch.randint(0, N, (E,), generator=g)
    from torch_geometric.utils import softmax

    alpha = softmax(torch.randn(E, H, generator=g, dtype=torch.float64), dst, num_nodes=N)
    return torch.stack([src, dst]), alpha


# ------------------------------------------------------------------------------------------------ diversity
def test_head_distance_hand_worked_and_loops():
    out = torch.tensor([[[0.0, 0.0], [3.0, 4.0], [0.0, 0.0]]])  # pairs: 5, 0, 5
    assert head_distance(out) == pytest.approx(10 / 3)
    x = torch.randn(5, 4, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    assert head_distance(x) == pytest.approx(loop_dist(x), rel=1e-12)
    # leading dimensions are flattened: [2, 5, 4, 3] averages over 10 "nodes"
    y = torch.stack([x, 2 * x])
    assert head_distance(y) == pytest.approx(1.5 * loop_dist(x), rel=1e-12)
    with pytest.raises(ValueError, match="outputs"):
        head_distance(torch.randn(5, 1, 3))


def test_dense_div_disagreement_entropy_hand_worked():
    eye = torch.eye(2).unsqueeze(0)  # heads attend to different keys: Div 0, cosine 0, entropy 0
    assert attention_div(eye) == pytest.approx(0.0)
    assert attention_disagreement(eye) == pytest.approx(0.0)
    assert attention_entropy(eye).tolist() == [0.0, 0.0]
    uni = torch.full((1, 2, 2), 0.5)  # both uniform: AA^T = 0.5 everywhere, (0.5-1)^2*2 + 0.5^2*2 = 1
    assert attention_div(uni) == pytest.approx(1.0)
    assert attention_disagreement(uni) == pytest.approx(1.0)
    assert attention_entropy(uni) == pytest.approx(torch.full((2,), math.log(2), dtype=torch.float64))


def test_dense_measures_against_loops():
    g = torch.Generator().manual_seed(2)
    attn = torch.randn(2, 3, 4, 5, generator=g, dtype=torch.float64).softmax(-1)  # [B, L, H, S]
    slices = [attn[b, i] for b in range(2) for i in range(3)]
    rows = [[r.tolist() for r in s] for s in slices]
    assert attention_div(attn) == pytest.approx(sum(loop_div(r) for r in rows) / 6, rel=1e-12)
    assert attention_disagreement(attn) == pytest.approx(sum(loop_cos(r) for r in rows) / 6, rel=1e-12)
    ent = attention_entropy(attn)
    for h in range(4):
        assert float(ent[h]) == pytest.approx(sum(loop_entropy(r[h]) for r in rows) / 6, rel=1e-12)


def test_sparse_measures_against_loops():
    edge_index, alpha = sparse_attention()
    index = edge_index[1]
    g = groups(alpha, index)  # nodes with incoming edges only
    assert len(g) == 5
    assert attention_div(alpha, index) == pytest.approx(sum(loop_div(r) for r in g.values()) / len(g), rel=1e-12)
    assert attention_disagreement(alpha, index) == pytest.approx(
        sum(loop_cos(r) for r in g.values()) / len(g), rel=1e-12
    )
    ent = attention_entropy(alpha, index, num_nodes=6)
    for h in range(3):
        assert float(ent[h]) == pytest.approx(sum(loop_entropy(r[h]) for r in g.values()) / len(g), rel=1e-12)
    # a node with a single incoming edge has entropy 0 and Div (1-1)^2... rows all equal 1
    single = attention_entropy(torch.ones(1, 2, dtype=torch.float64), torch.tensor([0]))
    assert single.tolist() == [0.0, 0.0]


def test_sparse_on_complete_graph_equals_dense():
    N, H = 4, 3
    attn = torch.randn(N, H, N, generator=torch.Generator().manual_seed(3), dtype=torch.float64).softmax(-1)
    dst, src = torch.meshgrid(torch.arange(N), torch.arange(N), indexing="ij")
    dst, src = dst.flatten(), src.flatten()
    alpha = attn[dst, :, src]  # [E, H]: edge src -> dst carries attn[dst, h, src]
    assert attention_div(alpha, dst) == pytest.approx(attention_div(attn), rel=1e-12)
    assert attention_disagreement(alpha, dst) == pytest.approx(attention_disagreement(attn), rel=1e-12)
    assert torch.allclose(attention_entropy(alpha, dst), attention_entropy(attn), rtol=1e-12)


def test_head_diversity_collects_all_and_validates():
    edge_index, alpha = sparse_attention()
    out = torch.randn(6, 3, 4, dtype=torch.float64)
    d = head_diversity(outputs=out, attn=alpha, index=edge_index[1])
    assert d["dist"] == pytest.approx(loop_dist(out))
    assert d["div"] == pytest.approx(attention_div(alpha, edge_index[1]))
    assert len(d["entropy"]) == 3 and d["entropy_mean"] == pytest.approx(sum(d["entropy"]) / 3)
    with pytest.raises(ValueError, match="outputs, attn"):
        head_diversity()
    with pytest.raises(ValueError, match="index"):
        attention_div(alpha, edge_index[1][:-1])
    with pytest.raises(ValueError, match="attn"):
        attention_entropy(torch.ones(3))


# ---------------------------------------------------------------------------------------------- calibration
# Hand-worked case, M = 4 bins (0,.25] (.25,.5] (.5,.75] (.75,1]:
#   bin 4: conf .9 .8 .95, correct 1 0 1 -> acc 2/3, conf .88333, weight 3/6
#   bin 3: conf .6 .7,    correct 1 0   -> acc 1/2, conf .65,    weight 2/6
#   bin 2: conf .3,       correct 0     -> acc 0,   conf .3,     weight 1/6
# ECE = .5*.216667 + (1/3)*.15 + (1/6)*.3 = .208333
# OE  = .5*.883333*.216667 + (1/3)*.65*.15 + (1/6)*.3*.3 = .0956944 + .0325 + .015 = .1431944
CONF = torch.tensor([0.9, 0.8, 0.95, 0.6, 0.7, 0.3], dtype=torch.float64)
CORRECT = torch.tensor([1, 0, 1, 1, 0, 0])


def test_ece_oe_hand_worked_confidences():
    assert expected_calibration_error(CONF, num_bins=4, correct=CORRECT) == pytest.approx(0.2083333333, abs=1e-9)
    assert overconfidence_error(CONF, num_bins=4, correct=CORRECT) == pytest.approx(
        0.5 * (53 / 60) * (13 / 60) + 0.0325 + 0.015, abs=1e-12
    )
    b = calibration_bins(CONF, num_bins=4, correct=CORRECT)
    assert b.count.tolist() == [0, 1, 2, 3]
    assert b.accuracy[1:].tolist() == pytest.approx([0.0, 0.5, 2 / 3])
    assert math.isnan(float(b.accuracy[0]))


def test_ece_oe_from_class_probabilities():
    # the same predictions as [n, K=4] probabilities: row max = confidence, label chosen to match CORRECT
    rest = lambda c: [(1 - c) / 3] * 3  # noqa: E731
    probs = torch.tensor([[c] + rest(c) for c in CONF.tolist()])
    labels = torch.tensor([0 if ok else 1 for ok in CORRECT.tolist()])
    assert expected_calibration_error(probs, labels, num_bins=4) == pytest.approx(0.2083333333, abs=1e-7)
    assert overconfidence_error(probs, labels, num_bins=4) == pytest.approx(0.1431944444, abs=1e-7)


def test_bins_are_right_closed_and_match_a_loop():
    b = calibration_bins(torch.tensor([0.0, 0.25, 0.5, 0.5001, 1.0]), num_bins=4, correct=torch.ones(5))
    assert b.count.tolist() == [2, 1, 1, 1]  # 0 and .25 -> bin 1; .5 -> bin 2; .5001 -> bin 3; 1 -> bin 4
    g = torch.Generator().manual_seed(4)
    conf = torch.rand(200, generator=g, dtype=torch.float64)
    corr = (torch.rand(200, generator=g) < conf.float()).double()
    for M in (1, 7, 15):
        ece = oe = 0.0
        for m in range(M):
            lo, hi = m / M, (m + 1) / M
            sel = [i for i in range(200) if (lo < conf[i] <= hi) or (m == 0 and conf[i] == 0)]
            if not sel:
                continue
            acc = sum(float(corr[i]) for i in sel) / len(sel)
            c = sum(float(conf[i]) for i in sel) / len(sel)
            ece += len(sel) / 200 * abs(acc - c)
            oe += len(sel) / 200 * c * max(c - acc, 0.0)
        assert expected_calibration_error(conf, num_bins=M, correct=corr) == pytest.approx(ece, abs=1e-12)
        assert overconfidence_error(conf, num_bins=M, correct=corr) == pytest.approx(oe, abs=1e-12)


def test_calibration_validation():
    with pytest.raises(ValueError, match="labels"):
        expected_calibration_error(torch.rand(3, 2))
    with pytest.raises(ValueError, match="num_bins"):
        calibration_bins(CONF, num_bins=0, correct=CORRECT)
    with pytest.raises(ValueError, match="probs"):
        calibration_bins(torch.tensor([1.5]), correct=torch.ones(1))


def test_predictive_entropy_and_empirical_cdf():
    p = torch.tensor([[0.25] * 4, [1.0, 0.0, 0.0, 0.0], [0.5, 0.5, 0.0, 0.0]])
    assert predictive_entropy(p).tolist() == pytest.approx([math.log(4), 0.0, math.log(2)])
    t, F_ = empirical_cdf(torch.tensor([3.0, 1.0, 2.0, 2.0]))
    assert t.tolist() == [1.0, 2.0, 3.0] and F_.tolist() == [0.25, 0.75, 1.0]
    _, F_at = empirical_cdf(torch.tensor([3.0, 1.0, 2.0, 2.0]), at=torch.tensor([0.0, 1.5, 2.0, 10.0]))
    assert F_at.tolist() == [0.0, 0.25, 0.75, 1.0]
    v = torch.randn(50, generator=torch.Generator().manual_seed(5))
    at = torch.linspace(-2, 2, 9)
    _, F_at = empirical_cdf(v, at)
    assert F_at.tolist() == pytest.approx([sum(float(x) <= float(a) for x in v) / 50 for a in at])
    with pytest.raises(ValueError, match="values"):
        empirical_cdf(torch.tensor([]))


# ------------------------------------------------------------------------------------- capture and masking
def small_graph(N=7, E=20, F_in=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(N, F_in, generator=g), torch.randint(0, N, (2, E), generator=g)


def repulsive_gat(*a, **kw):
    return RepulsiveGATConv(*a, drop_attention=DropAttention(0.3), **kw)


def repulsive_gatv2(*a, **kw):
    return RepulsiveGATv2Conv(*a, drop_attention=DropAttention(0.3), **kw)


@pytest.mark.parametrize("Conv", [GATConv, GATv2Conv, TransformerConv, repulsive_gat, repulsive_gatv2])
def test_capture_pyg_layers(Conv):
    torch.manual_seed(0)
    x, ei = small_graph()
    conv = Conv(5, 3, heads=4).eval()  # eval: DropAttention off, so both calls see the same attention
    ref_out, (ref_ei, ref_alpha) = conv(x, ei, return_attention_weights=True)
    with HeadCapture(conv) as cap:
        out = conv(x, ei)
    assert isinstance(out, torch.Tensor) and torch.equal(out, ref_out)  # the model sees its usual output
    assert torch.equal(cap.alpha, ref_alpha) and torch.equal(cap.edge_index, ref_ei)
    assert cap.outputs.shape == (7, 4, 3)
    # the head outputs really are the per-head attention-weighted sums of messages
    if Conv in (GATConv, repulsive_gat):
        xs = conv.lin(x).view(-1, 4, 3)
        manual = torch.zeros(7, 4, 3)
        for e in range(ref_ei.size(1)):
            j, i = ref_ei[:, e].tolist()
            manual[i] += ref_alpha[e].unsqueeze(-1) * xs[j]
        assert torch.allclose(cap.outputs, manual, atol=1e-6)
        assert torch.allclose(out, cap.outputs.reshape(7, 12) + conv.bias, atol=1e-6)
    # hooks are removed on exit
    assert not conv._propagate_forward_hooks and not conv._forward_hooks and not conv._forward_pre_hooks


def test_capture_keeps_attention_when_caller_asks_for_it():
    x, ei = small_graph()
    conv = GATConv(5, 3, heads=2).eval()
    with HeadCapture(conv) as cap:
        out, (ei2, alpha) = conv(x, ei, return_attention_weights=True)
    assert torch.equal(alpha, cap.alpha)


@pytest.mark.parametrize("concat", [True, False])
def test_masking_gatconv_zeroes_exactly_one_head(concat):
    torch.manual_seed(1)
    x, ei = small_graph()
    H, C = 4, 3
    conv = GATConv(5, C, heads=H, concat=concat, bias=False).eval()
    with HeadCapture(conv) as cap:
        full = conv(x, ei)
    heads = cap.outputs
    for h in range(H):
        with mask_heads(conv, [h]):
            masked = conv(x, ei)
        if concat:
            parts, ref = masked.view(-1, H, C), full.view(-1, H, C)
            assert torch.equal(parts[:, h], torch.zeros(7, C))
            others = [k for k in range(H) if k != h]
            assert torch.equal(parts[:, others], ref[:, others])
        else:
            expected = sum(heads[:, k] for k in range(H) if k != h) / H
            assert torch.allclose(masked, expected, atol=1e-6)
    with pytest.raises(ValueError, match="mask"):
        HeadCapture(conv, mask=[H])


def manual_mha(m, q, k, v, zero=()):
    """nn.MultiheadAttention (batch_first=False, [L, B, E]) with explicit per-head loops."""
    E, H = m.embed_dim, m.num_heads
    d = E // H
    Wq, Wk, Wv = m.in_proj_weight.split(E)
    bq, bk, bv = m.in_proj_bias.split(E)
    L, B, _ = q.shape
    S = k.size(0)
    attn = torch.zeros(B, H, L, S)
    heads = torch.zeros(B, L, H, d)
    for b in range(B):
        Q, K, V = q[:, b] @ Wq.t() + bq, k[:, b] @ Wk.t() + bk, v[:, b] @ Wv.t() + bv
        for h in range(H):
            sl = slice(h * d, (h + 1) * d)
            a = (Q[:, sl] @ K[:, sl].t() / math.sqrt(d)).softmax(-1)
            attn[b, h] = a
            heads[b, :, h] = a @ V[:, sl]
    concat = heads.clone()
    for h in zero:
        concat[:, :, h] = 0
    out = concat.reshape(B, L, E) @ m.out_proj.weight.t() + m.out_proj.bias
    return out.transpose(0, 1), attn, heads


@pytest.mark.parametrize("batch_first", [False, True])
def test_capture_and_mask_multihead_attention(batch_first):
    torch.manual_seed(2)
    m = torch.nn.MultiheadAttention(8, 4, batch_first=batch_first).eval()
    q, k = torch.randn(5, 2, 8), torch.randn(6, 2, 8)  # [L, B, E], [S, B, E]
    ref, attn, heads = manual_mha(m, q, k, k)
    t = (lambda z: z.transpose(0, 1)) if batch_first else (lambda z: z)
    with HeadCapture(m) as cap:
        out, w = m(t(q), t(k), t(k))  # defaults: need_weights=True, averaged
    assert torch.allclose(t(out), ref, atol=1e-5)
    assert torch.allclose(w, attn.mean(1), atol=1e-6)  # caller still gets what it asked for
    assert torch.allclose(cap.attn, attn, atol=1e-6)
    assert torch.allclose(cap.outputs, heads, atol=1e-5)
    for h in range(4):
        ref_h, _, _ = manual_mha(m, q, k, k, zero=[h])
        with mask_heads(m, [h]):
            out_h, w_h = m(t(q), t(k), t(k), need_weights=False)
        assert w_h is None
        assert torch.allclose(t(out_h), ref_h, atol=1e-5)


# ---------------------------------------------------------------------------------------------- redundancy
class TwoLayer(torch.nn.Module):
    def __init__(self, heads=4):
        super().__init__()
        self.conv1 = GATConv(5, 3, heads=heads, bias=False)
        self.conv2 = GATConv(3 * heads, 2, heads=1, concat=False)

    def forward(self, x, edge_index):
        return self.conv2(F.elu(self.conv1(x, edge_index)), edge_index)


def test_head_importance_drops_equal_each_heads_contribution():
    torch.manual_seed(3)
    x, ei = small_graph()
    model = TwoLayer().train()
    with torch.no_grad():
        model.eval()
        parts = model.conv1(x, ei).view(-1, 4, 3)
    model.train()
    # metric: L1 norm of conv1's output; masking head h removes exactly |head h|
    evaluate = lambda: float(model.conv1(x, ei).abs().sum())  # noqa: E731
    res = head_importance(model, ["conv1"], evaluate)
    assert model.training  # mode restored
    assert res.baseline == pytest.approx(float(parts.abs().sum()), rel=1e-6)
    assert res.drops["conv1"] == pytest.approx([float(parts[:, h].abs().sum()) for h in range(4)], rel=1e-5)
    # a loss (-L1) grows by |head h| when h is masked: with higher_is_better=False that is the same positive drop
    loss = head_importance(model, [model.conv1], lambda: -evaluate(), higher_is_better=False)
    assert loss.baseline == pytest.approx(-res.baseline)
    assert loss.drops["conv1"] == pytest.approx(res.drops["conv1"], rel=1e-5)
    with pytest.raises(ValueError, match="layers"):
        head_importance(model, ["nope"], evaluate)
    with pytest.raises(ValueError, match="layer"):
        head_importance(model, [torch.nn.Linear(2, 2)], evaluate)


# ------------------------------------------------------------------------------------------------- sweep
def test_heads_sweep_calls_and_summarises():
    calls = []

    def train_and_eval(m, seed):
        calls.append((m, seed))
        return 1.0 / m + 0.1 * seed

    r = heads_sweep(train_and_eval, [1, 2, 4], seeds=[0, 1])
    assert calls == [(1, 0), (1, 1), (2, 0), (2, 1), (4, 0), (4, 1)]
    assert r["num_heads"] == [1, 2, 4]
    assert r["mean"] == pytest.approx([1.05, 0.55, 0.3])
    assert r["std"] == pytest.approx([0.05, 0.05, 0.05])
    single = heads_sweep(lambda m: m * 0.5, [3, 1])
    assert single["errors"] == [[1.5], [0.5]] and single["std"] == [0.0, 0.0]
    with pytest.raises(ValueError, match="head_counts"):
        heads_sweep(lambda m: 0.0, [0, 2])
    with pytest.raises(ValueError, match="head_counts"):
        heads_sweep(lambda m: 0.0, [2, 2])
    with pytest.raises(ValueError, match="train_and_eval"):
        heads_sweep(lambda m: float("nan"), [2])


# ------------------------------------------------------------------------------------------------- plots
def assert_png(path):
    data = open(path, "rb").read()
    assert data[:8] == PNG and len(data) > 1000


@pytest.mark.slow
def test_plots_write_valid_pngs(tmp_path):
    g = torch.Generator().manual_seed(6)
    probs = torch.randn(100, 5, generator=g).softmax(-1)
    labels = torch.randint(0, 5, (100,), generator=g)
    assert_png(reliability_diagram(probs, labels, path=tmp_path / "rel.png", num_bins=10))
    assert_png(
        plot_head_importance(
            {"plain": [0.0, 0.01, -0.002, 0.0], "svgd": [0.02, 0.03, 0.01, 0.05]}, path=tmp_path / "drops.png"
        )
    )
    assert_png(
        plot_entropy_cdf(
            {"plain": predictive_entropy(probs), "svgd": predictive_entropy(probs) * 1.2}, path=tmp_path / "cdf.png"
        )
    )
    sweep = heads_sweep(lambda m, s: 1 / m + 0.01 * s, [1, 2, 4, 8], seeds=[0, 1])
    assert_png(plot_heads_sweep({"plain": sweep}, path=tmp_path / "sub" / "sweep.png"))
    assert_png(plot_head_entropy({"conv1": [1.0, 1.2, 0.8]}, path=tmp_path / "ent.png", uniform=1.5))
    with pytest.raises(ValueError, match="drops"):
        plot_head_importance({}, path=tmp_path / "x.png")
