"""graph_rma.metrics: hand-computed values, equality with the reference libraries called directly, METEOR 1.5."""

import json
import math

import pytest

pytest.importorskip("pycocoevalcap", reason="pycocoevalcap (extra 'text-metrics') is not installed")
pytest.importorskip("rouge_score", reason="rouge-score (extra 'text-metrics') is not installed")

import nltk  # noqa: E402
from conftest import data_path, needs_java  # noqa: E402
from conftest import needs_wordnet as needs_nltk_data
from pycocoevalcap.bleu.bleu import Bleu  # noqa: E402
from pycocoevalcap.rouge.rouge import Rouge  # noqa: E402
from rouge_score.rouge_scorer import RougeScorer  # noqa: E402

from graph_rma.cli import score as score_cli  # noqa: E402
from graph_rma.metrics import (  # noqa: E402
    Meteor15,
    clauses,
    entity_coverage,
    evaluate_generation,
    repetition,
    tokenize,
)

HYPS = [
    "Alan Bean was selected by NASA in 1963. Alan Bean was selected by NASA in 1963.",
    "The cat sat on the mat.",
    "Aarhus Airport serves the city of Aarhus, Denmark.",
]
REFS = [
    ["Alan Bean was chosen by NASA in 1963.", "NASA selected Alan Bean in 1963."],
    ["A cat sat on the mat."],
    [
        "The city of Aarhus, Denmark is served by Aarhus Airport.",
        "Aarhus airport serves Aarhus in Denmark.",
        "Aarhus, Denmark, has an airport called Aarhus Airport.",
    ],
]


# --------------------------------------------------------------------------------------------- hand-computed
def test_bleu1_and_rouge1_by_hand():
    # hyp "the the cat" vs ref "the cat sat on": clipped unigram matches the:1 + cat:1 = 2 of 3,
    # brevity penalty exp(1 - 4/3); ROUGE-1 P = 2/3, R = 2/4, F = 4/7.
    r = evaluate_generation(["the the cat"], ["the cat sat on"], meteor="none", tokenize="split")
    assert r["BLEU-1"] == pytest.approx(100 * (2 / 3) * math.exp(1 - 4 / 3), rel=1e-6)
    assert r["ROUGE-1"] == pytest.approx(100 * 4 / 7, rel=1e-9)
    # no bigram of "the cat" appears twice: ROUGE-2 P = 1/2 ("the the" misses), R = 1/3 -> F = 0.4
    assert r["ROUGE-2"] == pytest.approx(40.0, rel=1e-9)
    assert r["METEOR"] is None and r["METEOR_impl"] is None and r["entity_coverage"] is None


def test_multi_reference_by_hand():
    # hyp "a b c d": ref1 has a b, ref2 has c d. BLEU clips each n-gram by its max count over the references,
    # so all 4 unigrams match (BLEU-1 = 100, closest ref length 4 -> no brevity penalty); with one reference only 2/4.
    hyp, refs = ["a b c d"], [["a b x y", "z w c d"]]
    multi = evaluate_generation(hyp, refs, meteor="none", tokenize="split")
    single = evaluate_generation(hyp, [refs[0][0]], meteor="none", tokenize="split")
    assert multi["BLEU-1"] == pytest.approx(100.0, rel=1e-6)
    assert single["BLEU-1"] == pytest.approx(50.0, rel=1e-6)
    # BLEU-2: bigrams "a b", "c d" match of 3 -> p2 = 2/3; BLEU-2 = sqrt(1 * 2/3)
    assert multi["BLEU-2"] == pytest.approx(100 * math.sqrt(2 / 3), rel=1e-6)
    # ROUGE takes the best reference per hypothesis: both give P = R = 1/2
    assert multi["ROUGE-1"] == pytest.approx(50.0)
    # the best of several references is taken, not the mean: an exact reference gives 100
    r = evaluate_generation(["x y z", "a b"], [["p q r", "x y z"], ["a c"]], meteor="none", tokenize="split")
    # hyp 2 vs "a c": P = R = 1/2 -> F = 1/2; mean over hypotheses (1 + 0.5) / 2
    assert r["ROUGE-1"] == pytest.approx(75.0)
    assert r["ROUGE-L"] == pytest.approx(75.0)


