"""graph_rma.data.webnlg: parsing (fixture and real release), graph construction, copy placeholders, scoring, and the
graph-to-text records and encoder (one record per reference, relation words on relation nodes)."""

import math
import os
from pathlib import Path

import pytest
from conftest import needs_punkt as needs_nltk_data

from graph_rma.data.graph_text import ENTITY, GLOBAL, INVERSE, RELATION
from graph_rma.data.root import DataNotFoundError
from graph_rma.data.webnlg import (
    MAX_RELATION_TOKENS,
    WebNLGEncoder,
    WebNLGFormatError,
    build_graph,
    build_webnlg_vocab,
    delexicalise,
    entity_text,
    load_webnlg,
    load_webnlg_splits,
    read_xml,
    relation_text,
    relexicalise,
)

FIXTURE = Path(__file__).resolve().parents[1] / "datasets" / "fixtures" / "webnlg_tiny"
DATA = os.environ.get("GRAPH_RMA_DATA", "")
REAL = Path(DATA, "webnlg") if DATA else None


def test_text_normalisation():
    assert entity_text("Alan_Bean") == "Alan Bean"
    assert entity_text('"100305.0"(minutes)') == "100305.0 (minutes)"
    assert entity_text('"UT Austin, B.S. 1955"') == "UT Austin, B.S. 1955"
    assert entity_text('"Squeezed" or "smashed" fried chicken') == "Squeezed or smashed fried chicken"
    assert relation_text("timeInSpace") == "time in space"
    assert relation_text("ICAO_Location_Identifier") == "icao location identifier"
    assert relation_text("was selected by NASA") == "was selected by nasa"


def test_parse_fixture_by_hand():
    train = load_webnlg("train", root=FIXTURE)
    assert [(e.category, e.eid, e.size) for e in train] == [
        ("Astronaut", "Id1", 1),
        ("Astronaut", "Id2", 1),
        ("Airport", "Id1", 2),
    ]
    assert sum(len(e.references) for e in train) == 6
    assert train[0].references == ["Ada Quill was selected by NASA in 1971.", "In 1971, NASA selected Ada Quill."]
    assert train[1].entities == ["Ada Quill", "5000.0 (minutes)"]
    air = train[2]
    assert air.triples == [
        ("Lindholm_Airport", "cityServed", '"Lindholm, Norway"'),
        ("Lindholm_Airport", "runwayLength", "2000.0"),
    ]
    assert air.entities == ["Lindholm Airport", "Lindholm, Norway", "2000.0"]
    assert air.relations == ["city served", "runway length"]
    assert air.triple_index == [(0, 0, 1), (0, 1, 2)]
    assert all(e.seen for e in train) and len(load_webnlg("dev", root=FIXTURE)) == 1
    test = load_webnlg("test", root=FIXTURE)
    t0, t1 = test
    assert t0.entities == ["Lindholm Airport", "Lindholm", "Norway", "12"]  # Lindholm is object, then subject
    assert t0.relations == ["city served", "country", "elevation above the sea level (in metres)"]
    assert t0.triple_index == [(0, 0, 1), (1, 1, 2), (0, 2, 3)]
    assert (t0.seen, t1.seen) == (True, False)  # Athlete is an unseen category
    assert [e.eid for e in load_webnlg("test", root=FIXTURE, seen=False)] == ["Id2"]
    assert [e.eid for e in load_webnlg("test", root=FIXTURE, seen=True)] == ["Id1"]


@pytest.mark.slow
@pytest.mark.skipif(REAL is None or not REAL.is_dir(), reason="needs $GRAPH_RMA_DATA/webnlg (the real release)")
def test_counts_on_real_release():
    splits = {s: load_webnlg(s) for s in ("train", "dev", "test")}
    got = {s: (len(v), sum(len(e.references) for e in v)) for s, v in splits.items()}
    assert got == {"train": (6940, 18102), "dev": (872, 2268), "test": (1862, 4928)}
    test = splits["test"]
    assert sum(e.seen for e in test) == 971 and sum(not e.seen for e in test) == 891
    assert sum(len(e.references) for e in test if e.seen) == 2495
    train_rel = {p for e in splits["train"] for _, p, _ in e.triples}
    all_rel = {p for v in splits.values() for e in v for _, p, _ in e.triples}
    assert len(all_rel) == 354 and len(train_rel) == 246
    assert len({p for e in test for _, p, _ in e.triples} - train_rel) == 108
    assert max(e.size for e in splits["train"]) == 7
    assert all(e.references for v in splits.values() for e in v)
    for e in splits["dev"]:  # every graph builds and has the GraphWriter node count
        g = e.graph()
        assert g.num_nodes == len(e.entities) + 1 + 2 * e.size == len(g.node_text)


