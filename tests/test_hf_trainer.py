"""graph_rma.hf.SamplerCallback with transformers' Trainer: one process, two CPU processes under DDP, and the example
script (tiny random models; nothing is downloaded)."""

import os
import subprocess
import sys

import pytest
import torch

pytest.importorskip("transformers", minversion="5", reason="transformers>=5 (extra 'hf') is not installed")
pytest.importorskip("accelerate", reason="accelerate (extra 'hf') is not installed: transformers' Trainer needs it")

from conftest import REPO, needs_text
from test_hf import bert

import graph_rma.hf as hf


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n=4):
        g = torch.Generator().manual_seed(3)
        self.ids, self.labels = torch.randint(1, 40, (n, 6), generator=g), torch.randint(0, 3, (n,), generator=g)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


@pytest.fixture
def no_datasets(monkeypatch):
    """The repository's datasets/ folder (dataset cards) is a namespace package on the test path, which transformers
    takes for the datasets library; these tests use torch datasets."""
    import transformers.trainer

    monkeypatch.setattr(transformers.trainer, "is_datasets_available", lambda: False)


def train(tmp_path, callbacks, steps=1, batch=4, ddp=False):
    from transformers import Trainer, TrainingArguments

    model = bert()
    args = TrainingArguments(
        output_dir=str(tmp_path),
        max_steps=steps,
        per_device_train_batch_size=batch,
        learning_rate=0.05,
        optim="sgd",
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        seed=0,
        disable_tqdm=True,
        logging_strategy="no",
        dataloader_num_workers=0,
        ddp_backend="gloo" if ddp else None,
        # transformers 5.24 multiplies the loss by the number of processes whenever forward takes
        # **kwargs, also when the loss (here a mean over the rank's batch) ignores the item count
        average_tokens_across_devices=False,
    )
    Trainer(model=model, args=args, train_dataset=Tokens(), callbacks=callbacks).train()
    return model


@pytest.mark.slow
def test_sampler_callback_moves_only_the_heads_differently(tmp_path, no_datasets):
    plain = dict(train(tmp_path, []).named_parameters())
    callback = hf.SamplerCallback("svgd:alpha=0.5,eps=1")
    repulsive = dict(train(tmp_path, [callback]).named_parameters())
    assert callback.sampler.steps == 1 and len(callback.sampler.groups) == 2
    heads = {n for n in repulsive if ".attention.self." in n or "attention.output.dense.weight" in n}
    for n, p in repulsive.items():
        same = torch.equal(p, plain[n])
        assert same != (n in heads), n  # one step: only the particles' parameters moved differently
    with pytest.raises(ValueError, match="regularisation term"):
        hf.SamplerCallback("reg:weight=0.1")


def test_a_sampler_callback_serves_one_model(tmp_path, no_datasets):
    """One callback reused for a second Trainer (a seed loop) left the second model unsampled, and a callback built
    on another model trained the Trainer's model plain, both with exit 0: each is refused in one line."""
    import graph_rma

    callback = hf.SamplerCallback("svgd:alpha=0.5,eps=1")
    train(tmp_path, [callback])
    with pytest.raises(graph_rma.GraphRMAError, match=r"already trains the model of an earlier Trainer; build one"):
        train(tmp_path, [callback])
    other = graph_rma.SVGD(bert(), alpha=0.5)
    with pytest.raises(graph_rma.GraphRMAError, match=r"^SamplerCallback: the SVGD was built over another model"):
        train(tmp_path, [hf.SamplerCallback(other)])
    assert other.steps == 0


def _ddp_worker(rank, world, init_file, out_dir):
    """One rank of a 2-process CPU run (gloo, file rendezvous): Trainer + SamplerCallback("spos") for 2 steps."""
    import torch.distributed as dist
    import transformers.trainer

    os.environ.update(
        RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world), OMP_NUM_THREADS="1"
    )
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    transformers.trainer.is_datasets_available = lambda: False  # see no_datasets
    model = train(out_dir, [hf.SamplerCallback("spos:alpha=0.5,eps=0.5,beta=100")], steps=2, batch=2, ddp=True)
    torch.save(torch.cat([p.detach().flatten() for p in model.parameters()]), os.path.join(out_dir, f"{rank}.pt"))
    dist.destroy_process_group()


@pytest.mark.slow
def test_sampler_callback_under_ddp_keeps_replicas_equal_and_matches_one_process(tmp_path, no_datasets):
    """The gradient-synchronisation rule: the callback runs after DDP's all-reduce, with the same noise seed on every
    rank; each step's global batch is the whole set (4 examples), so one process with batch 4 trains the same."""
    import torch.multiprocessing as mp

    mp.spawn(_ddp_worker, args=(2, str(tmp_path / "rdzv"), str(tmp_path)), nprocs=2, join=True)
    r0, r1 = torch.load(tmp_path / "0.pt"), torch.load(tmp_path / "1.pt")
    assert torch.equal(r0, r1)
    single = train(tmp_path, [hf.SamplerCallback("spos:alpha=0.5,eps=0.5,beta=100")], steps=2, batch=4)
    flat = torch.cat([p.detach().flatten() for p in single.parameters()])
    assert torch.allclose(flat, r0, atol=1e-5) and not torch.equal(
        flat, torch.cat([p.detach().flatten() for p in bert().parameters()])
    )


@pytest.mark.slow
@needs_text
def test_the_example_prints_one_table_and_writes_the_plot(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib (extra 'plots') is not installed")
    cmd = [
        sys.executable,
        str(REPO / "examples" / "hf_text_classification.py"),
        "--seeds",
        "0",
        "1",
        "--epochs",
        "1",
        "--max-train",
        "200",
        "--out",
        str(tmp_path),
    ]
    out = subprocess.run(
        cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path, env={**os.environ, "OMP_NUM_THREADS": "1"}
    )
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [line for line in out.stdout.splitlines() if line.startswith("| ")]
    assert [r.split("|")[1].strip() for r in rows] == [
        "arm",
        "ma",
        "dropattn:p=0.1,mode=column",
        "svgd:alpha=0.1,eps=1",
    ]
    assert (tmp_path / "head_importance.png").stat().st_size > 0
    assert out.stderr.count("100%|") >= 6  # a progress bar while each arm trains, on each seed