def test_entity_coverage_by_hand():
    hyps = [tokenize(h, "split") for h in ["alan bean flew to the moon .", "nasa picked him , nasa did"]]
    ents = [
        [tokenize(e, "split") for e in es]
        for es in [["Alan Bean", "Moon", "Apollo 12", "Bean Alan"], ["NASA", "nasa", ""]]
    ]
    # example 1: "alan bean" yes, "moon" yes, "apollo 12" no, "bean alan" no (order matters) -> 2 of 4;
    # example 2: NASA counted once (duplicate), empty ignored -> 1 of 1; micro average 3 / 5.
    assert entity_coverage(hyps, ents) == pytest.approx(60.0)
    assert math.isnan(entity_coverage(hyps, [[], []]))
    r = evaluate_generation(
        ["Alan Bean flew to the Moon.", "NASA picked him"],
        ["x", "y"],
        meteor="none",
        entities=[["Alan Bean", "Moon", "Apollo 12", "Bean Alan"], ["NASA", "nasa"]],
        tokenize="split",
    )
    # with whitespace tokens "moon." is not "moon": 1 of 4 plus 1 of 1
    assert r["entity_coverage"] == pytest.approx(40.0)


def test_repetition_by_hand():
    assert clauses(["a", "b", ".", "c", ",", ",", "a", "b", "."]) == [("a", "b"), ("c",), ("a", "b")]
    # "a b . c , a b ." -> 1 repeated of 3; "x y" -> 0 of 1; "" -> no clauses; corpus 1 / 4
    hyps = [["a", "b", ".", "c", ",", "a", "b", "."], ["x", "y"], []]
    assert repetition(hyps) == pytest.approx(25.0)
    assert repetition([["a", "b", "a", "b"]]) == 0.0  # repeated words inside one clause are not clauses
    assert repetition([[]]) == 0.0


# --------------------------------------------------------------------------------------------- reference libraries
@pytest.mark.slow
@needs_nltk_data
def test_matches_reference_libraries_directly():
    r = evaluate_generation(HYPS, REFS, meteor="nltk")
    # independent tokenisation: nltk.word_tokenize, lower-cased
    nltk.data.path.insert(0, str(data_path("nltk_data")))
    tok = lambda s: [t.lower() for t in nltk.word_tokenize(s)]  # noqa: E731
    hyp_s = [" ".join(tok(h)) for h in HYPS]
    ref_s = [[" ".join(tok(x)) for x in rs] for rs in REFS]
    gts = dict(enumerate(ref_s))
    res = {i: [h] for i, h in enumerate(hyp_s)}
    bleu, _ = Bleu(4).compute_score(gts, res, verbose=0)
    for n in range(4):
        assert r[f"BLEU-{n + 1}"] == pytest.approx(100 * bleu[n], rel=1e-12)
    scorer = RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=False)
    for key, rt in [("ROUGE-1", "rouge1"), ("ROUGE-2", "rouge2"), ("ROUGE-L", "rougeL")]:
        want = sum(max(scorer.score(x, h)[rt].fmeasure for x in rs) for h, rs in zip(hyp_s, ref_s)) / len(HYPS)
        assert r[key] == pytest.approx(100 * want, rel=1e-12)
    assert r["ROUGE-L_coco"] == pytest.approx(100 * Rouge().compute_score(gts, res)[0], rel=1e-12)
    from nltk.translate.meteor_score import meteor_score

    want = sum(meteor_score([x.split() for x in rs], h.split()) for h, rs in zip(hyp_s, ref_s)) / len(HYPS)
    assert r["METEOR"] == pytest.approx(100 * want, rel=1e-12) and r["METEOR_impl"] == "nltk"
    # sanity on the hand-made cases: exact 2nd sentence up to "the"/"a"; the repeated clause of hyp 1 is seen
    assert 0 < r["BLEU-4"] < r["BLEU-1"] < 100
    assert r["repetition"] == pytest.approx(100 * 1 / 5)  # clauses 2 + 1 + 2 ("..., denmark ."), 1 repeated


@pytest.mark.slow
@needs_nltk_data
def test_nltk_meteor_known_values_and_tokenizer():
    # the values documented for the shipped WordNet (shared/data/README.md)
    r = evaluate_generation(["a cat sat"], ["a cat sat"], meteor="nltk", tokenize="split")
    assert r["METEOR"] == pytest.approx(100 * 0.9814814814814815)
    r = evaluate_generation(["the kitty sat on the rug"], ["the cat sat on the mat"], meteor="nltk", tokenize="split")
    assert r["METEOR"] == pytest.approx(62.5)  # WordNet synonyms (kitty ~ cat, rug ~ mat) are matched
    assert tokenize('He said "no." U.S. Army\'s 1963. Done') == [
        "he",
        "said",
        "``",
        "no",
        ".",
        "''",
        "u.s.",
        "army",
        "'s",
        "1963",
        ".",
        "done",
    ]


