import json
import math
from pathlib import Path

import pytest
import torch

from graph_rma.engine import load_checkpoint
from graph_rma.cli import agenda as cli
from graph_rma.data.agenda import AgendaEncoder, build_vocab, collate, load_agenda
from graph_rma.models.graphwriter import GraphWriter

FIXTURE = Path(__file__).resolve().parents[1] / "datasets" / "fixtures" / "agenda_tiny"


@pytest.fixture(scope="module")
def data():
    splits = load_agenda(FIXTURE)
    vocab = build_vocab(splits.train, min_freq=1)
    enc = AgendaEncoder(vocab, splits.relation_names)
    return splits, vocab, enc


@pytest.fixture(scope="module")
def memorised(data):
    splits, vocab, enc = data
    torch.manual_seed(0)
    model = GraphWriter(len(vocab), len(splits.relation_names), hidden=48, num_layers=2, heads=4, dropout=0.0,
                        attention_dropout=0.0)
    batch = collate(enc.encode_all(splits.train))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(60):
        opt.zero_grad()
        loss = model.loss(batch)
        loss.backward()
        opt.step()
    model.eval()
    return model, batch, float(loss.detach())


def test_memorises_and_greedy_reproduces(data, memorised):
    splits, vocab, enc = data
    model, batch, loss = memorised
    assert loss < 0.05
    hyps = model.greedy(batch, max_len=40)
    for h, rec in zip(hyps, splits.train):
        assert h[-1] == vocab.eos_id
        assert enc.decode(h, rec, relex=False) == rec.abstract
        assert enc.decode(h, rec) == rec.relexicalised()


def test_beam_size_one_equals_greedy(data, memorised):
    splits, vocab, enc = data
    model, batch, _ = memorised
    assert model.beam_search(batch, beam_size=1, max_len=40) == model.greedy(batch, max_len=40)
    torch.manual_seed(3)
    fresh = GraphWriter(len(vocab), 7, hidden=32, num_layers=1, heads=2).eval()
    b = collate(enc.encode_all(splits.test + splits.dev))
    g = fresh.greedy(b, max_len=12)
    assert g == fresh.beam_search(b, beam_size=1, max_len=12)
    assert all(len(s) == 12 or s[-1] == vocab.eos_id for s in g)
    assert all(vocab.unk_id not in s and vocab.pad_id not in s for s in g)  # no <unk>
    wide = fresh.beam_search(b, beam_size=4, max_len=12, length_penalty=0.0)
    assert len(wide) == len(g)


def test_wider_beam_reproduces_memorised_records(data, memorised):
    splits, vocab, enc = data
    model, batch, _ = memorised
    for h, rec in zip(model.beam_search(batch, beam_size=4, max_len=40), splits.train):
        assert enc.decode(h, rec, relex=False) == rec.abstract


def test_copy_yields_entity_text(data):
    splits, vocab, enc = data
    torch.manual_seed(0)
    model = GraphWriter(len(vocab), 7, hidden=32, num_layers=1, heads=2).eval()
    with torch.no_grad():  # switch always "copy": p(copy) = 1 - sigmoid(-40)
        model.switch.weight.zero_()
        model.switch.bias.fill_(-40.0)
    rec = splits.test[0]
    b = collate([enc.encode(rec)])
    out = model.greedy(b, max_len=3)[0]
    V = len(vocab)
    assert all(t >= V for t in out) and len(out) == 3
    text = enc.decode(out, rec)
    assert text == " ".join(rec.entities[t - V] for t in out)
    # a copied entity is fed back as its type tag
    mem = model.encode(b)
    assert model.input_ids(torch.tensor([V + 1]), mem).item() == vocab.stoi[rec.types[1]]


def test_copy_probabilities_are_a_distribution(data):
    splits, vocab, enc = data
    torch.manual_seed(0)
    model = GraphWriter(len(vocab), 7, hidden=32, num_layers=1, heads=2).eval()
    b = collate(enc.encode_all(splits.train[:3] + splits.train[4:5]))  # the 4th has only 2 entities
    with torch.no_grad():
        logp = model(b)
    torch.testing.assert_close(logp.exp().sum(-1), torch.ones(logp.shape[:2]), rtol=1e-5, atol=1e-5)
    assert torch.isinf(logp[3, :, len(vocab) + 2]).all()  # no copying of a padded entity slot


SMALL = dict(hidden=32, layers=1, heads=2, dropout=0.2, attention_dropout=0.1, decoder_heads=2, epochs=2,
             batch_size=2, optimizer="adam", lr=3e-3, momentum=0.9, clip=1.0, min_freq=1, max_target_len=None,
             beam=2, max_len=20, length_penalty=1.0)