def test_graph_construction_by_hand():
    t0 = load_webnlg("test", root=FIXTURE)[0]
    g = t0.graph()
    # 4 entities (0-3), global node 4, triple k -> relation node 5+2k and inverse node 6+2k
    assert g.num_nodes == 11 and g.num_entities == 4
    assert g.node_text == [
        "Lindholm Airport",
        "Lindholm",
        "Norway",
        "12",
        "<global>",
        "city served",
        "city served",
        "country",
        "country",
        "elevation above the sea level (in metres)",
        "elevation above the sea level (in metres)",
    ]
    assert g.node_kind.tolist() == [ENTITY] * 4 + [GLOBAL] + [RELATION, INVERSE] * 3
    want = (
        [(0, 4), (4, 0), (1, 4), (4, 1), (2, 4), (4, 2), (3, 4), (4, 3)]  # global <-> entities
        + [(0, 5), (5, 1), (1, 6), (6, 0)]  # Lindholm_Airport -cityServed-> Lindholm, and the inverse
        + [(1, 7), (7, 2), (2, 8), (8, 1)]  # Lindholm -country-> Norway
        + [(0, 9), (9, 3), (3, 10), (10, 0)]  # Lindholm_Airport -elevation-> 12
        + [(i, i) for i in range(11)]
    )
    assert [tuple(e) for e in g.edge_index.t().tolist()] == want
    # messages flow source -> target (PyG): Norway hears from country's relation node, itself and the global node
    into_norway = sorted(g.edge_index[0, g.edge_index[1] == 2].tolist())
    assert into_norway == [2, 4, 7]


def test_build_graph_rejects_bad_indices():
    with pytest.raises(ValueError, match="entities"):
        build_graph([], ["r"], [])
    with pytest.raises(ValueError, match="triples"):
        build_graph(["a", "b"], ["r"], [(0, 0, 2)])
    with pytest.raises(ValueError, match="triples"):
        build_graph(["a", "b"], ["r"], [(0, 1, 1)])


def test_malformed_xml_names_the_file(tmp_path):
    bad = tmp_path / "broken.xml"
    bad.write_text(
        "<benchmark><entries><entry category='A' eid='Id1' size='1'>\n<mtriple>a | b | c</entries>", encoding="utf-8"
    )
    with pytest.raises(WebNLGFormatError, match=r"broken\.xml: malformed XML at line 2"):
        read_xml(bad)
    bad.write_text(
        "<benchmark><entries><entry category='A' eid='Id7' size='1'><modifiedtripleset>"
        "<mtriple>a | b</mtriple></modifiedtripleset></entry></entries></benchmark>",
        encoding="utf-8",
    )
    with pytest.raises(WebNLGFormatError, match=r"broken\.xml: entry eid='Id7'.*subject \| property \| object"):
        read_xml(bad)
    bad.write_text(
        "<benchmark><entries><entry category='A' eid='Id8' size='2'><modifiedtripleset>"
        "<mtriple>a | b | c</mtriple></modifiedtripleset></entry></entries></benchmark>",
        encoding="utf-8",
    )
    with pytest.raises(WebNLGFormatError, match="size=2 but 1 triples"):
        read_xml(bad)


def test_missing_data_and_bad_split(tmp_path):
    with pytest.raises(DataNotFoundError, match="webnlg"):
        load_webnlg("test", root=tmp_path)
    with pytest.raises(ValueError, match="split"):
        load_webnlg("validation", root=FIXTURE)


@needs_nltk_data
def test_delexicalise_relexicalise_by_hand():
    t0 = load_webnlg("test", root=FIXTURE)[0]
    toks, found = delexicalise(t0.references[1], t0.entities)
    # "Lindholm, Norway is served by Lindholm Airport, which lies 12 metres above sea level."
    # the longer "lindholm airport" wins where it matches; a lone "lindholm" is entity 1
    assert toks == [
        "<ent_1>",
        ",",
        "<ent_2>",
        "is",
        "served",
        "by",
        "<ent_0>",
        ",",
        "which",
        "lies",
        "<ent_3>",
        "metres",
        "above",
        "sea",
        "level",
        ".",
    ]
    assert found == [True, True, True, True]
    assert relexicalise(toks, t0.entities) == [
        "lindholm",
        ",",
        "norway",
        "is",
        "served",
        "by",
        "lindholm",
        "airport",
        ",",
        "which",
        "lies",
        "12",
        "metres",
        "above",
        "sea",
        "level",
        ".",
    ]
    # an entity worded differently in the text is not found and stays as words
    toks, found = delexicalise("Ada spent 5000.0 minutes in space.", ["Ada Quill", "5000.0 (minutes)"])
    assert found == [False, False] and "<ent_0>" not in toks
    with pytest.raises(ValueError, match="placeholder"):
        relexicalise(["<ent_5>"], ["a"])


