"""graph_rma.metrics.webnlg2017: the WebNLG 2017 challenge's BLEU / METEOR / TER on hand-checked cases, and the
``--scorer webnlg2017`` option of ``graph-rma score``."""

import json
import math

import pytest

pytest.importorskip("sacrebleu")
pytest.importorskip("unidecode")

from conftest import needs_java  # noqa: E402

from graph_rma.cli import score as score_cli  # noqa: E402
from graph_rma.metrics import Meteor15, score_webnlg2017, tokenize_webnlg2017  # noqa: E402


def test_tokenisation_is_the_organisers():
    # split at every non-word character, spaces collapsed, lower-cased, transliterated to ASCII
    assert (
        tokenize_webnlg2017("Alan Bean's  (born 1932) lives in São Paulo.")
        == "alan bean ' s ( born 1932 ) lives in sao paulo ."
    )
    assert tokenize_webnlg2017("U.S. 1,000 e-mail", reference=True) == "u . s . 1 , 000 e - mail"
    # the organisers split a reference before transliterating it and a submission after: '½' is a word character,
    # its transliteration '1/2' is not
    assert tokenize_webnlg2017("a½b", reference=True) == "a 1/2b"
    assert tokenize_webnlg2017("a½b") == "a 1 / 2b"
    with pytest.raises(ValueError, match="^text: expected a str"):
        tokenize_webnlg2017(None)


def test_a_hypothesis_equal_to_a_reference_scores_bleu_100_and_ter_0():
    refs = [
        ["The cat sat on the mat.", "A cat was sitting on the mat."],
        ["Abilene, Texas is served by Abilene Regional Airport."],
    ]
    r = score_webnlg2017(
        ["A cat was sitting on the mat.", "Abilene, Texas is served by Abilene Regional Airport."], refs, meteor="none"
    )
    assert r["BLEU"] == pytest.approx(100.0) and r["TER"] == 0.0
    assert r["BLEU_precisions"] == [100.0] * 4 and r["BLEU_bp"] == 1.0 and r["n"] == 2
    assert r["METEOR"] is None and r["scorer"] == "webnlg2017" and r["max_references"] == 3
    assert "tok:none" in r["signature"]["BLEU"] and "case:lc" in r["signature"]["BLEU"]


def test_ter_can_be_left_out_and_bleu_is_unchanged():
    hyps = ["the cat sat on a mat", "abilene is served by an airport"]
    refs = [["The cat sat on the mat.", "A cat was sitting on the mat."], ["Abilene is served by Abilene Airport."]]
    full, bleu_only = score_webnlg2017(hyps, refs, "none"), score_webnlg2017(hyps, refs, "none", ter=False)
    assert full["TER"] > 0 and bleu_only["TER"] is None and "TER" not in bleu_only["signature"]
    assert {k: v for k, v in bleu_only.items() if k not in ("TER", "signature")} == {
        k: v for k, v in full.items() if k not in ("TER", "signature")
    }


def test_bleu_by_hand_from_ngram_counts():
    hyps = ["the cat sat on the mat", "a b c d e"]
    refs = [["the cat is on the mat", "there is a cat on the mat"], ["a b c d e f g"]]
    # entry 1, clipped matches / hypothesis n-grams: unigrams the x2 (ref 1 has two), cat, on, mat = 5/6;
    # bigrams the cat, on the, the mat = 3/5; trigrams on the mat = 1/4; 4-grams 0/3. Lengths 6 vs 6 and 7.
    alone = score_webnlg2017(hyps[:1], refs[:1], meteor="none")
    assert alone["BLEU_precisions"] == pytest.approx([500 / 6, 300 / 5, 100 / 4, 0.0])
    assert alone["BLEU"] == 0.0  # no 4-gram match and, as in multi-bleu.perl, no smoothing
    # entry 2: 5/5, 4/4, 3/3, 2/2; length 5, closest reference 7 (the blank padding references are length 0)
    # corpus: 10/11, 7/9, 4/7, 2/5; hypothesis length 11, reference length 6 + 7 = 13
    r = score_webnlg2017(hyps, refs, meteor="none")
    assert (r["hyp_len"], r["ref_len"]) == (11, 13)
    assert r["BLEU_precisions"] == pytest.approx([1000 / 11, 700 / 9, 400 / 7, 200 / 5])
    want = 100 * math.exp(1 - 13 / 11) * (10 / 11 * 7 / 9 * 4 / 7 * 2 / 5) ** 0.25
    assert r["BLEU"] == pytest.approx(want, abs=1e-9) and round(want, 2) == 52.86


def test_lower_casing_and_punctuation_do_not_count():
    r = score_webnlg2017(["THE CAT SAT ON THE MAT."], [["the cat sat on the mat ."]], meteor="none")
    assert r["BLEU"] == pytest.approx(100.0) and r["TER"] == 0.0
    # a word the tokenisation keeps whole is a different word: 'cats' is not 'cat'
    r = score_webnlg2017(["the cats sat on the mat"], [["the cat sat on the mat"]], meteor="none")
    assert r["BLEU"] < 100.0 and r["TER"] == pytest.approx(100 / 6)