def test_resume_after_kill_is_identical(tmp_path):
    variant = "spos:alpha=0.1,eps=1,beta=1000"  # uses the sampler's own noise generator
    full = cli.train(dict(SMALL), tmp_path / "full", FIXTURE, variant=variant, seed=1, progress=False)
    killed = cli.train(dict(SMALL), tmp_path / "resumed", FIXTURE, variant=variant, seed=1, stop_after=4,
                       progress=False)
    assert killed == {"stopped": True, "step": 4}  # mid-way through epoch 2 (3 batches per epoch)
    resumed = cli.train(dict(SMALL), tmp_path / "resumed", FIXTURE, variant=variant, seed=1, progress=False)
    assert resumed["steps"] == full["steps"] == 6
    a = load_checkpoint(tmp_path / "full" / "checkpoint.pt")
    b = load_checkpoint(tmp_path / "resumed" / "checkpoint.pt")
    for k in a["model"]:
        assert torch.equal(a["model"][k], b["model"][k]), k
    assert [h["dev_loss"] for h in full["history"]] == [h["dev_loss"] for h in resumed["history"]]
    with pytest.raises(ValueError, match="variant"):
        cli.train(dict(SMALL), tmp_path / "full", FIXTURE, variant="ma", seed=1, progress=False)


def test_cli_train_generate_evaluate(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["--root", str(FIXTURE), "--out", str(out), "--quiet"]
    assert cli.main(["train", *args, "--hidden", "32", "--layers", "1", "--heads", "2", "--epochs", "1",
                     "--batch-size", "3", "--min-freq", "1", "--variant", "svgd:alpha=0.1+dropattn:p=0.1"]) == 0
    assert (out / "best.pt").exists() and (out / "checkpoint.pt").exists()
    assert cli.main(["generate", *args, "--split", "test", "--beam", "2", "--max-len", "15"]) == 0
    hyp = (out / "hyp.test.txt").read_text().split("\n")[:-1]
    gold = (out / "gold.test.txt").read_text().split("\n")[:-1]
    assert len(hyp) == len(gold) == 2
    assert gold[1] == "we study summarization of news articles ."
    side = (out / "side_by_side.test.tsv").read_text().split("\n")
    assert side[0] == "title\thypothesis\treference" and side[1].split("\t")[1:] == [hyp[0], gold[0]]
    capsys.readouterr()
    assert cli.main(["evaluate", *args, "--split", "test", "--meteor", "none"]) == 0  # no JVM start in the tests
    result = json.loads(capsys.readouterr().out)
    assert result["records"] == 2 and 0.0 <= result["BLEU-4"] <= 100.0 and result["METEOR_impl"] is None
    # scoring the gold file against itself through the same call gives perfect scores
    perfect = cli._evaluate_generation(gold, gold, [["deep networks", "accuracy"], ["summarization", "news articles"]],
                                       meteor="none")
    assert perfect["BLEU-4"] == pytest.approx(100.0) and perfect["ROUGE-L"] == pytest.approx(100.0)
    assert perfect["entity_coverage"] == pytest.approx(100.0)
    assert json.loads((out / "metrics.test.json").read_text())["BLEU-1"] == result["BLEU-1"]


def test_regularised_variant_uses_encoder_attention(tmp_path, data):
    splits, vocab, enc = data
    torch.manual_seed(0)
    model = GraphWriter(len(vocab), 7, hidden=32, num_layers=2, heads=2)
    loss, attention = model.loss(collate(enc.encode_all(splits.train[:2])), return_attention=True)
    assert len(attention) == 2 and attention[0][0].shape[1] == 2
    summary = cli.train(dict(SMALL, epochs=1), tmp_path / "reg", FIXTURE, variant="reg:kind=frobenius,weight=0.01",
                        progress=False)
    assert summary["steps"] == 3 and math.isfinite(summary["best_dev_loss"])


def test_head_diversity_command(tmp_path, capsys):
    out = tmp_path / "run"
    cli.train(dict(SMALL, epochs=1, heads=4), out, FIXTURE, variant="ma", progress=False)
    capsys.readouterr()
    assert cli.main(["heads", "--root", str(FIXTURE), "--out", str(out), "--split", "train"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["records"] == 6 and len(result["attention_cosine"]) == 1
    model, _, _ = cli.load_model(out / "best.pt")
    layer = model.encoder.layers[0]
    lins = [layer.lin_query, layer.lin_key, layer.lin_value]
    w = torch.cat([lin.weight.detach().view(4, -1) for lin in lins] + [lin.bias.detach().view(4, -1) for lin in lins], 1)
    w = torch.nn.functional.normalize(w, dim=1)  # head h = rows h*d:(h+1)*d of each projection
    expected = (w @ w.t())[torch.triu_indices(4, 4, 1).unbind()].mean()
    assert result["head_parameter_cosine"] == pytest.approx(float(expected), abs=1e-5)