@needs_nltk_data
def test_multi_reference_scoring_by_hand():
    pytest.importorskip("pycocoevalcap")
    from graph_rma.metrics import evaluate_generation

    test = load_webnlg("test", root=FIXTURE)
    hyps = ["Lindholm Airport serves Lindholm in Norway.", "Bo Rask plays for Lindholm FC."]
    refs = [e.references for e in test]
    r = evaluate_generation(hyps, refs, entities=[e.entities for e in test], meteor="none")
    # Tokens: hyp 1 has 7 (with "."), all in reference 1 (14 tokens); hyp 2 has 7, all in reference 1 of entry 2
    # (12 tokens) while reference 2 (10 tokens) is closer in length. Corpus: c = 14, r = 14 + 10, p1 = 14/14.
    bp = math.exp(1 - 24 / 14)
    assert r["BLEU-1"] == pytest.approx(100 * bp, rel=1e-6)
    # bigrams: hyp 1 misses only "norway ." (the references continue "norway and" / "norway is"), hyp 2 only
    # "rask plays" -> p2 = 10/12
    assert r["BLEU-2"] == pytest.approx(100 * bp * math.sqrt(10 / 12), rel=1e-6)
    # with only the first reference of each entry the closest lengths are 14 and 12
    r1 = evaluate_generation(hyps, [e.references[0] for e in test], meteor="none")
    assert r1["BLEU-1"] == pytest.approx(100 * math.exp(1 - 26 / 14), rel=1e-6)
    # ROUGE-1 (punctuation dropped): best F per entry is 2*6/(6+13) and 2*6/(6+9); the other references give less
    assert r["ROUGE-1"] == pytest.approx(100 * (12 / 19 + 12 / 15) / 2)
    # entities: 3 of 4 (not "12") and 2 of 3 (not "1990")
    assert r["entity_coverage"] == pytest.approx(100 * 5 / 7)
    assert r["repetition"] == 0.0


@pytest.fixture(scope="module")
def splits():
    return load_webnlg_splits(FIXTURE)


def test_records_one_per_reference_and_one_per_test_entry(splits):
    assert [len(splits.train), len(splits.dev), len(splits.test)] == [6, 1, 2]
    assert splits.relation_names == ["<rel>"]
    entries = load_webnlg("test", FIXTURE)
    for rec, e in zip(splits.test, entries):
        assert rec.references == e.references and rec.seen == e.seen and rec.eid == e.eid
    assert [r.seen for r in splits.test] == [True, False]
    airport = splits.train[3]
    assert airport.entities == ["lindholm airport", "lindholm , norway", "2000.0"]
    assert airport.relations == ["city served", "runway length"]
    assert airport.triples == [(0, 0, 1), (0, 0, 2)]
    assert airport.text == "<ent_0> serves <ent_1> and has a runway length of <ent_2> ."
    assert airport.relexicalised() == "lindholm airport serves lindholm , norway and has a runway length of 2000.0 ."
    assert len(load_webnlg_splits(FIXTURE, max_train=1).train) == 2  # entries, with all their references


def test_encoder_puts_relation_words_on_relation_nodes(splits):
    vocab = build_webnlg_vocab(splits.train, min_freq=1)
    assert "<ent>" in vocab and "served" in vocab and "runway" in vocab
    item = WebNLGEncoder(vocab, splits.relation_names).encode(splits.test[0])
    g = item.graph
    assert g.node_tokens.shape == (g.num_nodes, MAX_RELATION_TOKENS)
    rel = (g.node_kind == RELATION) | (g.node_kind == INVERSE)
    assert int((g.node_tokens[~rel] != 0).sum()) == 0  # entities and the global node carry no text
    n = 4  # lindholm airport, lindholm, norway, 12
    expect = vocab.encode(["city", "served"]) + [0] * (MAX_RELATION_TOKENS - 2)
    assert g.node_tokens[n + 1].tolist() == expect and g.node_tokens[n + 2].tolist() == expect
    assert int(g.node_kind[n]) == GLOBAL
    # "country" never occurs in the fixture's training text: an unknown word, still a non-empty text row
    assert g.node_tokens[n + 3].tolist()[0] == vocab.unk_id
    # the entity type tag fed back after a copy is "<ent>"
    assert item.type_ids == [vocab.stoi["<ent>"]] * 4
