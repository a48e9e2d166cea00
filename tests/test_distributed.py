"""Two CPU processes (gloo, file rendezvous: no network) train replicas under DDP with SPOS attached."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from graph_rma import SPOS
from graph_rma.data.root import resolve_root
from graph_rma.engine import load_checkpoint
from graph_rma.engine.distributed import all_reduce_mean, init_from_env, is_main_process, shard

pytestmark = pytest.mark.slow  # subprocesses or real-data runs: left out of make test-fast


STEPS = 4
ROOT = Path(__file__).resolve().parents[1]


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


# ---------------------------------------------------------------------------------------------------------------
# graph-rma agenda train under DDP: two gloo processes vs one process with the same global batch
# ---------------------------------------------------------------------------------------------------------------
FIXTURE = Path(__file__).resolve().parents[1] / "datasets" / "fixtures" / "agenda_tiny"
SPOS_VARIANT = "spos:alpha=0.1,eps=1,beta=1000"
TINY = dict(
    hidden=32,
    layers=1,
    heads=2,
    dropout=0.2,
    attention_dropout=0.1,
    decoder_heads=2,
    epochs=2,
    batch_size=4,
    optimizer="adam",
    lr=3e-3,
    momentum=0.9,
    clip=1.0,
    min_freq=1,
    max_target_len=None,
    beam=2,
    max_len=20,
    length_penalty=1.0,
)
# SGD, not Adam: Adam turns the rounding noise of gradients that are exactly zero in theory (attention key biases)
# into full-size steps, so one and two processes would differ by lr there
NO_DROPOUT = dict(TINY, dropout=0.0, attention_dropout=0.0, optimizer="sgd", lr=0.1)


def agenda_worker(rank, world, init_file, out_dir):
    from graph_rma.tasks import agenda as task

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    torch.set_num_threads(1)
    out = Path(out_dir)
    runs = {
        "exact": task.train(dict(NO_DROPOUT), out / "ddp_exact", FIXTURE, variant=SPOS_VARIANT, seed=1, progress=False),
        "full": task.train(dict(TINY), out / "ddp_full", FIXTURE, variant=SPOS_VARIANT, seed=1, progress=False),
    }
    runs["killed"] = task.train(
        dict(TINY), out / "ddp_resumed", FIXTURE, variant=SPOS_VARIANT, seed=1, stop_after=3, progress=False
    )
    runs["resumed"] = task.train(dict(TINY), out / "ddp_resumed", FIXTURE, variant=SPOS_VARIANT, seed=1, progress=False)
    task.train(dict(TINY), out / "ddp_killed", FIXTURE, variant=SPOS_VARIANT, seed=1, stop_after=3, progress=False)
    torch.save(runs, out / f"summaries{rank}.pt")
    dist.destroy_process_group()


def _weights(path):
    return load_checkpoint(path)["model"]


def test_agenda_train_under_ddp(tmp_path):
    from graph_rma.tasks import agenda as task

    mp.spawn(agenda_worker, args=(2, str(tmp_path / "rdzv"), str(tmp_path)), nprocs=2, join=True)
    s0, s1 = (torch.load(tmp_path / f"summaries{r}.pt", weights_only=False) for r in (0, 1))
    for name in ("exact", "full", "resumed"):  # replicas bitwise equal (train() also raises if they are not)
        assert s0[name]["world_size"] == 2 and s0[name]["replica_sha1"] == s1[name]["replica_sha1"]
        # dev loss all-reduced, train loss averaged: the same on both ranks
        assert [h["dev_loss"] for h in s0[name]["history"]] == [h["dev_loss"] for h in s1[name]["history"]]
    assert s0["killed"] == {"stopped": True, "step": 3}  # mid-way through epoch 2 (2 global batches per epoch)
    # only rank 0 writes; the checkpoint keeps both ranks' RNG states (dropout differs between ranks)
    ck = load_checkpoint(tmp_path / "ddp_full" / "checkpoint.pt")
    assert ck["world_size"] == 2 and len(ck["rng_ranks"]) == 2
    assert not torch.equal(ck["rng_ranks"][0]["torch"], ck["rng_ranks"][1]["torch"])
    assert json.loads((tmp_path / "ddp_full" / "train.json").read_text())["replica_sha1"] == s0["full"]["replica_sha1"]
    # killed after 3 steps and resumed by two processes == uninterrupted two-process run, bit for bit
    a, b = _weights(tmp_path / "ddp_full" / "checkpoint.pt"), _weights(tmp_path / "ddp_resumed" / "checkpoint.pt")
    assert all(torch.equal(a[k], b[k]) for k in a)

    def losses(summary):  # everything but the wall time: the resumed epoch's train loss includes the killed part
        return [{k: v for k, v in h.items() if k != "seconds"} for h in summary["history"]]

    assert losses(s0["full"]) == losses(s0["resumed"])
    # a two-process checkpoint resumed by one process: allowed, with a warning (dropout draws differ)
    with pytest.warns(UserWarning, match="2-process run with 1 processes"):
        one = task.train(dict(TINY), tmp_path / "ddp_killed", FIXTURE, variant=SPOS_VARIANT, seed=1, progress=False)
    assert one["steps"] == 4 and "world_size" not in one
    # no dropout: the same global batch in one process gives the same weights up to summation order
    single = task.train(dict(NO_DROPOUT), tmp_path / "single", FIXTURE, variant=SPOS_VARIANT, seed=1, progress=False)
    a, b = _weights(tmp_path / "single" / "checkpoint.pt"), _weights(tmp_path / "ddp_exact" / "checkpoint.pt")
    assert single["steps"] == s0["exact"]["steps"] == 4
    for k in a:
        assert torch.allclose(a[k], b[k], atol=1e-5, rtol=1e-4), k
    init = _weights_at_init()
    assert any(not torch.allclose(init[k], b[k]) for k in init if k in b)
    dev_single = [h["dev_loss"] for h in single["history"]]
    dev_ddp = [h["dev_loss"] for h in s0["exact"]["history"]]
    assert dev_single == pytest.approx(dev_ddp, rel=1e-5)


def _weights_at_init():
    from graph_rma.data.agenda import build_vocab, load_agenda
    from graph_rma.engine import seed_everything
    from graph_rma.tasks import graph_to_text

    splits = load_agenda(FIXTURE)
    seed_everything(1)
    vocab = build_vocab(splits.train, min_freq=1)
    return graph_to_text.build_model(dict(NO_DROPOUT), len(vocab), len(splits.relation_names)).state_dict()


def test_shard_splits_like_tensor_split():
    items = list(range(7))
    parts = [shard(items, r, 3) for r in range(3)]
    assert parts == [[0, 1, 2], [3, 4], [5, 6]]
    assert parts == [t.tolist() for t in torch.tensor_split(torch.arange(7), 3)]
    assert shard(items) == items  # not distributed: everything
    assert shard([1], 1, 2) == []
    with pytest.raises(ValueError, match="rank"):
        shard(items, 2, 2)


def _torchrun(*args, timeout=300):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    # --standalone: a local rendezvous on a free port (no network needed)
    return subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_agenda_cli_under_torchrun(tmp_path):
    """The command users type: torchrun -m graph_rma.cli agenda train (rank 0 prints once and writes)."""
    r = _torchrun(
        "-m",
        "graph_rma.cli",
        "agenda",
        "train",
        "--root",
        str(FIXTURE),
        "--out",
        str(tmp_path / "run"),
        "--hidden",
        "32",
        "--layers",
        "1",
        "--heads",
        "2",
        "--epochs",
        "2",
        "--batch-size",
        "4",
        "--min-freq",
        "1",
        "--quiet",
        "--variant",
        SPOS_VARIANT,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    assert lines == [
        {
            "out": str(tmp_path / "run"),
            "variant": "spos:alpha=0.1,beta=1000",
            "best_dev_loss": lines[0]["best_dev_loss"],
            "steps": 4,
        }
    ]
    summary = json.loads((tmp_path / "run" / "train.json").read_text())
    assert summary["world_size"] == 2 and len(summary["replica_sha1"]) == 40


def test_text_example_under_torchrun(tmp_path):
    if not (resolve_root("text") / "TREC" / "TREC.train.all").is_file():
        pytest.skip("real text data not found: set GRAPH_RMA_DATA (datasets/text.md)")
    r = _torchrun(
        "examples/text_classification.py",
        "--max-train",
        "300",
        "--epochs",
        "1",
        "--variant",
        "spos:alpha=1,beta=1e5",
        "--out",
        str(tmp_path / "text"),
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "2 processes: replicas bitwise equal" in r.stdout
    assert r.stdout.count("test accuracy") == 1  # rank 0 alone reports
    assert (tmp_path / "text" / "heads.png").exists()
