"""Host reads in a training step: the operators that make the host wait for a device value (``.item()``, ``bool(t)``,
``if t``, ``nonzero``, indexing by a boolean mask), counted on the CPU under a ``TorchDispatchMode``, each with the
package's source line that asked for it. On CUDA every one of them stalls the launch queue; the sampler's step
must have none, and the drop-in layer no more than stock PyG's."""

import traceback
from collections import Counter

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch_geometric.nn import GATConv, GATv2Conv

import graph_rma
from graph_rma.models import TwoLayerGAT
from graph_rma.nn import RepulsiveGATConv, RepulsiveGATv2Conv
from graph_rma.particles._deferred import DeferredFlags

#: Operators that return a host value read from a tensor, or whose output size depends on the tensor's values.
READS = {
    "aten::_local_scalar_dense",
    "aten::is_nonzero",
    "aten::item",
    "aten::nonzero",
    "aten::masked_select",
    "aten::_unique2",
    "aten::unique_consecutive",
    "aten::unique_dim",
}


def _bool_index(func, args) -> bool:
    return func._schema.name == "aten::index" and any(
        isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in args[1] if i is not None
    )


class HostReads(TorchDispatchMode):
    """Counts host reads by the innermost ``graph_rma`` source line that asked for each (``"outside"`` if none)."""

    def __init__(self):
        super().__init__()
        self.sites = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func._schema.name in READS or _bool_index(func, args):
            frames = [f for f in traceback.extract_stack() if "/graph_rma/" in f.filename.replace("\\", "/")]
            site = "outside"
            if frames:
                path = frames[-1].filename.replace("\\", "/").split("/graph_rma/")[-1]
                site = f"{path}:{frames[-1].lineno}"
            self.sites[site] += 1
        return func(*args, **(kwargs or {}))

    def count(self, prefix: str = "") -> int:
        return sum(n for site, n in self.sites.items() if site.startswith(prefix))


def _graph(n=40, e=240, f=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, f, generator=g), torch.randint(0, n, (2, e), generator=g), torch.randint(0, 4, (n,))


def test_the_counter_sees_the_reads_it_is_meant_to_see():
    """The instrument itself: each way of reading a value is counted once where it happens."""
    t = torch.tensor([1.0, -2.0])
    with HostReads() as reads:
        _ = t.sum().item()
        _ = bool(t[0] > 0)
        _ = t[t > 0]
        _ = t.nonzero()
        _ = t * 2  # not a read
    assert reads.count() >= 4 and all(site == "outside" for site in reads.sites)


@pytest.mark.parametrize("sampler", ["SVGD", "SPOS", "SGLD"])
def test_an_optimizer_step_with_a_sampler_reads_nothing_from_the_device_for_the_sampler(sampler):
    x, ei, y = _graph()
    torch.manual_seed(0)
    model = TwoLayerGAT(16, 4, hidden_channels=8, heads=8, out_heads=4)
    opt = torch.optim.Adam(model.parameters(), lr=0.005)
    s = getattr(graph_rma, sampler)(model, eps=4)
    s.attach(opt)
    for _ in range(2):  # the second step: past any first-step work
        opt.zero_grad()
        F.cross_entropy(model(x, ei), y).backward()
        before = [p.detach().clone() for p in model.parameters()]
        with HostReads() as reads:
            opt.step()
    assert reads.count("particles/") == 0, dict(reads.sites)
    assert reads.count() == reads.count("outside")  # Adam's own step counter (torch's CPU Adam reads it)
    assert all(not torch.equal(b, p) for b, p in zip(before, model.parameters()))  # the step did move the model
    assert s.steps == 2


def test_the_sampler_checks_still_act_without_host_reads():
    """The checks moved to the device still raise and warn: on the CPU in the step that sees the problem."""
    x, ei, y = _graph()
    torch.manual_seed(0)
    model = TwoLayerGAT(16, 4, hidden_channels=8, heads=8, out_heads=4)
    sampler = graph_rma.SVGD(model, eps=4)
    F.cross_entropy(model(x, ei), y).backward()
    model.conv1.att_src.grad[0, 1, 2] = float("nan")
    before = model.conv1.att_src.grad.clone()
    with HostReads() as reads, pytest.raises(ValueError, match=r"grad: non-finite gradient in conv1 \(att_src\)"):
        sampler.step()
    assert reads.count("particles/") == 0
    assert torch.equal(model.conv1.att_src.grad.isnan(), before.isnan())  # nothing written before the error
    sampler.check()  # reported once
    # identical heads: one warning, from the device flag
    model = TwoLayerGAT(16, 4, hidden_channels=8, heads=8, out_heads=4)
    with torch.no_grad():
        for p in model.conv1.parameters():
            if p.dim() == 3:  # att_src / att_dst [1, H, C]: every head the same
                p.copy_(p[:, :1].expand_as(p))
        w = model.conv1.lin.weight.view(8, 8, -1)
        w.copy_(w[:1].expand_as(w))
    sampler = graph_rma.SVGD(model, eps=4, layers=["conv1"])
    with pytest.warns(UserWarning, match="identical heads") as record:
        for _ in range(2):
            model.zero_grad()
            F.cross_entropy(model(x, ei), y).backward()
            with HostReads() as reads:
                sampler.step()
            assert reads.count("particles/") == 0
    assert sum("identical heads" in str(w.message) for w in record) == 1


