"""graph_rma.data.agenda: the readers, protocols, AGENDA's vocabulary and encoding on the tiny fixture."""

import json
import shutil
from pathlib import Path

import pytest

from graph_rma.data import DataNotFoundError
from graph_rma.data.agenda import (
    AgendaEncoder,
    AgendaFormatError,
    build_vocab,
    collate,
    load_agenda,
    read_json,
    read_relations,
    read_tsv,
    relexicalise,
)
from graph_rma.data.graph_text import ENTITY, Vocab

FIXTURE = Path(__file__).resolve().parents[1] / "datasets" / "fixtures" / "agenda_tiny"
RELATIONS = ["USED-FOR", "CONJUNCTION", "FEATURE-OF", "PART-OF", "COMPARE", "EVALUATE-FOR", "HYPONYM-OF"]


def test_read_fixture():
    assert read_relations(FIXTURE / "relations.vocab") == RELATIONS
    recs = read_tsv(FIXTURE / "preprocessed.train.tsv", num_relations=7)
    assert len(recs) == 6
    r = recs[0]
    assert r.title == "Fast Parsing with Graph Networks ."
    assert r.entities == ["graph network", "dependency parsing", "accuracy"]
    assert r.types == ["<method>", "<task>", "<metric>"]
    assert r.triples == [(0, 0, 1), (2, 5, 0)]
    assert r.relexicalised() == (
        "we use a graph network for dependency parsing . the graph network improves accuracy ."
    )
    assert str(FIXTURE / "preprocessed.train.tsv") + ":1" == r.source


def _write_bad(tmp_path, lines):
    p = tmp_path / "bad.tsv"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


def test_malformed_records_name_file_and_line(tmp_path):
    good = (FIXTURE / "preprocessed.train.tsv").read_text(encoding="utf-8").split("\n")[:2]
    p = _write_bad(tmp_path, good + ["only\tthree\tfields"])
    with pytest.raises(AgendaFormatError, match=r"bad\.tsv:3: expected 6 tab-separated fields"):
        read_tsv(p)
    fields = good[0].split("\t")
    cases = [
        (fields[:3] + ["0 0 7"] + fields[4:], "entity outside"),
        (fields[:3] + ["0 9 1"] + fields[4:], "relation outside"),
        (fields[:3] + ["0 x 1"] + fields[4:], "not 'head relation tail'"),
        (fields[:2] + ["<method> <task>"] + fields[3:], "3 entities but 2 type tags"),
        (fields[:4] + ["we use <method_5> ."] + fields[5:], "placeholder <method_5>"),
        (fields[:4] + ["we use <task_0> ."] + fields[5:], "entity 0 has type <method>"),
    ]
    for bad, msg in cases:
        p = _write_bad(tmp_path, [good[1], "\t".join(bad)])
        with pytest.raises(AgendaFormatError, match=r"bad\.tsv:2: .*" + msg.replace("<", "<")):
            read_tsv(p, num_relations=7)
    assert issubclass(AgendaFormatError, ValueError)


def test_invalid_utf8_names_file_and_physical_line(tmp_path):
    good = (FIXTURE / "preprocessed.train.tsv").read_bytes().split(b"\n")[:2]
    title, rest = good[0].split(b"\t", 1)
    # Line 1 holds a lone carriage return (text-mode reading would count it as a line break), line 3 a cp1252 byte.
    lines = [title[:3] + b"\r" + title[3:] + b"\t" + rest, good[1], good[0].replace(b" ", b" caf\xe9 ", 1)]
    p = tmp_path / "bad.tsv"
    p.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(AgendaFormatError, match=rf"^{p}:3: invalid UTF-8 \(byte 0xe9 at byte \d+ of the line\)"):
        read_tsv(p)
    p.write_bytes(b"\n".join(lines[:2]) + b"\r\n")  # valid once the bad line is gone; CRLF endings are fine
    recs = read_tsv(p)
    assert len(recs) == 2 and "\r" in recs[0].title and recs[1].source == f"{p}:2"


