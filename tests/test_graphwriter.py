"""graph_rma.models.graphwriter: memorising, greedy and beam search, copying, open-vocabulary relation text."""

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from graph_rma.data.agenda import AgendaEncoder, build_vocab, load_agenda
from graph_rma.data.graph_text import INVERSE, RELATION, collate
from graph_rma.data.webnlg import WebNLGEncoder, build_webnlg_vocab, load_webnlg_splits
from graph_rma.models.graphwriter import GraphWriter

#: the decoding settings these tests leave off (GraphWriter's decoding methods take every one: their defaults live in
#: GeneratorConfig alone)
OFF = {"no_repeat_ngram": 0, "coverage_reward": 0.0}


def _greedy(model, batch, max_len, **settings):
    return model.greedy(batch, max_len=max_len, **{**OFF, **settings})


def _beam(model, batch, beam, max_len, length_penalty=1.0, **settings):
    return model.beam_search(batch, beam=beam, max_len=max_len, length_penalty=length_penalty, **{**OFF, **settings})


def test_the_decoding_settings_have_their_defaults_in_the_configuration_only():
    import inspect

    from graph_rma.tasks.generator_config import DECODING_FIELDS

    params = inspect.signature(GraphWriter.beam_search).parameters
    assert [n for n in DECODING_FIELDS if params[n].default is not inspect.Parameter.empty] == []
    params = inspect.signature(GraphWriter.greedy).parameters
    assert all(params[n].default is inspect.Parameter.empty for n in DECODING_FIELDS if n in params)


FIXTURE = Path(__file__).resolve().parents[1] / "datasets" / "fixtures" / "agenda_tiny"
WEBNLG = Path(__file__).resolve().parents[1] / "datasets" / "fixtures" / "webnlg_tiny"


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
    model = GraphWriter(
        len(vocab), len(splits.relation_names), hidden=48, num_layers=2, heads=4, dropout=0.0, attention_dropout=0.0
    )
    batch = collate(enc.encode_all(splits.train))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(60):
        opt.zero_grad()
        loss = model.loss(batch)
        loss.backward()
        opt.step()
    model.eval()
    return model, batch, float(loss.detach())


@pytest.mark.slow
def test_memorises_and_greedy_reproduces(data, memorised):
    splits, vocab, enc = data
    model, batch, loss = memorised
    assert loss < 0.05
    hyps = _greedy(model, batch, max_len=40)
    for h, rec in zip(hyps, splits.train):
        assert h[-1] == vocab.eos_id
        assert enc.decode(h, rec, relex=False) == rec.abstract
        assert enc.decode(h, rec) == rec.relexicalised()


@pytest.mark.slow
def test_beam_size_one_equals_greedy(data, memorised):
    splits, vocab, enc = data
    model, batch, _ = memorised
    assert _beam(model, batch, beam=1, max_len=40) == _greedy(model, batch, max_len=40)
    torch.manual_seed(3)
    fresh = GraphWriter(len(vocab), 7, hidden=32, num_layers=1, heads=2).eval()
    b = collate(enc.encode_all(splits.test + splits.dev))
    g = _greedy(fresh, b, max_len=12)
    assert g == _beam(fresh, b, beam=1, max_len=12)
    assert all(len(s) == 12 or s[-1] == vocab.eos_id for s in g)
    assert all(vocab.unk_id not in s and vocab.pad_id not in s for s in g)  # no <unk>
    wide = _beam(fresh, b, beam=4, max_len=12, length_penalty=0.0)
    assert len(wide) == len(g)


def test_wider_beam_reproduces_memorised_records(data, memorised):
    splits, vocab, enc = data
    model, batch, _ = memorised
    for h, rec in zip(_beam(model, batch, beam=4, max_len=40), splits.train):
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
    out = _greedy(model, b, max_len=3)[0]
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


