"""graph_rma.tasks.graph_to_text: the shared GraphWriter trainer (exact resume, best checkpoint, variants applied by
apply_variant only), decoding settings and run folders, on the tiny AGENDA fixture."""

import math
from pathlib import Path

import pytest
import torch

from graph_rma import DropAttention
from graph_rma.data.agenda import AgendaEncoder, build_vocab, load_agenda
from graph_rma.data.graph_text import collate
from graph_rma.engine import ResumeMismatchError, load_checkpoint, save_checkpoint
from graph_rma.models.graphwriter import GraphWriter
from graph_rma.tasks import agenda
from graph_rma.tasks import graph_to_text as g2t
from graph_rma.tasks import graph_to_text_model as g2m

FIXTURE = Path(__file__).resolve().parents[1] / "datasets" / "fixtures" / "agenda_tiny"
SMALL = dict(
    hidden=32,
    layers=1,
    heads=2,
    dropout=0.2,
    attention_dropout=0.1,
    decoder_heads=2,
    epochs=2,
    batch_size=2,
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


@pytest.fixture(scope="module")
def data():
    splits = load_agenda(FIXTURE)
    vocab = build_vocab(splits.train, min_freq=1)
    return splits, vocab, AgendaEncoder(vocab, splits.relation_names)


# SPOS uses the sampler's own noise generator; DropAttention with a window draws from torch's generator and uses
# the cached edge order
@pytest.mark.slow
@pytest.mark.parametrize("variant", ["spos:alpha=0.1,eps=1,beta=1000", "svgd:alpha=0.1+dropattn:p=0.3,w=2"])
def test_resume_after_kill_is_identical(tmp_path, variant):
    full = agenda.train(dict(SMALL), tmp_path / "full", FIXTURE, variant=variant, seed=1, progress=False)
    killed = agenda.train(
        dict(SMALL), tmp_path / "resumed", FIXTURE, variant=variant, seed=1, stop_after=4, progress=False
    )
    assert killed == {"stopped": True, "step": 4}  # mid-way through epoch 2 (3 batches per epoch)
    resumed = agenda.train(dict(SMALL), tmp_path / "resumed", FIXTURE, variant=variant, seed=1, progress=False)
    assert resumed["steps"] == full["steps"] == 6
    a = load_checkpoint(tmp_path / "full" / "checkpoint.pt")
    b = load_checkpoint(tmp_path / "resumed" / "checkpoint.pt")
    for k in a["model"]:
        assert torch.equal(a["model"][k], b["model"][k]), k
    assert [h["dev_loss"] for h in full["history"]] == [h["dev_loss"] for h in resumed["history"]]
    with pytest.raises(ValueError, match="variant"):
        agenda.train(dict(SMALL), tmp_path / "full", FIXTURE, variant="ma", seed=1, progress=False)


def test_regularised_variant_uses_encoder_attention(tmp_path, data):
    splits, vocab, enc = data
    torch.manual_seed(0)
    model = GraphWriter(len(vocab), 7, hidden=32, num_layers=2, heads=2)
    loss, attention = model.loss(collate(enc.encode_all(splits.train[:2])), return_attention=True)
    assert len(attention) == 2 and attention[0][0].shape[1] == 2
    summary = agenda.train(
        dict(SMALL, epochs=1), tmp_path / "reg", FIXTURE, variant="reg:kind=frobenius,weight=0.01", progress=False
    )
    assert summary["steps"] == 3 and math.isfinite(summary["best_dev_loss"])


def test_reg_on_head_outputs_is_refused_before_any_data_is_read(tmp_path, data):
    from graph_rma.tasks import webnlg

    spec = "reg:kind=disagreement,weight=0.1,target=outputs"
    for train in (agenda.train, webnlg.train):  # a missing data folder: the variant is checked first
        with pytest.raises(ValueError, match="variant: reg target=outputs is not supported"):
            train(dict(SMALL), tmp_path / "run", tmp_path / "no_data_here", variant=spec, progress=False)
    with pytest.raises(ValueError, match="target=outputs"):
        g2t.train(dict(SMALL), tmp_path / "run", data[0], variant=spec, progress=False)
    assert not (tmp_path / "run").exists()


def test_variant_is_applied_by_apply_variant_alone(tmp_path, monkeypatch):
    calls = []
    real = g2t.apply_variant

    def spy(variant, model, optimizer=None, seed=0):
        assert all(layer.drop_attention is None for layer in model.encoder.layers)  # built without DropAttention
        setup = real(variant, model, optimizer, seed=seed)
        calls.append((model, setup))
        return setup

    monkeypatch.setattr(g2t, "apply_variant", spy)
    summary = agenda.train(
        dict(SMALL, epochs=1, layers=2),
        tmp_path / "run",
        FIXTURE,
        seed=3,
        progress=False,
        variant="svgd:alpha=0.1+dropattn:p=0.3,w=2",
    )
    assert summary["steps"] == 3 and len(calls) == 1
    model, setup = calls[0]
    drops = [layer.drop_attention for layer in model.encoder.layers]
    assert drops == setup.drop_attention and len({id(d) for d in drops}) == 2  # one instance per layer
    assert all(isinstance(d, DropAttention) and (d.p, d.window) == (0.3, 2) for d in drops)
    assert setup.sampler is not None and setup.sampler.seed == 3
    ck = load_checkpoint(tmp_path / "run" / "checkpoint.pt")
    assert ck["variant"] == "svgd:alpha=0.1+dropattn:p=0.3,window=2,mode=element,rescale=normalized"
    # the weights need no variant to be loaded: DropAttention has no state, the sampler state is in checkpoint.pt
    model, _, _ = g2m.load_model(tmp_path / "run" / "best.pt")
    assert all(layer.drop_attention is None for layer in model.encoder.layers) and not model.training


def test_run_folder_and_decode_settings(tmp_path):
    a, b = g2t.run_folder(tmp_path, "svgd:alpha=0.1"), g2t.run_folder(tmp_path, "svgd:alpha=1")
    assert a != b and a.parent == b.parent == tmp_path
    assert g2t.run_folder(tmp_path, "svgd:alpha=0.10,eps=1") == a  # the same variant, spelt differently
    cfg = dict(SMALL)
    run = {"beam": 2, "max_len": 20, "length_penalty": 1.0}
    off = {"no_repeat_ngram": 0, "coverage_reward": 0.0}
    assert g2m.decode_settings(cfg) == {**run, **off}  # a config without the optional settings: off
    assert g2m.decode_settings(cfg, beam=None, max_len=None) == {**run, **off}  # None: the run's
    given = dict(beam=1, max_len=7, length_penalty=0.0, no_repeat_ngram=3, coverage_reward=0.5)
    assert g2m.decode_settings(cfg, **given) == given
    saved = dict(cfg, no_repeat_ngram=4, coverage_reward=1.5)
    assert g2m.decode_settings(saved) == {**run, "no_repeat_ngram": 4, "coverage_reward": 1.5}
    assert g2m.decode_settings(saved, no_repeat_ngram=0, coverage_reward=0.0) == {**run, **off}  # 0 given: off
    with pytest.raises(TypeError, match="not decoding settings: epochs"):
        g2m.decode_settings(cfg, epochs=3)


@pytest.mark.slow
def test_resume_with_other_settings_is_refused_and_more_epochs_are_applied(tmp_path, capsys):
    """train on an existing run folder: other settings are refused with every difference named (and nothing is
    written); more epochs are applied, said, and end where a run trained for that long at once ends."""
    out = tmp_path / "run"
    one = dict(SMALL, epochs=1)
    first = agenda.train(dict(one), out, FIXTURE, variant="ma", seed=0, progress=False)
    assert first["steps"] == 3 and len(first["history"]) == 1
    before = (out / "checkpoint.pt").read_bytes()
    with pytest.raises(ResumeMismatchError) as err:
        agenda.train(dict(one, hidden=64, lr=1e-3), out, FIXTURE, variant="ma", seed=0, progress=False)
    assert [d[0] for d in err.value.differences] == ["hidden", "lr"]
    assert "hidden 32 -> 64, lr 0.003 -> 0.001" in str(err.value) and str(out / "checkpoint.pt") in str(err.value)
    with pytest.raises(ResumeMismatchError, match=r"train_records \d+ -> 2"):
        agenda.train(dict(one), out, FIXTURE, variant="ma", seed=0, max_train=2, progress=False)
    with pytest.raises(ResumeMismatchError, match="seed 0 -> 1, variant 'ma' -> 'svgd:alpha=0.1'"):
        agenda.train(dict(one), out, FIXTURE, variant="svgd", seed=1, progress=False)
    assert (out / "checkpoint.pt").read_bytes() == before
    capsys.readouterr()
    more = agenda.train(dict(one, epochs=2, beam=1), out, FIXTURE, variant="ma", seed=0, progress=False)
    err = capsys.readouterr().err
    assert f"resume {out}: beam: 2 -> 1 (applied)" in err and f"resume {out}: epochs: 1 -> 2 (applied)" in err
    assert more["steps"] == 6 and len(more["history"]) == 2
    assert load_checkpoint(out / "checkpoint.pt")["config"] == dict(SMALL, epochs=2, beam=1)
    straight = agenda.train(dict(SMALL, epochs=2), tmp_path / "straight", FIXTURE, variant="ma", seed=0, progress=False)
    assert [h["dev_loss"] for h in more["history"]] == [h["dev_loss"] for h in straight["history"]]
    a, b = (load_checkpoint(p / "checkpoint.pt")["model"] for p in (out, tmp_path / "straight"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    with pytest.raises(ValueError, match="has already trained 2 epochs, more than 1"):
        agenda.train(dict(one), out, FIXTURE, variant="ma", seed=0, progress=False)
    again = agenda.train(dict(SMALL, epochs=2, beam=1), out, FIXTURE, variant="ma", seed=0, progress=False)
    assert again["steps"] == 6 and "already trained 2 epochs; nothing to do" in capsys.readouterr().err


def test_settings_that_cannot_train_are_refused(tmp_path):
    for key, value in (("epochs", 0), ("batch_size", 0), ("hidden", -1), ("dropout", 1.0), ("lr", 0.0)):
        with pytest.raises(ValueError, match=f"^{key}: expected"):
            g2t.check_config(dict(SMALL, **{key: value}))
    with pytest.raises(ValueError, match="^epochs: expected a positive integer, got 0"):
        agenda.train(dict(SMALL, epochs=0), tmp_path / "run", FIXTURE, progress=False)
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_plateau_schedule_halves_the_rate_on_dev_loss_and_resumes_exactly(tmp_path):
    """lr_schedule=plateau: the rate is halved after an epoch whose dev loss is not the best so far; a run stopped
    mid-way and resumed decays at the same epochs and ends with the same weights."""
    cfg = dict(SMALL, epochs=5, lr=0.05, lr_schedule={"kind": "plateau", "factor": 0.5, "patience": 0, "min_lr": 0.01})
    full = agenda.train(dict(cfg), tmp_path / "full", FIXTURE, seed=1, progress=False)
    lrs, losses = [h["lr"] for h in full["history"]], [h["dev_loss"] for h in full["history"]]
    expected, lr, best = [], 0.05, math.inf
    for loss in losses:  # the rule, replayed by hand on the recorded dev losses
        expected.append(lr)
        if loss < best:
            best = loss
        else:
            lr = max(lr * 0.5, 0.01)
    assert lrs == pytest.approx(expected) and len(set(lrs)) > 1  # it did decay on this run
    assert agenda.train(dict(cfg), tmp_path / "resumed", FIXTURE, seed=1, stop_after=7, progress=False)["stopped"]
    resumed = agenda.train(dict(cfg), tmp_path / "resumed", FIXTURE, seed=1, progress=False)
    assert [h["lr"] for h in resumed["history"]] == lrs
    a, b = (load_checkpoint(tmp_path / p / "checkpoint.pt") for p in ("full", "resumed"))
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    assert a["lr_scheduler"] == b["lr_scheduler"]
    # without the key nothing is scheduled and nothing new is recorded
    plain = agenda.train(dict(SMALL, epochs=1), tmp_path / "plain", FIXTURE, seed=1, progress=False)
    assert "lr" not in plain["history"][0] and "lr_scheduler" not in load_checkpoint(
        tmp_path / "plain" / "checkpoint.pt"
    )
    with pytest.raises(ResumeMismatchError, match="lr_schedule"):  # a schedule cannot be switched on when resuming
        agenda.train(dict(cfg, epochs=2), tmp_path / "plain", FIXTURE, seed=1, progress=False)


def test_a_bad_lr_schedule_or_an_unknown_setting_is_one_clear_error():
    good = {"kind": "plateau", "factor": 0.5, "patience": 0, "min_lr": 0.0}
    g2t.check_config(dict(SMALL, lr_schedule=good))
    g2t.check_config(dict(SMALL, lr_schedule=None))
    for bad, message in (
        ({"kind": "cosine"}, "^lr_schedule: expected None or a dict with kind in"),
        ({**good, "factor": 1.0}, r"^lr_schedule: factor expected in \(0, 1\)"),
        ({**good, "patience": -1}, "^lr_schedule: patience expected a non-negative integer"),
        ({**good, "min_lr": -1}, "^lr_schedule: min_lr expected a non-negative number"),
        ({"kind": "plateau", "factor": 0.5}, "^lr_schedule: kind plateau takes exactly"),
    ):
        with pytest.raises(ValueError, match=message):
            g2t.check_config(dict(SMALL, lr_schedule=bad))
    with pytest.raises(ValueError, match="^config: unknown setting lr_shedule"):
        g2t.check_config(dict(SMALL, lr_shedule=good))


def test_keep_dev_bleu_keeps_the_epoch_the_scorer_ranks_highest(tmp_path, data, monkeypatch):
    """``keep="dev_bleu"``: best.pt is the epoch of the highest dev BLEU (ties: the earlier), whatever the dev loss
    says; the scorer gets the model and the run's vocabulary, and each epoch's BLEU is in the history."""
    splits, _, _ = data
    scripted, seen = iter([10.0, 30.0, 30.0]), []

    def scorer(model, vocab):
        seen.append((model.training, len(vocab)))
        return next(scripted)

    config = dict(SMALL, epochs=3, keep="dev_bleu")
    summary = g2t.train(config, tmp_path / "run", splits, seed=0, progress=False, dev_bleu=scorer)
    assert [h["dev_bleu"] for h in summary["history"]] == [10.0, 30.0, 30.0] and summary["best_dev_bleu"] == 30.0
    assert all(h["dev_bleu_seconds"] >= 0 for h in summary["history"])  # the dev decode, timed apart
    best = load_checkpoint(tmp_path / "run" / "best.pt")
    assert (best["epoch"], best["dev_bleu"]) == (2, 30.0)  # the tie at epoch 3 keeps epoch 2
    assert seen == [(False, len(best["vocab"]))] * 3  # in eval mode (no dropout), with the run's vocabulary
    # resumed after a kill in epoch 2, the best BLEU so far (10, epoch 1) is restored: lower scores keep epoch 1
    g2t.train(config, tmp_path / "killed", splits, seed=0, progress=False, dev_bleu=lambda m, v: 10.0, stop_after=4)
    g2t.train(config, tmp_path / "killed", splits, seed=0, progress=False, dev_bleu=lambda m, v: 5.0)
    assert load_checkpoint(tmp_path / "killed" / "best.pt")["epoch"] == 1
    with pytest.raises(ValueError, match=r"^keep: dev_bleu needs the task's dev scorer"):
        g2t.train(config, tmp_path / "other", splits, progress=False)
    # the default keeps the lowest dev loss and never decodes dev
    plain = g2t.train(dict(SMALL), tmp_path / "plain", splits, seed=0, progress=False, dev_bleu=scorer)
    losses = [h["dev_loss"] for h in plain["history"]]
    assert load_checkpoint(tmp_path / "plain" / "best.pt")["epoch"] == 1 + losses.index(min(losses))
    assert len(seen) == 3 and "dev_bleu" not in plain["history"][0]


def test_label_smoothing_reaches_the_training_loss_only(tmp_path, data, monkeypatch):
    """``label_smoothing``: every training step's loss is smoothed, the dev loss (and so best.pt and the schedule)
    stays the plain NLL; the run keeps the setting, a resume cannot change it, and 0 is the mapping it always was."""
    splits, _, _ = data
    calls = []
    loss = GraphWriter.loss

    def spy(self, batch, return_attention=False, reduction="mean", label_smoothing=0.0):
        calls.append((self.training, label_smoothing))
        return loss(self, batch, return_attention, reduction, label_smoothing)

    monkeypatch.setattr(GraphWriter, "loss", spy)
    config = dict(SMALL, epochs=1, label_smoothing=0.2)
    g2t.train(config, tmp_path / "run", splits, seed=0, progress=False)
    assert {c for c in calls if c[0]} == {(True, 0.2)} and {c for c in calls if not c[0]} == {(False, 0.0)}
    assert load_checkpoint(tmp_path / "run" / "best.pt")["config"]["label_smoothing"] == 0.2
    with pytest.raises(ResumeMismatchError, match="label_smoothing"):
        g2t.train(dict(config, epochs=2, label_smoothing=0.1), tmp_path / "run", splits, seed=0, progress=False)
    assert "label_smoothing" not in g2t.check_config(dict(SMALL, label_smoothing=0.0))


def test_an_epoch_cut_by_a_stop_records_its_whole_training_time(tmp_path, data, monkeypatch):
    """The checkpoint holds the epoch's seconds so far and a resume carries them on, so the history's ``seconds``
    is the epoch's training time, not the part after the resume; an older checkpoint without them is flagged."""
    splits, _, _ = data

    def clock(start):  # each reading 10 s after the last
        ticks = iter(range(start, 10**6, 10))
        return lambda: float(next(ticks))

    # epoch 1: 0 -> 10; epoch 2 starts at 20, stopped after its first batch at 30: 10 s of it trained
    monkeypatch.setattr(g2t, "_clock", clock(0))
    g2t.train(dict(SMALL), tmp_path / "run", splits, seed=0, progress=False, stop_after=4)
    saved = load_checkpoint(tmp_path / "run" / "checkpoint.pt")
    assert (saved["epoch"], saved["batch"], saved["epoch_seconds"]) == (1, 1, 10.0)
    monkeypatch.setattr(g2t, "_clock", clock(1000))  # resumed: 10 s more for the rest of epoch 2
    history = g2t.train(dict(SMALL), tmp_path / "run", splits, seed=0, progress=False)["history"]
    assert [h["seconds"] for h in history] == [10.0, 20.0] and not any("seconds_partial" in h for h in history)
    # a checkpoint of an older release (no epoch_seconds): the resumed epoch counts from the resume, and says so
    monkeypatch.setattr(g2t, "_clock", clock(0))
    g2t.train(dict(SMALL), tmp_path / "old", splits, seed=0, progress=False, stop_after=4)
    old = load_checkpoint(tmp_path / "old" / "checkpoint.pt")
    del old["epoch_seconds"]
    save_checkpoint(tmp_path / "old" / "checkpoint.pt", old)
    monkeypatch.setattr(g2t, "_clock", clock(1000))
    history = g2t.train(dict(SMALL), tmp_path / "old", splits, seed=0, progress=False)["history"]
    assert [(h["seconds"], h.get("seconds_partial", False)) for h in history] == [(10.0, False), (10.0, True)]


@pytest.mark.slow
def test_the_agenda_dev_scorer_is_evaluates_bleu(tmp_path, data):
    """agenda.dev_bleu decodes dev with the run's settings and scores it as evaluate scores the same outputs."""
    pytest.importorskip("pycocoevalcap")
    splits, _, _ = data
    config = dict(SMALL, epochs=1, keep="dev_bleu", beam=1)
    summary = agenda.train(config, tmp_path / "run", FIXTURE, seed=0, progress=False)
    result = agenda.evaluate(tmp_path / "run", "val", FIXTURE, meteor="none", progress=False)
    assert summary["history"][0]["dev_bleu"] == pytest.approx(result["BLEU-4"])


@pytest.mark.slow
def test_ctrl_c_saves_the_step_it_came_in_and_the_run_resumes_as_if_uninterrupted(tmp_path, monkeypatch):
    """A real SIGINT during step 4 (of 6): the trainer finishes that step, saves it (no periodic save was due) and
    stops with KeyboardInterrupt; run again, it ends with the same weights as an uninterrupted run."""
    import signal

    full = agenda.train(dict(SMALL), tmp_path / "full", FIXTURE, seed=1, progress=False)
    real_step, steps = torch.optim.Adam.step, []

    def step_with_ctrl_c(self, *args, **kwargs):
        steps.append(1)
        if len(steps) == 4:
            signal.raise_signal(signal.SIGINT)  # during the step: held until it is whole
        return real_step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.Adam, "step", step_with_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        agenda.train(dict(SMALL), tmp_path / "cut", FIXTURE, seed=1, progress=False)
    saved = load_checkpoint(tmp_path / "cut" / "checkpoint.pt")
    assert (saved["step"], saved["epoch"], saved["batch"]) == (4, 1, 1)  # epoch 2's first batch done (3 per epoch)
    monkeypatch.setattr(torch.optim.Adam, "step", real_step)
    resumed = agenda.train(dict(SMALL), tmp_path / "cut", FIXTURE, seed=1, progress=False)
    a = load_checkpoint(tmp_path / "full" / "checkpoint.pt")["model"]
    b = load_checkpoint(tmp_path / "cut" / "checkpoint.pt")["model"]
    assert resumed["steps"] == full["steps"] == 6 and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.slow
def test_ctrl_c_in_the_dev_phase_stops_after_the_epochs_save_and_the_run_resumes_as_if_uninterrupted(
    tmp_path, monkeypatch
):
    """A real SIGINT while epoch 1's dev loss is computed: the trainer finishes the dev phase, records the epoch,
    writes best.pt and the end-of-epoch checkpoint, then stops; run again, it trains epoch 2 only and ends with the
    weights and history of an uninterrupted run."""
    import signal

    full = agenda.train(dict(SMALL), tmp_path / "full", FIXTURE, seed=1, progress=False)
    real_dev_loss, calls = g2t.dev_loss, []

    def dev_loss_with_ctrl_c(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            signal.raise_signal(signal.SIGINT)  # in epoch 1's dev phase: held until the epoch is saved
        return real_dev_loss(*args, **kwargs)

    monkeypatch.setattr(g2t, "dev_loss", dev_loss_with_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        agenda.train(dict(SMALL), tmp_path / "cut", FIXTURE, seed=1, progress=False)
    saved = load_checkpoint(tmp_path / "cut" / "checkpoint.pt")
    assert (saved["step"], saved["epoch"], saved["batch"], len(saved["history"])) == (3, 1, 0, 1)
    assert (tmp_path / "cut" / "best.pt").exists()
    assert saved["history"][0]["dev_loss"] == pytest.approx(full["history"][0]["dev_loss"])
    monkeypatch.setattr(g2t, "dev_loss", real_dev_loss)
    resumed = agenda.train(dict(SMALL), tmp_path / "cut", FIXTURE, seed=1, progress=False)
    a = load_checkpoint(tmp_path / "full" / "checkpoint.pt")["model"]
    b = load_checkpoint(tmp_path / "cut" / "checkpoint.pt")["model"]
    assert resumed["steps"] == full["steps"] == 6 and all(torch.equal(a[k], b[k]) for k in a)
    assert [h["dev_loss"] for h in resumed["history"]] == pytest.approx([h["dev_loss"] for h in full["history"]])