def test_meteor_nltk_missing_wordnet_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])
    monkeypatch.setenv("GRAPH_RMA_DATA", str(tmp_path))
    with pytest.raises(LookupError, match="wordnet"):
        evaluate_generation(["a b"], ["a b"], meteor="nltk", tokenize="split")


@needs_nltk_data
def test_auto_falls_back_to_nltk_without_java(monkeypatch):
    import graph_rma.metrics.generation as gen

    monkeypatch.setattr(gen.shutil, "which", lambda name: None)
    with pytest.warns(RuntimeWarning, match="NOT comparable"):
        r = evaluate_generation(["a cat sat"], ["a cat sat"], meteor="auto", tokenize="split")
    assert r["METEOR_impl"] == "nltk"
    with pytest.raises(RuntimeError, match="Java"):
        Meteor15()


@pytest.mark.slow
@needs_java
@needs_nltk_data
def test_meteor15_matches_pycocoevalcap_and_shuts_down():
    with Meteor15() as m:
        r = evaluate_generation(HYPS, REFS, meteor=m)
        assert r["METEOR_impl"] == "meteor-1.5"
        # pycocoevalcap's own protocol on the same JVM, fed independently tokenised text
        nltk.data.path.insert(0, str(data_path("nltk_data")))
        tok = lambda s: " ".join(t.lower() for t in nltk.word_tokenize(s))  # noqa: E731
        gts = {i: [tok(x) for x in rs] for i, rs in enumerate(REFS)}
        res = {i: [tok(h)] for i, h in enumerate(HYPS)}
        corpus, per = m._scorer.compute_score(gts, res)
        assert r["METEOR"] == pytest.approx(100 * corpus, rel=1e-12)
        # exact match scores higher than a paraphrase, which scores higher than unrelated text
        _, seg = m.score(
            ["the cat sat on the mat", "a kitty sits on a rug", "stock prices fell sharply"],
            [["the cat sat on the mat"]] * 3,
        )
        assert seg[0] > seg[1] > seg[2] >= 0.0 and seg[0] > 0.9
        # the nltk implementation gives a different number on the same text (the reason METEOR_impl exists)
        r_nltk = evaluate_generation(HYPS, REFS, meteor="nltk")
        assert abs(r_nltk["METEOR"] - r["METEOR"]) > 1.0
        proc = m.process
    # closing sent EOF: the jar exited by itself (status 0), no process is left behind
    assert proc.returncode == 0 and proc.stdout.closed
    with pytest.raises(RuntimeError, match="closed"):
        m.score(["a"], [["a"]])


@needs_java
def test_meteor15_dead_jvm_raises_instead_of_hanging():
    m = Meteor15()
    m.process.kill()
    m.process.wait()
    with pytest.raises(RuntimeError, match="METEOR 1.5"):
        m.score(["a b"], [["a b"]])
    # pycocoevalcap's __del__ takes the lock: it must be free again, or garbage collection would block forever
    assert not m._scorer.lock.locked()
    m._scorer.__del__()


# --------------------------------------------------------------------------------------------- errors and CLI
def test_bad_input_raises_value_error_naming_argument():
    with pytest.raises(ValueError, match="hypotheses"):
        evaluate_generation("a b", ["a b"], meteor="none")
    with pytest.raises(ValueError, match="references: expected 2"):
        evaluate_generation(["a", "b"], ["a"], meteor="none")
    with pytest.raises(ValueError, match=r"references\[0\]"):
        evaluate_generation(["a"], [[]], meteor="none")
    with pytest.raises(ValueError, match=r"references\[0\]"):
        evaluate_generation(["a"], [" "], meteor="none")
    with pytest.raises(ValueError, match="entities"):
        evaluate_generation(["a"], ["a"], entities=[["a"], ["b"]], meteor="none")
    with pytest.raises(ValueError, match="meteor"):
        evaluate_generation(["a"], ["a"], meteor="bleu")
    with pytest.raises(ValueError, match="tokenize"):
        evaluate_generation(["a"], ["a"], meteor="none", tokenize="spacy")