def test_read_json_unprocessed_form(tmp_path):
    data = [
        {
            "title": "Graph Networks for Parsing",
            "entities": ["Graph Network", "dependency parsing"],
            "types": "<method> <task>",
            "relations": ["graph network -- USED-FOR -- dependency parsing"],
            "abstract_og": "We use a graph network for dependency parsing.",
        },
        {"title": "T", "entities": ["x"], "types": "<method>", "relations": [], "abstract": "we use <method_0> ."},
    ]
    p = tmp_path / "unprocessed.val.json"
    p.write_text(json.dumps(data), encoding="utf-8")
    recs = read_json(p, RELATIONS)
    assert recs[0].entities == ["graph network", "dependency parsing"]
    assert recs[0].triples == [(0, 0, 1)]
    assert recs[0].abstract == "we use a <method_0> for <task_1> ."
    assert recs[1].abstract == "we use <method_0> ."
    data[0]["relations"] = ["graph network -- LOVES -- dependency parsing"]
    p.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(AgendaFormatError, match=r"unprocessed\.val\.json:record 0"):
        read_json(p, RELATIONS)


def test_protocols(tmp_path):
    s = load_agenda(FIXTURE)
    assert s.protocol == "official" and (len(s.train), len(s.dev), len(s.test)) == (6, 2, 2)
    off = tmp_path / "agenda"
    off.mkdir()
    for name in ("relations.vocab", "preprocessed.val.tsv", "preprocessed.test.tsv"):
        shutil.copy(FIXTURE / name, off / name)
    shutil.copy(FIXTURE / "preprocessed.train.tsv", off / "fake.train.tsv")
    s = load_agenda(off, dev_size=1)
    assert s.protocol == "offline" and "not comparable" in s.description
    # train = the 6-record sample + 1 of the 2 val records; dev = the other; test untouched
    assert (len(s.train), len(s.dev), len(s.test)) == (7, 1, 2)
    val_titles = {r.title for r in read_tsv(off / "preprocessed.val.tsv")}
    assert {s.train[-1].title, s.dev[0].title} == val_titles
    assert [r.title for r in s.test] == [r.title for r in read_tsv(off / "preprocessed.test.tsv")]
    with pytest.raises(DataNotFoundError, match="preprocessed.train.tsv"):
        load_agenda(off, protocol="official")
    with pytest.raises(DataNotFoundError):
        load_agenda(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="protocol"):
        load_agenda(FIXTURE, protocol="mine")


def test_env_root(monkeypatch, tmp_path):
    (tmp_path / "agenda").symlink_to(FIXTURE)
    monkeypatch.setenv("GRAPH_RMA_DATA", str(tmp_path))
    assert len(load_agenda().train) == 6


def test_encoder_and_collate():
    s = load_agenda(FIXTURE)
    vocab = build_vocab(s.train, min_freq=1)
    assert vocab.itos[:4] == list(Vocab.SPECIALS) and "<method>" in vocab and "<method_0>" not in vocab
    enc = AgendaEncoder(vocab, s.relation_names)
    rec = s.train[4]  # "<method_0> are used for <task_1> ."
    item = enc.encode(rec)
    V = len(vocab)
    assert item.target_out == [
        V + 0,
        vocab.stoi["are"],
        vocab.stoi["used"],
        vocab.stoi["for"],
        V + 1,
        vocab.stoi["."],
        vocab.eos_id,
    ]
    assert item.target_in == [
        vocab.bos_id,
        vocab.stoi["<method>"],
        vocab.stoi["are"],
        vocab.stoi["used"],
        vocab.stoi["for"],
        vocab.stoi["<task>"],
        vocab.stoi["."],
    ]
    assert enc.decode(item.target_out, rec) == "deep networks are used for speech recognition ."
    assert enc.decode(item.target_out, rec, relex=False) == rec.abstract
    cut = AgendaEncoder(vocab, s.relation_names, max_target_len=3).encode(rec)
    assert len(cut.target_in) == len(cut.target_out) == 3 and vocab.eos_id not in cut.target_out
    items = enc.encode_all(s.train[:3])
    b = collate(items)
    assert b["graph"].num_graphs == 3
    assert (
        b["entity_tokens"].size(0)
        == sum(len(r.entities) for r in s.train[:3])
        == int((b["graph"].node_kind == ENTITY).sum())
    )
    assert b["num_entities"].tolist() == [3, 3, 3]
    assert b["target_in"].shape == b["target_out"].shape
    assert relexicalise(["<task_1>", "x", "<task_9>"], ["a", "b c"]) == "b c x <task_9>"
