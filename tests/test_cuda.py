"""The device-dependent paths on CUDA: they run only where a GPU is present (the lent machines; never in CI), and
compare each CUDA result with the same computation on the CPU."""

from dataclasses import replace

import pytest
import torch

import graph_rma
from graph_rma.models import ResidualGAT, TwoLayerGAT
from graph_rma.nn import RepulsiveGATConv, RepulsiveGATv2Conv
from graph_rma.tasks.protocols import PROTOCOLS

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _graph(n=50, e=300, f=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, f, generator=g), torch.randint(0, n, (2, e), generator=g)


@pytest.mark.parametrize("cls", [RepulsiveGATConv, RepulsiveGATv2Conv])
@pytest.mark.parametrize("lean", [False, True])
def test_layers_match_the_cpu(cls, lean):
    x, ei = _graph()
    torch.manual_seed(0)
    cpu = cls(16, 4, heads=4, lean=lean).eval()
    gpu = cls(16, 4, heads=4, lean=lean).eval().cuda()
    gpu.load_state_dict(cpu.state_dict())
    out_cpu = cpu(x, ei)
    out_gpu = gpu(x.cuda(), ei.cuda())
    torch.testing.assert_close(out_gpu.cpu(), out_cpu, atol=1e-4, rtol=1e-4)
    out_cpu.sum().backward()
    out_gpu.sum().backward()
    for (name, p), q in zip(cpu.named_parameters(), gpu.parameters()):
        torch.testing.assert_close(q.grad.cpu(), p.grad, atol=1e-4, rtol=1e-4, msg=name)


def test_sampler_step_matches_the_cpu():
    x, ei = _graph()
    y = torch.randint(0, 3, (50,))
    states = []
    for device in ("cpu", "cuda"):
        torch.manual_seed(0)
        model = TwoLayerGAT(16, 3, hidden_channels=4, heads=4).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        graph_rma.SVGD(model, alpha=0.1, eps=4).attach(opt)
        model.eval()  # no dropout: the same gradients on both devices
        torch.nn.functional.cross_entropy(model(x.to(device), ei.to(device)), y.to(device)).backward()
        opt.step()
        states.append({k: v.cpu() for k, v in model.state_dict().items()})
    for k in states[0]:
        torch.testing.assert_close(states[1][k], states[0][k], atol=1e-4, rtol=1e-4, msg=k)


def test_dropattention_and_residual_gat_train_on_cuda():
    x, ei = _graph()
    model = ResidualGAT(16, 1, hidden=16, heads=4, layers=2, lean=True).cuda().train()
    model.convs[0].drop_attention = graph_rma.DropAttention(0.2)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    graph_rma.SVGD(model, alpha=0.1, eps=4, layers=["convs.0"]).attach(opt)
    loss = model(x.cuda(), ei.cuda()).pow(2).mean()
    loss.backward()
    opt.step()
    assert torch.isfinite(loss) and all(torch.isfinite(p).all() for p in model.parameters())


def test_node_run_on_cuda_matches_its_metrics_on_the_cpu():
    from torch_geometric.data import Data

    from graph_rma.tasks import node_classification as nc

    x, ei = _graph()
    idx = torch.arange(50)
    data = Data(
        x=x, edge_index=ei, y=idx % 3, train_mask=idx < 25, val_mask=(idx >= 25) & (idx < 38), test_mask=idx >= 38
    )
    proto = replace(PROTOCOLS["gat"], hidden=4, heads=4, dropout=0.0, attn_dropout=0.0, epochs=5)
    cpu, _, _ = nc.train_run(proto, data, "ma", 0, device="cpu")
    gpu, _, _ = nc.train_run(proto, data, "ma", 0, device="cuda")
    assert gpu["device"] == "cuda"
    assert abs(gpu["val_loss"] - cpu["val_loss"]) < 1e-3