def test_score_cli_multi_reference(tmp_path, capsys):
    (tmp_path / "hyp.txt").write_text("a b c d\nx y z\n", encoding="utf-8")
    (tmp_path / "ref1.txt").write_text("a b x y\np q r\n", encoding="utf-8")
    (tmp_path / "ref2.txt").write_text("z w c d\n\n", encoding="utf-8")  # example 2 has one reference only
    (tmp_path / "ent.txt").write_text("a b ; q\nx y z\n", encoding="utf-8")
    out = tmp_path / "scores.json"
    rc = score_cli.main(
        [
            "--hyp",
            str(tmp_path / "hyp.txt"),
            "--ref",
            str(tmp_path / "ref1.txt"),
            "--ref",
            str(tmp_path / "ref2.txt"),
            "--entities",
            str(tmp_path / "ent.txt"),
            "--meteor",
            "none",
            "--tokenize",
            "split",
            "--json",
            str(out),
        ]
    )
    assert rc == 0
    got = json.loads(out.read_text())
    want = evaluate_generation(
        ["a b c d", "x y z"],
        [["a b x y", "z w c d"], ["p q r"]],
        entities=[["a b", "q"], ["x y z"]],
        meteor="none",
        tokenize="split",
    )
    for k, v in want.items():
        assert got[k] == v
    assert got["num_references"] == 3 and got["entity_coverage"] == pytest.approx(200 / 3)
    assert "METEOR (None)" in capsys.readouterr().out
    (tmp_path / "short.txt").write_text("a\n", encoding="utf-8")
    assert (
        score_cli.main(["--hyp", str(tmp_path / "hyp.txt"), "--ref", str(tmp_path / "short.txt"), "--meteor", "none"])
        == 2
    )


def test_score_is_the_same_with_and_without_a_bom(tmp_path, capsys):
    from graph_rma.cli import main
    from graph_rma.engine import read_json

    text = "the cat sat on the mat today\na dog ran in the park\n"
    (tmp_path / "ref.txt").write_text(text)
    (tmp_path / "plain.txt").write_text(text)
    (tmp_path / "bom.txt").write_bytes(b"\xef\xbb\xbf" + text.encode())
    scores = []
    for hyp in ("plain.txt", "bom.txt"):
        out = tmp_path / f"{hyp}.json"
        assert (
            main(
                [
                    "score",
                    "--hyp",
                    str(tmp_path / hyp),
                    "--ref",
                    str(tmp_path / "ref.txt"),
                    "--meteor",
                    "none",
                    "--tokenize",
                    "split",
                    "--json",
                    str(out),
                ]
            )
            == 0
        )
        scores.append(read_json(out))
    capsys.readouterr()
    assert scores[0] == scores[1]


def test_entity_separator_accepts_the_documented_forms_and_warns_when_nothing_splits(tmp_path, capsys):
    from graph_rma.cli import main
    from graph_rma.engine import read_json

    (tmp_path / "h.txt").write_text("the cat sat on the mat\n")
    values = []
    for i, line in enumerate(("cat ; mat", "cat; mat", "cat;mat")):
        (tmp_path / f"e{i}.txt").write_text(line + "\n")
        out = tmp_path / f"s{i}.json"
        assert (
            main(
                [
                    "score",
                    "--hyp",
                    str(tmp_path / "h.txt"),
                    "--ref",
                    str(tmp_path / "h.txt"),
                    "--entities",
                    str(tmp_path / f"e{i}.txt"),
                    "--meteor",
                    "none",
                    "--tokenize",
                    "split",
                    "--json",
                    str(out),
                ]
            )
            == 0
        )
        values.append(read_json(out)["entity_coverage"])
    assert values == [100.0] * 3
    (tmp_path / "comma.txt").write_text("cat , mat\n")
    capsys.readouterr()
    assert (
        main(
            [
                "score",
                "--hyp",
                str(tmp_path / "h.txt"),
                "--ref",
                str(tmp_path / "h.txt"),
                "--entities",
                str(tmp_path / "comma.txt"),
                "--meteor",
                "none",
                "--tokenize",
                "split",
            ]
        )
        == 0
    )
    assert "no line of --entities" in capsys.readouterr().err


def test_score_without_java_is_one_line(tmp_path, capsys, monkeypatch):
    from graph_rma.cli import main
    from graph_rma.metrics import generation

    monkeypatch.setattr(generation, "java_available", lambda: False)
    (tmp_path / "h.txt").write_text("a b c\n")
    h = str(tmp_path / "h.txt")
    assert main(["score", "--hyp", h, "--ref", h, "--meteor", "meteor-1.5", "--tokenize", "split"]) == 1
    err = capsys.readouterr().err.strip()
    assert "METEOR 1.5 needs Java" in err and "Traceback" not in err and len(err.splitlines()) == 1