def test_missing_references_and_the_first_three_only():
    # entry 2 has one reference: multi-bleu.perl reads the blank lines of reference files 2 and 3 as references of
    # length 0, which is closer to the one-word hypothesis than 4: the corpus reference length is 4 + 0
    hyps, refs = ["a b c d", "z"], [["a b c d"], ["y y y y"]]
    r = score_webnlg2017(hyps, refs, meteor="none")
    assert (r["hyp_len"], r["ref_len"], r["BLEU_bp"]) == (5, 4, 1.0)
    # TER uses the real references only (tercom's reference file has no blank ones): (0 + 4 edits) / (4 + 4 words)
    assert r["TER"] == pytest.approx(50.0)
    # only the first three references count: a hypothesis equal to the fourth scores below 100
    four = [["w x y z", "w x y q", "w x q q", "a b c d"]]
    assert score_webnlg2017(["a b c d"], four, meteor="none")["BLEU"] == 0.0
    assert score_webnlg2017(["a b c d"], four, meteor="none", max_references=4)["BLEU"] == pytest.approx(100.0)
    with pytest.raises(ValueError, match=r"^references\[1\]: expected a str or a non-empty list"):
        score_webnlg2017(["a", "b"], [["a"], []], meteor="none")
    with pytest.raises(ValueError, match="^max_references: expected a positive integer"):
        score_webnlg2017(["a"], [["a"]], meteor="none", max_references=0)
    with pytest.raises(ValueError, match="^meteor: expected 'auto', 'meteor-1.5', 'none'"):
        score_webnlg2017(["a"], [["a"]], meteor="nltk")


@pytest.mark.slow
@needs_java
def test_meteor_runs_with_norm():
    with Meteor15(norm=False) as plain:
        assert "-norm" not in plain.command
        with pytest.raises(ValueError, match="-norm"):
            score_webnlg2017(["a"], [["a"]], meteor=plain)
        _, (raw,) = plain.score(["The Cat sat."], [["the cat sat ."]])
    with Meteor15() as norm:
        assert norm.command[-1] == "-norm" and norm.norm
        _, (normed,) = norm.score(["The Cat sat."], [["the cat sat ."]])
        r = score_webnlg2017(["the cat sat on the mat"], [["the cat sat on the mat", "a cat sat"]], meteor=norm)
    assert normed > raw  # -norm lower-cases and splits the period off before matching
    assert r["METEOR_impl"] == "meteor-1.5 -norm" and 90.0 < r["METEOR"] <= 100.0
    with pytest.raises(ValueError, match="^norm: expected True or False"):
        Meteor15(norm="yes")


def test_score_cli_with_the_challenge_scorer(tmp_path, capsys):
    (tmp_path / "hyp.txt").write_text("The cat sat on the mat.\nz\n", encoding="utf-8")
    (tmp_path / "ref1.txt").write_text("a cat sat on the mat .\ny y y y\n", encoding="utf-8")
    (tmp_path / "ref2.txt").write_text("the cat sat on the mat.\n\n", encoding="utf-8")  # example 2: one reference
    out = tmp_path / "scores.json"
    argv = [
        "--hyp",
        str(tmp_path / "hyp.txt"),
        "--ref",
        str(tmp_path / "ref1.txt"),
        "--ref",
        str(tmp_path / "ref2.txt"),
        "--meteor",
        "none",
    ]
    assert score_cli.main(argv + ["--scorer", "webnlg2017", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    got = json.loads(out.read_text())
    want = score_webnlg2017(
        ["The cat sat on the mat.", "z"],
        [["a cat sat on the mat .", "the cat sat on the mat."], ["y y y y"]],
        meteor="none",
    )
    assert {k: got[k] for k in want} == json.loads(json.dumps(want))
    assert got["num_references"] == 3 and (got["hyp_len"], got["ref_len"]) == (8, 7)
    assert "BLEU " in printed and "TER " in printed and "ROUGE" not in printed
    # the default is still coco-caption's scorer
    assert score_cli.main(argv + ["--json", str(out)]) == 0
    assert json.loads(out.read_text())["scorer"] == "coco" and "BLEU-4" in capsys.readouterr().out
    for extra, message in (
        (["--tokenize", "split"], "--tokenize: not used by --scorer webnlg2017"),
        (["--meteor", "nltk"], "--meteor nltk: --scorer webnlg2017 uses METEOR 1.5 only"),
    ):
        args = [a for a in argv if a not in ("--meteor", "none")] + ["--scorer", "webnlg2017"] + extra
        assert score_cli.main(args) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1


def test_a_line_too_long_for_ter_is_refused_in_one_line(tmp_path, capsys):
    """`score --scorer webnlg2017` on a 20,000-token line ran TER's shift search out of memory: a line over
    MAX_TER_TOKENS tokens is refused, naming the entry; BLEU alone (ter=False) still scores it, and a line at the
    bound is scored."""
    from graph_rma import GraphRMAError
    from graph_rma.metrics.webnlg2017 import MAX_TER_TOKENS

    long = " ".join(["word"] * (MAX_TER_TOKENS + 1))
    at_bound = " ".join(["word"] * MAX_TER_TOKENS)
    with pytest.raises(GraphRMAError, match=rf"^entry 2: its hypothesis has {MAX_TER_TOKENS + 1} tokens; TER"):
        score_webnlg2017(["a cat", long], [["a cat"], ["a dog"]], meteor="none")
    with pytest.raises(GraphRMAError, match=r"^entry 1: its reference 2 has"):
        score_webnlg2017(["a cat"], [["a cat", long]], meteor="none")
    assert score_webnlg2017([long], [["a dog"]], meteor="none", ter=False)["TER"] is None
    assert score_webnlg2017([at_bound], [[at_bound]], meteor="none")["TER"] == 0.0
    (tmp_path / "hyp.txt").write_text(" ".join(["w"] * 20000) + "\n", encoding="utf-8")
    (tmp_path / "ref.txt").write_text("a cat\n", encoding="utf-8")
    argv = ["--hyp", str(tmp_path / "hyp.txt"), "--ref", str(tmp_path / "ref.txt"), "--meteor", "none"]
    assert score_cli.main(argv + ["--scorer", "webnlg2017"]) == 2
    err = capsys.readouterr().err.strip()
    assert "entry 1: its hypothesis has 20000 tokens" in err and len(err.splitlines()) == 1
