"""graph_rma.data.graph_text: GraphWriter's graph by hand, the generic record, vocabulary, encoder and batching."""

import pytest
import torch

from graph_rma.data.graph_text import (
    ENTITY,
    GLOBAL,
    INVERSE,
    RELATION,
    GraphTextEncoder,
    GraphTextRecord,
    GraphTextSplits,
    Vocab,
    build_graphwriter_graph,
    build_vocab,
    collate,
    relexicalise,
)

RELATIONS = ["USED-FOR", "CONJUNCTION", "FEATURE-OF", "PART-OF", "COMPARE", "EVALUATE-FOR", "HYPONYM-OF"]


def test_graph_construction_by_hand():
    # entities 0,1,2; triples (0 USED-FOR 1), (2 EVALUATE-FOR 0)
    g = build_graphwriter_graph(["a", "b", "c"], [(0, 0, 1), (2, 5, 0)], RELATIONS)
    # nodes: 0,1,2 entities; 3 global; 4 USED-FOR, 5 USED-FOR^-1; 6 EVALUATE-FOR, 7 EVALUATE-FOR^-1
    assert g.num_nodes == 8
    assert g.node_kind.tolist() == [ENTITY] * 3 + [GLOBAL, RELATION, INVERSE, RELATION, INVERSE]
    assert g.node_label.tolist() == [0, 1, 2, 14, 0, 7, 5, 12]
    edges = set(map(tuple, g.edge_index.t().tolist()))
    expected = {(0, 3), (3, 0), (1, 3), (3, 1), (2, 3), (3, 2)}  # global <-> every entity
    expected |= {(0, 4), (4, 1), (1, 5), (5, 0)}  # a -> r -> b, b -> r_inv -> a
    expected |= {(2, 6), (6, 0), (0, 7), (7, 2)}
    expected |= {(i, i) for i in range(8)}  # self-loops
    assert edges == expected
    assert g.edge_index.size(1) == len(expected)  # no duplicates


def test_graph_builder_rejects_bad_triples():
    with pytest.raises(ValueError, match="entity"):
        build_graphwriter_graph(["a"], [(0, 0, 3)], RELATIONS)
    with pytest.raises(ValueError, match="relation"):
        build_graphwriter_graph(["a", "b"], [(0, 9, 1)], RELATIONS)
    with pytest.raises(ValueError, match="entities"):
        build_graphwriter_graph([], [], RELATIONS)


def test_same_graph_as_the_webnlg_builder():
    from graph_rma.data.webnlg import build_graph

    ents, triples = ["a", "b", "c", "d"], [(0, 2, 1), (3, 0, 0), (1, 6, 2)]
    mine = build_graphwriter_graph(ents, triples, RELATIONS)
    theirs = build_graph(ents, RELATIONS, triples)
    assert torch.equal(mine.edge_index, theirs.edge_index)
    assert torch.equal(mine.node_kind, theirs.node_kind)


def test_generic_record_vocab_encoder_and_collate_by_hand():
    # two entities of type <x>; relation texts enter the vocabulary; placeholders do not
    rec = GraphTextRecord(
        title="",
        entities=["red fox", "dog"],
        types=["<x>", "<x>"],
        triples=[(0, 0, 1)],
        text="the <x_0> jumps over the <x_1> .",
        relations=["jumps over"],
    )
    vocab = build_vocab([rec], min_freq=1, extra=("<x>",))
    assert vocab.itos[:5] == list(Vocab.SPECIALS) + ["<x>"]
    # counts: the 2, jumps 2, over 2 (relation text and target), . 1, dog 1, fox 1, red 1; ties alphabetical
    assert vocab.itos[5:] == ["jumps", "over", "the", ".", "dog", "fox", "red"]
    assert "<x_0>" not in vocab
    enc = GraphTextEncoder(vocab, ["r"])
    item = enc.encode(rec)
    V, s = len(vocab), vocab.stoi
    assert item.target_out == [s["the"], V + 0, s["jumps"], s["over"], s["the"], V + 1, s["."], vocab.eos_id]
    assert item.target_in == [vocab.bos_id, s["the"], s["<x>"], s["jumps"], s["over"], s["the"], s["<x>"], s["."]]
    assert item.entity_ids == [[s["red"], s["fox"]], [s["dog"]]] and item.type_ids == [s["<x>"], s["<x>"]]
    assert item.title_ids == [vocab.unk_id]  # an empty title is one <unk>
    assert enc.decode(item.target_out, rec, relex=False) == rec.text
    assert enc.decode(item.target_out, rec) == rec.relexicalised() == "the red fox jumps over the dog ."
    assert relexicalise(["<x_1>", "<x_7>"], rec.entities) == "dog <x_7>"
    cut = GraphTextEncoder(vocab, ["r"], max_target_len=2).encode(rec)
    assert cut.target_out == [s["the"], V + 0] and cut.target_in == [vocab.bos_id, s["the"]]
    b = collate([item, cut])
    assert b["target_out"].tolist() == [item.target_out, cut.target_out + [0] * 6]
    assert b["entity_tokens"].tolist() == [[s["red"], s["fox"]], [s["dog"], 0]] * 2
    assert b["num_entities"].tolist() == [2, 2] and b["graph"].num_graphs == 2
    with pytest.raises(ValueError, match="items"):
        collate([])


def test_splits_names():
    s = GraphTextSplits(train=[1], dev=[2], test=[3], relation_names=["r"], protocol="p")
    assert s.split("val") == s.split("dev") == [2] and s.split("test") == [3]
    with pytest.raises(ValueError, match="split"):
        s.split("holdout")