def test_label_smoothing_is_cross_entropys_over_the_outputs_each_record_can_produce(data):
    splits, vocab, enc = data
    torch.manual_seed(0)
    model = GraphWriter(len(vocab), 7, hidden=32, num_layers=1, heads=2).eval()
    full = collate(enc.encode_all(splits.train[:3]))  # every entity slot real
    with torch.no_grad():
        logp = model(full)
        flat, tgt = logp.reshape(-1, logp.size(-1)), full["target_out"].reshape(-1)
        for eps in (
            0.1,
            0.3,
        ):  # torch's smoothing on normalised log-probabilities (log_softmax leaves them as they are)
            want = F.cross_entropy(flat, tgt, ignore_index=model.pad_id, label_smoothing=eps)
            torch.testing.assert_close(model.loss(full, label_smoothing=eps), want)
        torch.testing.assert_close(model.loss(full, label_smoothing=0.0), F.nll_loss(flat, tgt, ignore_index=0))
        # a record with fewer entities than the batch's widest: its padded slot is not an output it can produce
        mixed = collate(enc.encode_all(splits.train[:3] + splits.train[4:5]))  # the 4th has only 2 entities
        logp = model(mixed)
        V, n = len(vocab), int(mixed["target_out"][3].ne(0).sum())
        row = logp[3, :n, : V + 2]  # the 4th record's real tokens over its V + 2 outputs
        nll = -row.gather(1, mixed["target_out"][3, :n, None]).squeeze(1)
        want = (0.9 * nll + 0.1 * -row.mean(1)).sum()
        others = model.loss(collate(enc.encode_all(splits.train[:3])), reduction="sum", label_smoothing=0.1)
        torch.testing.assert_close(model.loss(mixed, reduction="sum", label_smoothing=0.1), others + want)
    with pytest.raises(ValueError, match=r"^label_smoothing: expected a probability in \[0, 1\), got 1.0$"):
        model.loss(full, label_smoothing=1.0)


def test_relation_text_changes_the_relation_node_start_vector():
    splits = load_webnlg_splits(WEBNLG)
    vocab = build_webnlg_vocab(splits.train, min_freq=1)
    enc = WebNLGEncoder(vocab, splits.relation_names)
    torch.manual_seed(0)
    model = GraphWriter(
        len(vocab), 1, hidden=16, num_layers=1, heads=2, decoder_heads=2, dropout=0.0, attention_dropout=0.0
    ).eval()
    batch = collate(enc.encode_all(splits.test))
    g = batch["graph"]
    rel = (g.node_kind == RELATION) | (g.node_kind == INVERSE)
    # the start vectors: relation embedding + BiLSTM(text), the same text read as an entity string would be
    text_vec = model._node_text(g.node_tokens, torch.zeros(g.num_nodes, 16))
    lengths = (g.node_tokens != 0).sum(-1)
    _, direct = model._bilstm(model.entity_lstm, g.node_tokens[rel], lengths[rel])
    assert torch.allclose(text_vec[rel], direct) and torch.equal(text_vec[~rel], torch.zeros_like(text_vec[~rel]))
    # different relation words give different encodings (and so different outputs)
    out = model.encode(batch)["nodes"]
    other = dict(batch)
    g2 = g.clone()
    g2.node_tokens = g.node_tokens.clone()
    g2.node_tokens[rel, 0] = vocab.stoi["runway"]
    other["graph"] = g2
    assert not torch.allclose(model.encode(other)["nodes"], out)


def test_repeated_ngram_bans_by_hand():
    from graph_rma.models.graphwriter import repeated_ngram_bans

    seq = [1, 2, 3, 1, 2]
    assert repeated_ngram_bans(seq, 3) == [3]  # (1, 2) was followed by 3
    assert repeated_ngram_bans(seq, 2) == [3]  # (2,) was followed by 3
    assert repeated_ngram_bans(seq, 1) == [1, 2, 3]  # no id twice
    assert repeated_ngram_bans(seq, 4) == []  # (3, 1, 2) never seen before
    assert repeated_ngram_bans([5, 5, 5], 2) == [5] and repeated_ngram_bans([7], 3) == []
    assert repeated_ngram_bans([4, 9, 4, 8, 4], 2) == [8, 9]