def test_roc_auc_on_cuda_equals_the_cpu():
    from graph_rma.metrics.classification import roc_auc

    g = torch.Generator().manual_seed(0)
    scores, y = torch.randn(200, generator=g).round(decimals=1), torch.randint(0, 2, (200,), generator=g)  # ties
    assert roc_auc(scores.cuda(), y.cuda()) == pytest.approx(roc_auc(scores, y), abs=1e-12)


@pytest.mark.parametrize("spec", ["ma", "svgd:alpha=0.1,eps=8,layers=convs.0"])
def test_classic_gat_run_with_roc_auc_trains_on_cuda(spec):
    """Luo et al.'s recipe (the classic GAT with BatchNorm, residual, lean attention) scored by ROC AUC, on CUDA."""
    from torch_geometric.data import Data

    from graph_rma.tasks import node_classification as nc

    x, ei = _graph()
    idx = torch.arange(50)
    data = Data(
        x=x, edge_index=ei, y=idx % 2, train_mask=idx < 25, val_mask=(idx >= 25) & (idx < 38), test_mask=idx >= 38
    )
    proto = replace(
        PROTOCOLS["luo"],
        hidden=16,
        heads=8,
        layers=3,
        dropout=0.2,
        attn_dropout=0.0,
        self_loops=True,
        lean=True,
        norm="batch",
        residual=True,
        pre_linear=False,
        epochs=3,
        metric="roc_auc",
    )
    metrics, _, _ = nc.train_run(proto, data, spec, 0, device="cuda")
    assert metrics["device"] == "cuda" and 0.0 <= metrics["val_metric"] <= 1.0


def test_a_sampler_state_moves_between_cuda_and_the_cpu():
    """A CUDA run's sampler state resumes on the CPU and the other way (seeded from the saved bytes, with a
    warning); on the same kind of device it is restored exactly."""
    mha = torch.nn.MultiheadAttention(8, 4)
    on_cuda = graph_rma.SPOS(torch.nn.MultiheadAttention(8, 4).cuda(), seed=1)
    state = on_cuda.state_dict()
    expected = torch.randn(5, device="cuda", generator=on_cuda.generator)
    again = graph_rma.SPOS(torch.nn.MultiheadAttention(8, 4).cuda(), seed=2)
    again.load_state_dict(state)
    assert torch.equal(torch.randn(5, device="cuda", generator=again.generator), expected)
    on_cpu = graph_rma.SPOS(mha, seed=1)
    with pytest.warns(UserWarning, match="not one of a cpu generator"):
        on_cpu.load_state_dict(state)
        torch.randn(5, generator=on_cpu.generator)
    back = graph_rma.SPOS(torch.nn.MultiheadAttention(8, 4).cuda(), seed=1)
    with pytest.warns(UserWarning, match="not one of a cuda generator"):
        back.load_state_dict(graph_rma.SPOS(mha, seed=1).state_dict())
        torch.randn(5, device="cuda", generator=back.generator)


@pytest.mark.parametrize("sampler", ["SVGD", "SPOS", "SGLD"])
def test_a_sampler_step_makes_no_host_synchronisation(sampler):
    """Every check of the sampler stays on the card (torch's sync debug mode raises on any synchronising call); a
    non-finite gradient is still reported, at the latest by check()."""
    x, ei = _graph()
    torch.manual_seed(0)
    model = TwoLayerGAT(16, 3, hidden_channels=8, heads=8, out_heads=4).cuda()
    s = getattr(graph_rma, sampler)(model, eps=4)
    before = [p.detach().clone() for p in model.parameters()]
    for _ in range(2):
        model.zero_grad()
        model(x.cuda(), ei.cuda()).pow(2).mean().backward()
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            s.step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    s.check()
    assert s.steps == 2 and any(not torch.equal(p.grad, torch.zeros_like(p)) for p in model.parameters())
    assert all(torch.equal(b, p) for b, p in zip(before, model.parameters()))  # step() writes gradients only
    model.zero_grad()
    model(x.cuda(), ei.cuda()).pow(2).mean().backward()
    model.conv1.att_src.grad[0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="non-finite gradient in conv1"):
        s.step()
        s.check()