def test_the_step_limit_count_is_kept_on_the_device_and_read_on_demand():
    from test_particles import _near_identical_gatconv, _one_sgd_step

    _, sampler = _one_sgd_step(_near_identical_gatconv(noise=1e-7))
    assert isinstance(sampler._limited, torch.Tensor) and sampler.limited_steps == 1
    sampler.limited_steps = 5  # restored from a checkpoint
    assert sampler.limited_steps == 5 and sampler._limited is None


@pytest.mark.parametrize(
    "ours, stock", [(RepulsiveGATConv, GATConv), (RepulsiveGATv2Conv, GATv2Conv)], ids=["gat", "gatv2"]
)
def test_the_drop_in_layer_reads_the_device_no_more_often_than_stock_pyg(ours, stock):
    """Its input check reads one value for a new edge_index tensor and none for one already checked."""
    x, ei, y = _graph()
    counts = {}
    for cls in (stock, ours):
        torch.manual_seed(0)
        conv = cls(16, 4, heads=2, dropout=0.5)
        F.cross_entropy(conv(x, ei), y).backward()  # first call: the range check of this edge_index
        with HostReads() as reads:
            F.cross_entropy(conv(x, ei), y).backward()
        counts[cls.__name__] = (reads.count(), reads.count("nn/_gat_checks"))
    assert counts[ours.__name__] == counts[stock.__name__], counts
    assert counts[ours.__name__][1] == 0
    with HostReads() as reads:  # a new tensor is checked: one read
        conv(x, ei.clone())
    assert reads.count("nn/_gat_checks") == 1, dict(reads.sites)
    ei[0, 0] = 40  # changed in place (version counter): checked again, and refused
    with pytest.raises(ValueError, match="edge_index: expected sources in"):
        conv(x, ei)


class _CopyInFlight:
    """A device-to-host copy that has not arrived until waited for (as a CUDA event that ``query()``s False)."""

    def __init__(self):
        self.done = False

    def query(self):
        return self.done

    def synchronize(self):
        self.done = True


def test_deferred_flags_are_reported_in_order_once_they_arrive():
    seen = []
    flags = DeferredFlags()
    in_flight = _CopyInFlight()
    flags._queue.append((torch.tensor([True]), in_flight, lambda v: seen.append(v.tolist())))
    flags.add(torch.tensor([False, True]), lambda v: seen.append(v.tolist()))  # on the CPU: arrived at once
    flags.poll()
    assert seen == [] and len(flags) == 2  # oldest first: nothing before the copy in flight has arrived
    in_flight.done = True
    flags.poll()
    assert seen == [[True], [False, True]] and len(flags) == 0


def test_where_the_check_arrives_later_the_error_comes_at_the_next_step_or_at_check(monkeypatch):
    """As on CUDA: the step that sees a non-finite gradient leaves that layer's loss gradients in place and the error
    is raised when the flag arrives, at the latest by check() / state_dict()."""

    def add(self, flags, report):
        self._queue.append((flags.clone(), _CopyInFlight(), report))

    monkeypatch.setattr(DeferredFlags, "add", add)
    x, ei, y = _graph()
    torch.manual_seed(0)
    model = TwoLayerGAT(16, 4, hidden_channels=8, heads=8, out_heads=4)
    sampler = graph_rma.SVGD(model, eps=4)
    F.cross_entropy(model(x, ei), y).backward()
    model.conv1.att_src.grad[0, 1, 2] = float("inf")
    loss_grads = [p.grad.clone() for p in model.conv1.parameters()]
    sampler.step()  # no error yet: the flag is in flight
    for g, p in zip(loss_grads, model.conv1.parameters()):
        assert torch.equal(p.grad, g)  # the loss gradients of that layer, untouched
    assert not torch.equal(model.conv2.lin.weight.grad, model.conv2.lin.weight.grad.clone().zero_())
    with pytest.raises(ValueError, match=r"grad: non-finite gradient in conv1 \(att_src\)"):
        sampler.state_dict()
    sampler.check()  # reported once
