"""Two CPU processes (gloo, file rendezvous: no network) train replicas under DDP with SPOS attached."""
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from graph_rma import SPOS
from graph_rma.distributed import all_reduce_mean, init_from_env, is_main_process

STEPS = 4

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.attn = nn.MultiheadAttention(8, 4, batch_first=True)
        self.inp = nn.Linear(6, 8)
        self.out = nn.Linear(8, 3)

    def forward(self, x):
        h = self.inp(x)
        h, _ = self.attn(h, h, h, need_weights=False)
        return self.out(h.mean(1))

def data():
    g = torch.Generator().manual_seed(1)
    return torch.randn(STEPS, 8, 5, 6, generator=g), torch.randint(0, 3, (STEPS, 8), generator=g)

def train(model, xs, ys, ddp=False):
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    SPOS(model.module if ddp else model, alpha=0.5, eps=1.0, beta=50.0, seed=11).attach(opt)
    for x, y in zip(xs, ys):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return model.module if ddp else model

def worker(rank, world, init_file, out_dir):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    info = init_from_env(device="cpu")
    torch.set_num_threads(1)
    xs, ys = data()
    half = xs.size(1) // world
    shard = slice(rank * half, (rank + 1) * half)
    model = train(DDP(Net()), xs[:, shard], ys[:, shard], ddp=True)
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    assert info.rank == rank and info.distributed and is_main_process() == (rank == 0)
    mean = all_reduce_mean(torch.tensor([float(rank)]))
    torch.save({"params": flat, "mean": mean}, os.path.join(out_dir, f"rank{rank}.pt"))
    dist.destroy_process_group()

def test_ddp_replicas_bitwise_equal_and_match_single_process(tmp_path):
    mp.spawn(worker, args=(2, str(tmp_path / "rdzv"), str(tmp_path)), nprocs=2, join=True)
    r0 = torch.load(tmp_path / "rank0.pt")
    r1 = torch.load(tmp_path / "rank1.pt")
    assert torch.equal(r0["params"], r1["params"])  # identical gradients after all-reduce + identical SPOS noise
    assert r0["mean"].item() == 0.5
    xs, ys = data()
    single = train(Net(), xs, ys)
    flat = torch.cat([p.detach().flatten() for p in single.parameters()])
    # Same global batch in one process: equal up to the order of floating-point summation.
    assert torch.allclose(flat, r0["params"], atol=1e-5, rtol=1e-5)
    assert not torch.equal(flat, torch.cat([p.detach().flatten() for p in Net().parameters()]))
