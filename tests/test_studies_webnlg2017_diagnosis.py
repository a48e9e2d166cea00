"""studies.webnlg2017_diagnosis: looping measured by hand, the block rendered from hand-made numbers, and the
committed diagnosis kept on a machine without the run (its end-to-end run is in test_studies_webnlg2017.py)."""

import dataclasses
import json

import pytest
from conftest import FIXTURES, REPO

from studies import webnlg2017_diagnosis as diagnosis


def test_repeats_and_looping_by_hand():
    assert diagnosis.repeats("a b c d a b c d".split()) and not diagnosis.repeats("a b c d a b c e".split())
    assert diagnosis.repeats("x y x y".split(), n=2) and not diagnosis.repeats("a b".split())
    # tokenised as the challenge's scorer does: "U.S." is four tokens, "1,000" three
    lines = ["the u.s. and the u.s. and more", "one two three four", "a b c d e a b c d"]
    assert diagnosis.looping(lines) == pytest.approx(200 / 3)
    assert diagnosis.looping(["The U.S. and the U.S. and"], reference=True) == 100.0


def test_settings_are_the_chosen_one_with_repeats_blocked(tmp_path):
    with pytest.raises(SystemExit, match="no decoding chosen yet"):
        diagnosis.settings(tmp_path)
    (tmp_path / "decode").mkdir()
    (tmp_path / "decode" / "choice.json").write_text(json.dumps({"beam": 5, "length_penalty": 1.4}))
    assert diagnosis.settings(tmp_path) == [
        {"beam": 5, "length_penalty": 1.4, "no_repeat_ngram": n} for n in diagnosis.NGRAMS
    ]
    chosen = {"beam": 5, "length_penalty": 1.4, "no_repeat_ngram": 3, "coverage_reward": 1.0}  # v4-s0's kind
    (tmp_path / "decode" / "choice.json").write_text(json.dumps(chosen))
    assert diagnosis.settings(tmp_path) == [dict(chosen, no_repeat_ngram=n) for n in diagnosis.NGRAMS]