def _has_repeat(seq, n):
    grams = [tuple(seq[i : i + n]) for i in range(len(seq) - n + 1)]
    return len(grams) != len(set(grams))


def test_no_repeat_ngram_blocks_repeats_in_greedy_and_beam_search(data):
    splits, vocab, enc = data
    torch.manual_seed(3)
    fresh = GraphWriter(len(vocab), 7, hidden=32, num_layers=1, heads=2).eval()  # untrained: it loops
    b = collate(enc.encode_all(splits.test + splits.dev))
    plain = _greedy(fresh, b, max_len=30)
    assert any(_has_repeat(s, 2) for s in plain)  # the case the option exists for
    for n in (1, 2, 3):
        for out in (_greedy(fresh, b, max_len=30, no_repeat_ngram=n), _beam(fresh, b, 3, 30, no_repeat_ngram=n)):
            assert len(out) == len(plain) and not any(_has_repeat(s, n) for s in out)
    assert _greedy(fresh, b, max_len=30, no_repeat_ngram=0) == plain  # 0: off, the default
    assert _beam(fresh, b, 1, 30, no_repeat_ngram=2) == _greedy(fresh, b, max_len=30, no_repeat_ngram=2)
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="no_repeat_ngram: expected an integer >= 0"):
            _beam(fresh, b, 2, 5, no_repeat_ngram=bad)


def test_coverage_reward_helpers_by_hand():
    from graph_rma.models.graphwriter import _mark_copied, _reward_uncopied

    inf = float("inf")
    logp = torch.tensor([[-1.0, -2.0, -3.0, -4.0, -inf], [-1.0, -2.0, -3.0, -4.0, -5.0]])  # V = 2, Emax = 3
    copied = torch.tensor([[False, True, False], [False, False, False]])
    _reward_uncopied(logp, copied, 0.5)
    assert logp.tolist() == [[-1.0, -2.0, -2.5, -4.0, -inf], [-1.0, -2.0, -2.5, -3.5, -4.5]]  # padded slot stays -inf
    _mark_copied(copied, torch.tensor([4, 1]), vocab_size=2)  # row 0 copies entity 2; row 1 writes word 1
    assert copied.tolist() == [[False, True, True], [False, False, False]]


def _copies(seq, vocab_size):
    return {t - vocab_size for t in seq if t >= vocab_size}


def test_coverage_reward_makes_outputs_name_their_entities(data):
    splits, vocab, enc = data
    torch.manual_seed(3)
    fresh = GraphWriter(len(vocab), 7, hidden=32, num_layers=1, heads=2).eval()
    recs = splits.test + splits.dev
    b = collate(enc.encode_all(recs))
    real = [set(range(len(r.entities))) for r in recs]
    plain = _greedy(fresh, b, max_len=30)
    assert any(_copies(s, len(vocab)) != e for s, e in zip(plain, real))  # the case the option exists for
    # a reward above any log-probability gap: greedy copies every entity first, each once
    for s, e in zip(_greedy(fresh, b, max_len=30, coverage_reward=1e3), real):
        assert set(t - len(vocab) for t in s[: len(e)]) == e
    for s, e in zip(_beam(fresh, b, 3, 30, coverage_reward=1e3), real):
        assert _copies(s, len(vocab)) == e
    assert _greedy(fresh, b, max_len=30, coverage_reward=0.0) == plain  # 0: off, the default
    assert _beam(fresh, b, 1, 30, coverage_reward=0.7) == _greedy(fresh, b, max_len=30, coverage_reward=0.7)
    for bad in (-0.1, float("nan"), float("inf"), True, "1"):
        with pytest.raises(ValueError, match="coverage_reward: expected a finite number >= 0"):
            _beam(fresh, b, 2, 5, coverage_reward=bad)