def test_the_last_epoch_is_decoded_with_every_option_of_the_chosen_setting(tmp_path, monkeypatch):
    from graph_rma.tasks import webnlg as task

    chosen = {"setting": "beam5-lp1.4-nr3-cr1", "beam": 5, "length_penalty": 1.4, "no_repeat_ngram": 3}
    (tmp_path / "decode").mkdir()
    (tmp_path / "decode" / "choice.json").write_text(json.dumps(dict(chosen, coverage_reward=1.0)))
    monkeypatch.setattr(diagnosis.base, "dev", lambda *a, **kw: None)  # the dev settings: tested above
    asked = {}
    monkeypatch.setattr(task, "generate", lambda *a, **kw: asked.update(kw) or (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):
        diagnosis.run(tmp_path, root="/nonexistent", progress=False)
    assert [asked[k] for k in ("beam", "length_penalty", "no_repeat_ngram", "coverage_reward")] == [5, 1.4, 3, 1.0]


def test_the_block_from_hand_made_numbers():
    assert "Not run yet" in diagnosis.render_diagnosis({"dev": [], "references": None, "test": None})
    data = {
        "dev": [
            {
                "description": "beam 5, length penalty 1.4",
                "after_test": False,
                "BLEU": 54.0,
                "brevity_penalty": 0.99,
                "looping": 16.0,
            },
            {
                "description": "beam 5, length penalty 1.4, no repeated 3-gram",
                "after_test": True,
                "BLEU": 55.0,
                "brevity_penalty": 0.96,
                "looping": 6.5,
            },
        ],
        "references": {"dev": 3.3, "test_seen": 2.5},
        "test": {
            "looping_seen": 17.0,
            "categories": [
                {
                    "category": "Monument",
                    "entries": 33,
                    "BLEU": 41.5,
                    "brevity_penalty": 1.0,
                    "looping": 45.5,
                    "baseline_BLEU": 55.15,
                },
                {
                    "category": "Elsewhere",
                    "entries": 2,
                    "BLEU": 10.0,
                    "brevity_penalty": 1.0,
                    "looping": 0.0,
                    "baseline_BLEU": None,
                },
            ],
        },
    }
    text = diagnosis.render_diagnosis(data)
    assert "The kept model against the last epoch" not in text  # not measured: no table
    data["epochs"] = {
        "setting": "beam5-lp1.4",
        "rows": [
            {
                "checkpoint": "best.pt",
                "epoch": 12,
                "train_loss": 0.961,
                "dev_loss": 1.355,
                "BLEU": 54.0,
                "brevity_penalty": 0.99,
                "looping": 16.0,
            },
            {
                "checkpoint": "checkpoint.pt",
                "epoch": 30,
                "train_loss": 0.854,
                "dev_loss": 1.39,
                "BLEU": 55.5,
                "brevity_penalty": 1.0,
                "looping": 12.25,
            },
        ],
    }
    text = diagnosis.render_diagnosis(data)
    assert "dev decoded with the chosen setting (`beam5-lp1.4`)" in text
    assert "| `checkpoint.pt` | 30 | 0.854 | 1.390 | 55.50 | 1.000 | 12.2% |" in text
    assert "| beam 5, length penalty 1.4 | the grid, before test | 54.00 | 0.990 | 16.0% |" in text
    assert (
        "| beam 5, length penalty 1.4, no repeated 3-gram | after the test decode (diagnosis; never chosen) |" in text
    )
    assert "| Monument | 33 | 41.50 | 55.15 | -13.65 | 1.000 | 45.5% |" in text
    assert "| Elsewhere | 2 | 10.00 | – | – | 1.000 | 0.0% |" in text
    assert "3.3% on dev, 2.5% on the seen test entries; in the committed test outputs (seen entries): 17.0%." in text


def test_without_the_run_the_committed_diagnosis_is_kept_and_rendered(tmp_path):
    committed = json.loads((REPO / "docs" / "webnlg2017" / "diagnosis" / "results.json").read_text())
    results = REPO / "docs" / "webnlg2017" / "diagnosis"
    assert diagnosis.collect(tmp_path / "no-run", results) == committed
    page = (REPO / "docs" / "webnlg.md").read_text()
    assert diagnosis.render(page, committed) == page
    assert {c["category"] for c in committed["test"]["categories"]} <= set(diagnosis.BASELINE_BY_CATEGORY)


def _fake_round(tmp_path, dev_hyp, test_hyps):
    """A scored round's files for the tiny fixture: dev (one Food entry, 1 triple) and test (a seen Airport entry of
    3 triples, an unseen Athlete one of 2)."""
    from graph_rma.data.webnlg import load_webnlg

    run, outputs = tmp_path / "run", tmp_path / "outputs"
    folder = run / "decode" / "beam5-lp1.0"
    folder.mkdir(parents=True)
    (run / "decode" / "test").mkdir()
    outputs.mkdir()
    (run / "decode" / "choice.json").write_text(
        json.dumps({"setting": "beam5-lp1.0", "beam": 5, "length_penalty": 1.0})
    )

    def refs(split):
        entries = load_webnlg(split, FIXTURES / "webnlg_tiny")
        return [
            {"eid": e.eid, "category": e.category, "seen": e.seen, "entities": e.entities, "references": e.references}
            for e in entries
        ]

    (folder / "refs.dev.json").write_text(json.dumps(refs("dev")))
    (folder / "hyp.dev.txt").write_text(dev_hyp)
    test = refs("test")
    (run / "decode" / "test" / "refs.test.json").write_text(json.dumps(test))
    (outputs / "hyp.test.txt").write_text("\n".join(test_hyps))
    meta = [f"{i + 1}\t{r['eid']}\t{r['category']}\t{'seen' if r['seen'] else 'unseen'}" for i, r in enumerate(test)]
    (outputs / "meta.test.tsv").write_text("\n".join(["line\teid\tcategory\tsubset", *meta]))
    return run, outputs


def test_entities_named_by_hand():
    entities = [["Plum Cake", "Norway"], ["Lindholm Airport", "Lindholm", "12"]]
    # entry 1 names both; entry 2 names "Lindholm" only ("Lindholm's airport" is not "Lindholm Airport"; 12 is absent)
    texts = ["Plum cake comes from Norway.", "Lindholm's airport is high."]
    assert diagnosis.entities_named(texts, entities) == 100 * 3 / 5
    # tokenised as the scorer does: the case is ignored, a hyphen is a token of its own (so "Lindholm-Airport" does
    # not name "Lindholm Airport", but names "Lindholm")
    assert diagnosis.entities_named(["PLUM CAKE", "LINDHOLM AIRPORT at 12 m"], entities, reference=True) == 100 * 4 / 5
    assert diagnosis.entities_named(["plum cake, norway", "Lindholm-Airport 12"], entities) == 100 * 4 / 5


def test_bleu_per_input_size_by_hand(tmp_path):
    from graph_rma.data.webnlg import load_webnlg
    from graph_rma.metrics.webnlg2017 import score_webnlg2017

    dev = load_webnlg("dev", FIXTURES / "webnlg_tiny")
    test = load_webnlg("test", FIXTURES / "webnlg_tiny")
    # dev (1 triple, 1 reference): its reference word for word, BLEU 100 either way; seen test (3 triples, 2
    # references): its second reference word for word, BLEU 100 against both, less against the first alone; unseen:
    # left out
    second = test[0].references[1]
    run, outputs = _fake_round(tmp_path, dev[0].references[0], [second, "anything"])
    found = diagnosis.by_size(run, outputs, FIXTURES / "webnlg_tiny")
    first = score_webnlg2017([second], [test[0].references[:1]], meteor="none")["BLEU"]
    assert 0 < first < 100

    def cells(split, entries=0, references=None, bleu=None, first_reference=None, named=None):
        values = dict(entries=entries, references=references, BLEU=bleu, BLEU_first_reference=first_reference)
        values |= dict(entities_named=named, entities_named_first_reference=named)
        return {f"{split}_{key}": value for key, value in values.items()}

    # every output and first reference here names each of its entities
    dev_cells = cells("dev", 1, 1.0, 100.0, 100.0, 100.0)
    test_cells = cells("test", 1, 2.0, 100.0, round(first, 4), 100.0)
    assert found == {
        "setting": "beam5-lp1.0",
        "rows": [
            {"size": 1, **dev_cells, **cells("test")},
            {"size": 3, **cells("dev"), **test_cells},
            {"size": "all", **dev_cells, **test_cells},  # every seen entry
        ],
    }
    committed = json.loads((REPO / "docs" / "webnlg2017" / "diagnosis" / "results.json").read_text())
    both = {"size": 2, "dev_entries": 5, "dev_references": 2.6, "dev_BLEU": 60.0, "dev_BLEU_first_reference": 40.0}
    both |= {"test_entries": 4, "test_references": 2.25, "test_BLEU": 55.5, "test_BLEU_first_reference": 41.0}
    both |= {"dev_entities_named": 80.0, "dev_entities_named_first_reference": 90.0}
    both |= {"test_entities_named": 70.0, "test_entities_named_first_reference": 87.5}
    sizes = {"round": "v9", "setting": found["setting"], "rows": [*found["rows"], both]}
    text = diagnosis.render_diagnosis({**committed, "by_size": sizes})
    assert "Round `v9`, dev (its chosen decoding, `beam5-lp1.0`)" in text
    assert "| 1 | 1 | 1.00 | 100.00 | 100.00 | 0 | – | – | – | – | – |" in text
    assert "| 2 | 5 | 2.60 | 60.00 | 40.00 | 4 | 2.25 | 55.50 | 41.00 | -4.50 | +1.00 |" in text
    assert "| 2 | 80.0% | 90.0% | 70.0% | 87.5% |" in text and "| 3 | – | – | 100.0% | 100.0% |" in text
    first = round(first, 4)  # as results.json holds it
    assert (
        f"| all | 1 | 1.00 | 100.00 | 100.00 | 1 | 2.00 | 100.00 | {first:.2f} | +0.00 | {first - 100:+.2f} |" in text
    )
    assert f"| 3 | 0 | – | – | – | 1 | 2.00 | 100.00 | {first:.2f} | – | – |" in text
    # outputs in another order than the release's are refused, not scored against the wrong references
    (outputs / "meta.test.tsv").write_text(
        "line\teid\tcategory\tsubset\n1\tId2\tAthlete\tunseen\n2\tId1\tAirport\tseen"
    )
    with pytest.raises(SystemExit, match="test outputs are not those of the WebNLG release read"):
        diagnosis.by_size(run, outputs, FIXTURES / "webnlg_tiny")


def test_the_table_per_input_size_is_kept_where_it_cannot_be_measured(tmp_path, monkeypatch):
    from studies import webnlg2017 as base

    name = base.latest(base.committed())
    monkeypatch.setitem(base.ROUNDS, name, dataclasses.replace(base.ROUNDS[name], run=tmp_path / "absent"))
    assert diagnosis.latest_by_size() is None  # the latest scored round's run folder is not here
    committed = json.loads((REPO / "docs" / "webnlg2017" / "diagnosis" / "results.json").read_text())
    assert committed["by_size"]["round"] == name
    results = tmp_path / "diagnosis"
    results.mkdir()
    (results / "results.json").write_text(json.dumps(committed))
    page = tmp_path / "webnlg.md"
    page.write_text((REPO / "docs" / "webnlg.md").read_text())
    data = diagnosis.report(tmp_path / "no-run", page, results)
    assert data == committed and page.read_text() == (REPO / "docs" / "webnlg.md").read_text()
