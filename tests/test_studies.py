"""The study drivers' grids are valid on the models they run (a spec that fails only after hours of runs is a bug)."""

import importlib
import json
import os
import sys
import warnings
from pathlib import Path

import pytest
from conftest import REPO

from graph_rma import GraphRMAError
from graph_rma.models import TwoLayerGAT
from graph_rma.variants import apply_variant, parse_variant

pytestmark = pytest.mark.slow  # subprocesses or real-data runs: left out of make test-fast


def _load(name):
    return importlib.import_module(f"studies.{name}")  # the studies package (the repository root is on the path)


@pytest.mark.parametrize("v2", [False, True])
def test_where_it_helps_grid_builds_on_gat_and_gatv2(v2):
    study = _load("where_it_helps")
    families = study.grid(v2)
    assert set(families) == {"svgd", "spos", "reg"}
    for specs in families.values():
        for spec in specs:
            model = TwoLayerGAT(16, 3, v2=v2)
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*fewer than 2; not a particle group")
                setup = apply_variant(spec, model)
            v = parse_variant(spec)
            if v.sampler != "ma":  # the first layer's 8 heads are one particle group
                assert [g.num_heads for g in setup.sampler.groups] == [8]
            else:
                assert setup.sampler is None and v.reg == "frobenius"


def test_where_it_helps_hands_run_study_the_gat_protocol_first_and_no_protocol_keywords(monkeypatch):
    study = _load("where_it_helps")
    seen = {}
    monkeypatch.setattr(study, "_run_study", lambda *a, **k: seen.update(args=a, kwargs=k) or {})
    study.run_study(["ma"], [0], Path("out"), dataset="texas", v2=True, resume=True)
    protocol, *rest = seen["args"]
    assert (protocol.name, protocol.v2, rest) == ("gat", True, [["ma"], [0], Path("out")])
    assert seen["kwargs"] == {"dataset": "texas", "resume": True}


def test_baselines_page_is_what_its_committed_results_render_to():
    """docs/baselines.md's tables are generated from docs/baselines/results.json, never typed."""
    study = _load("baselines")
    results = json.loads((REPO / "docs" / "baselines" / "results.json").read_text())
    page = (REPO / "docs" / "baselines.md").read_text()
    assert study.render(page, results) == page
    rows = {(r["dataset"], r["protocol"]): r["runs"] for r in results["reproduction"]}
    assert set(rows) == set(study.REPRODUCE)


def test_the_evidence_picture_draws_the_final_tables_paired_differences(tmp_path):
    """Each row of docs/baselines/evidence.png is an arm's paired difference from its entry's chosen plain, the
    number its final table prints; an entry without every final has no row; the picture is written and linked."""
    pytest.importorskip("matplotlib")
    study = _load("baselines")
    results = json.loads((REPO / "docs" / "baselines" / "results.json").read_text())
    rows = study.forest_rows(results)
    block = study.render_evidence(results)
    assert rows and all(label.endswith(" − plain") for label, _ in rows)
    for label, pc in rows:
        assert f"{pc['mean']:+.2f} ± {pc['se']:.2f} ({pc['wins']}/{pc['ties']}/{pc['losses']})" in block
    finished = {label.split(":")[0] for label, _ in rows}
    for dataset, protocol in study.EVIDENCE:
        counts = (
            study.entry_complete(results, dataset, protocol)
            and len(study.evidence_finals(results, dataset, protocol)) > 1
        )
        assert (f"{dataset}, {protocol}" in finished) == counts
    assert f"]({study.FOREST})" in block
    assert study.plot_forest(rows, tmp_path / "e.png").read_bytes()[:4] == b"\x89PNG"
    # no entry with finals: no picture, no link
    empty = dict(results, evidence=[dict(e, final=[]) for e in results["evidence"]])
    assert study.forest_rows(empty) == [] and study.FOREST not in study.render_evidence(empty)


def test_an_entry_whose_finals_are_part_way_is_shown_open_and_counts_nowhere_until_complete():
    """A final table with some arms' seeds still missing says so, compares over the seeds both arms have, and the
    entry stays out of the picture and the README's summary; once every arm has every seed it is in both."""
    study, summary = _load("baselines"), _load("summary")
    results = json.loads((REPO / "docs" / "baselines" / "results.json").read_text())
    key = ("chameleon_filtered", "luo")
    assert study.entry_complete(results, *key)
    finals = study.evidence_finals(results, *key)
    svgd_setting = finals["svgd"][0]
    part_way = {
        **results,
        "evidence": [
            dict(e, final=e["final"][:3]) if (e["dataset"], e["protocol"], e["setting"]) == (*key, svgd_setting) else e
            for e in results["evidence"]
        ],
    }
    assert not study.entry_complete(part_way, *key)
    assert all(not label.startswith("chameleon_filtered, luo") for label, _ in study.forest_rows(part_way))
    assert any(label.startswith("chameleon_filtered, luo") for label, _ in study.forest_rows(results))
    block = study.render_evidence(part_way).split("### chameleon_filtered, `luo` protocol")[1].split("###")[0]
    assert "Final seeds 0-9, **open**" in block
    plain, svgd = finals["plain"][1], finals["svgd"][1]
    three = {seed: svgd[seed] for seed in sorted(svgd)[:3]}
    pc = study.paired_comparison(plain, three)  # over the 3 seeds both arms have
    assert pc["n"] == 3 and f"| svgd | `{svgd_setting}` | 3 | " in block
    assert f"{pc['mean']:+.2f} ± {pc['se']:.2f} ({pc['wins']}/{pc['ties']}/{pc['losses']})" in block
    one = {
        **part_way,
        "evidence": [
            dict(e, final=e["final"][:1]) if e["setting"] == svgd_setting else e for e in part_way["evidence"]
        ],
    }
    first = study.render_evidence(one).split("### chameleon_filtered, `luo` protocol")[1].split("###")[0]
    assert "(1 seed)" in first  # no standard error from one pair, none printed
    assert f"| svgd | `{svgd_setting}` | 1 | {svgd[sorted(svgd)[0]]:.2f} | " in first  # one value: no "± 0.00"
    everything = summary.load()
    whole = summary.render_summary({**everything, "baselines": results}, "")
    cut = summary.render_summary({**everything, "baselines": part_way}, "")
    assert "| chameleon_filtered (`luo` protocol" in whole and "| chameleon_filtered (`luo` protocol" not in cut


def test_an_arm_whose_choice_is_the_published_recipe_is_not_shown_twice():
    """minesweeper's single-head arm chose the recipe as published (``ma``): its final runs are the reproduction
    row's, shown once, as that arm's row."""
    study = _load("baselines")
    results = json.loads((REPO / "docs" / "baselines" / "results.json").read_text())
    assert study.evidence_finals(results, "minesweeper", "luo")["single-head"][0] == "ma"
    block = study.render_evidence(results).split("### minesweeper, `luo` protocol")[1]
    assert "| single-head | `ma` | 10 | " in block and "plain, as published" not in block
    assert 'ours is the row "single-head" below' in block
    assert "| plain, as published | `ma` | 10 | " in study.render_evidence(results).split("### chameleon, ")[1]


def test_cora_page_is_what_its_committed_results_render_to():
    """docs/cora.md's summary and tables are generated from docs/cora/results.json, never typed."""
    study = _load("cora")
    results = json.loads((REPO / "docs" / "cora" / "results.json").read_text())
    page = (REPO / "docs" / "cora.md").read_text()
    assert study.render(page, results) == page
    # the committed results hold every run of every stage: 20 seeds of each final variant, 3 of each setting tried
    assert {len(e["runs"]) for e in results["tuning"]} == {len(study.TUNING_SEEDS)}
    for stage, specs in (("full", study.NODE_FULL_VARIANTS), ("combo", study.COMBO), ("gat", study.GAT_RULE)):
        for spec in specs:
            assert sorted(r["seed"] for r in study._by(results[stage], spec)) == study.FINAL_SEEDS, (stage, spec)


@pytest.mark.parametrize("task", ["agenda", "webnlg"])
def test_graph_to_text_pages_are_what_their_committed_results_render_to(task):
    """docs/agenda.md's and docs/webnlg.md's summaries and measured tables come from their results files."""
    study = _load("graph_to_text")
    results = json.loads((REPO / "docs" / task / "results.json").read_text())
    page = (REPO / "docs" / f"{task}.md").read_text()
    assert study.render(task, page, results) == page
    assert [r["variant"] for r in results[task]] == list(study.VARIANTS.values())
    for r in results[task]:  # the whole test split, scored with METEOR 1.5 (the published numbers' METEOR)
        scores = r["test"] if task == "agenda" else r["test"]["all"]
        assert scores["METEOR_impl"] == "meteor-1.5" and scores["n"] == r["records"] > 0


def test_webnlg2017_block_is_what_its_committed_results_render_to():
    """docs/webnlg.md's challenge-baseline block comes from each round's docs/webnlg2017/.../results.json
    (studies.webnlg2017), with the decoded test outputs committed beside each round's once its test set is scored."""
    study = _load("webnlg2017")
    rounds = study.committed()
    page = (REPO / "docs" / "webnlg.md").read_text()
    assert study.render(page, rounds) == page and list(rounds) == list(study.ROUNDS)
    for name, results in rounds.items():
        folder = REPO / study.ROUNDS[name].results
        assert (folder / "results.json").is_file()
        assert [g["setting"] for g in results["grid"]] == [study.setting_name(s) for s in study.ROUNDS[name].grid]
        if results["test"] is not None:
            committed = json.loads((folder / "test.json").read_text())
            hyp = folder / "hyp.test.txt"
            assert committed["hyp_sha256"] == study._sha256(hyp)
            assert committed["setting"] == results["choice"]["setting"]
            rows = study.read_meta(folder / "meta.test.tsv")
            scores = results["test"]["scores"]
            assert len(rows) == len(hyp.read_text(encoding="utf-8").splitlines()) == scores["all"]["n"]
            assert sum(r["seen"] for r in rows) == results["test"]["scores"]["seen"]["n"]


def test_text_page_is_what_its_committed_results_render_to():
    """docs/text.md's summary and tables come from docs/text/results.json."""
    study = _load("text")
    results = json.loads((REPO / "docs" / "text" / "results.json").read_text())
    page = (REPO / "docs" / "text.md").read_text()
    assert study.render(page, results) == page
    for stage in study.STAGES:  # two seeds of every (dataset, model, variant) the stage's command runs
        runs = results[stage]["runs"]
        keys = {(r["dataset"], r["model"], r["variant"]) for r in runs}
        assert sorted(r["seed"] for r in runs) == sorted([0, 1] * len(keys)), stage


def test_diagnostics_page_is_what_its_committed_results_render_to():
    from graph_rma.tasks.node_classification import upgrade_metrics  # the committed reports hold the old keys

    study = _load("diagnostics")
    results = json.loads((REPO / "docs" / "diagnostics" / "results.json").read_text())
    page = (REPO / "docs" / "diagnostics.md").read_text()
    assert study.render(page, results) == page
    for r in results["reports"].values():  # the report scores the model the pipeline saved
        assert r["accuracy"] == pytest.approx(upgrade_metrics(r["training_metrics"])["test_metric"], abs=1e-6)
    assert set(results["sweep"]) == set(study.VARIANTS)


def test_metrics_page_is_what_its_committed_results_render_to():
    study = _load("metrics")
    results = json.loads((REPO / "docs" / "metrics" / "results.json").read_text())
    page = (REPO / "docs" / "metrics.md").read_text()
    assert study.render(page, results) == page
    s = results["scores"]
    assert s["seen"]["n"] + s["unseen"]["n"] == s["all"]["n"] == s["all_nltk"]["n"]
    assert [s[k]["METEOR_impl"] for k in ("all", "seen", "unseen", "all_nltk")] == ["meteor-1.5"] * 3 + ["nltk"]


def test_authors_update_page_is_what_its_committed_results_render_to():
    study = _load("authors_update")
    results = json.loads((REPO / "docs" / "authors-update" / "results.json").read_text())
    page = (REPO / "docs" / "authors-update.md").read_text()
    assert study.render(page, results) == page
    # its plain AGENDA row is the AGENDA page's plain run, not a copy that could drift
    agenda = json.loads((REPO / "docs" / "agenda" / "results.json").read_text())
    assert results["agenda_plain"] == next(r for r in agenda["agenda"] if r["variant"] == "ma")
    assert sorted(r["seed"] for r in results["cora"]) == sorted(study.SEEDS * len(study.CORA))
    assert sorted(r["seed"] for r in results["trec"]) == sorted(study.SEEDS * len(study.TREC))


def test_benchmark_tables_are_what_their_committed_results_render_to():
    """benchmarks/README.md's generated tables come from the scripts' --json runs in benchmarks/recorded/."""
    from benchmarks import report

    page = (REPO / "benchmarks" / "README.md").read_text()
    results = report.load()
    assert report.render_blocks(page, results, report.BLOCKS) == page
    for run in results["sampler"]:  # every run has both Cora tables and the conditions it ran under
        assert set(report.SAMPLER_TABLES) <= set(run["comparisons"]) and run["meta"]["command"]


def test_graph_to_text_study_runs_the_documented_commands(tmp_path):
    study = _load("graph_to_text")
    agenda = [c[2:] for c in study.commands("agenda", "svgd", tmp_path)]
    assert agenda == [
        [
            "graph_rma.cli",
            "agenda",
            "train",
            "--out",
            str(tmp_path / "agenda" / "svgd"),
            "--variant",
            "svgd:alpha=0.1",
            "--evaluate",
            "--quiet",
        ],
        ["graph_rma.cli", "agenda", "heads", "--out", str(tmp_path / "agenda" / "svgd")],
    ]
    assert [c[4] for c in study.commands("webnlg", "ma", tmp_path)] == ["train"]


def test_cora_study_grid_parses_and_the_rule_picks_by_validation_on_seeds_100_101():
    study = _load("cora")
    for spec, heads in study.TUNING:
        parse_variant(spec)
        assert heads in (1, 8)

    def runs(vals):
        return [
            {"seed": s, "val": v, "test": 0.0, "dist": 0.1, "epochs": 100, "sec_per_epoch": 0.1}
            for s, v in zip(study.TUNING_SEEDS, vals)
        ]

    results = {
        "tuning": [
            {"variant": "ma", "out_heads": 1, "runs": runs([80.0, 81.0, 99.0])},
            {"variant": "ma", "out_heads": 8, "runs": runs([81.0, 81.0, 0.0])},
            {"variant": "svgd:alpha=0.1", "out_heads": 1, "runs": runs([80.0, 80.0, 80.0])},
            {"variant": "svgd:eps=8", "out_heads": 1, "runs": runs([80.0, 80.0, 90.0])},
        ]
    }
    # seed 102 never decides; ties go to the earlier entry
    assert study.rule_choice(results) == {"ma": ("ma", 8), "svgd": ("svgd:alpha=0.1", 1)}


def test_baselines_evidence_grid_builds_and_gives_each_arm_the_same_budget():
    study = _load("baselines")
    from graph_rma.tasks.protocols import resolve_protocol

    for (dataset, protocol), arms in study.EVIDENCE.items():
        assert {"plain", "svgd"} <= set(arms) and len({len(v) for v in arms.values()}) == 1  # (+ single-head)
        for spec, overrides in arms["plain"] + arms["svgd"]:
            resolve_protocol(protocol, dataset, overrides)  # every override is a valid protocol field
            parse_variant(spec)


def test_the_docs_hook_turns_rest_into_markdown():
    import importlib.util

    spec = importlib.util.spec_from_file_location("griffe_rest", REPO / "docs" / "hooks" / "griffe_rest.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    text = (
        "See :class:`~graph_rma.nn.RepulsiveGATConv` and :func:`graph_rma.convert`, ``x`` and :math:`a_i`.\n\n"
        ".. math::\n    y = \\sum_i x_i\n\nFrom Python::\n\n    run()\n"
    )
    assert hook.rest_to_markdown(text) == (
        "See `RepulsiveGATConv` and `graph_rma.convert`, `x` and $a_i$.\n\n$$\ny = \\sum_i x_i\n$$\n\n"
        "From Python:\n\n    run()\n"
    )


def test_cora_report_from_a_folder_without_runs_keeps_the_committed_results(tmp_path):
    """Reporting from an output folder without the stages' runs keeps the committed results (nothing is wiped)."""
    study = _load("cora")
    assert study.collect(tmp_path) == json.loads((REPO / "docs" / "cora" / "results.json").read_text())


def test_baselines_report_from_a_folder_without_runs_keeps_the_committed_results(tmp_path):
    """Every committed run is kept; an evidence entry written after the last report is there with no runs yet."""
    study = _load("baselines")
    committed = json.loads((REPO / "docs" / "baselines" / "results.json").read_text())
    collected = study.collect(tmp_path)
    assert {k: v for k, v in collected.items() if k != "evidence"} == {
        k: v for k, v in committed.items() if k != "evidence"
    }
    kept = [e for e in collected["evidence"] if e in committed["evidence"]]
    assert kept == committed["evidence"]
    assert all(not e["select"] and not e["final"] for e in collected["evidence"] if e not in committed["evidence"])


def test_baselines_report_keeps_the_committed_seeds_a_folder_has_not_finished(tmp_path):
    """A setting's folder holding one finished seed (a fresh clone continuing it): that seed's run replaces its
    committed one, the other committed seeds stay (the folder used to replace them all)."""
    study = _load("baselines")
    committed = json.loads((REPO / "docs" / "baselines" / "results.json").read_text())
    row = next(r for r in committed["reproduction"] if len(r["runs"]) >= 3)
    d, p = row["dataset"], row["protocol"]
    seed = row["runs"][1]["seed"]
    record = {
        "seed": seed,
        "split": row["runs"][1]["split"],
        "metrics": {
            "metric": row["runs"][1]["metric"],
            "test_metric": 0.5,
            "val_metric": 0.25,
            "epochs": 7,
            "sec_per_epoch": 1.0,
        },
    }
    folder = study._row_dir(tmp_path, d, p) / "runs" / "ma"
    folder.mkdir(parents=True)
    (folder / f"seed{seed}.json").write_text(json.dumps(record))
    runs = next(r for r in study.collect(tmp_path)["reproduction"] if (r["dataset"], r["protocol"]) == (d, p))["runs"]
    assert [r["seed"] for r in runs] == [r["seed"] for r in row["runs"]]
    assert (
        runs[1]["test"] == 50.0 and runs[1]["epochs"] == 7 and runs[0] == row["runs"][0] and runs[2:] == row["runs"][2:]
    )


@pytest.mark.parametrize(
    "driver,args,word",
    [
        ("baselines", ["report", "--page", "{tmp}/missing.md"], "argument --page: no such page"),
        ("baselines", ["reproduce", "--seeds", "x"], "argument --seeds: expected a seed"),
        ("baselines", ["reproduce", "--threads", "0"], "argument --threads: expected a positive integer"),
        ("baselines", ["reproduce", "chameleon"], "rows: unknown row 'chameleon'; choose from chameleon:ggcn"),
        ("baselines", ["final", "plane"], "rows: unknown arm 'plane'"),
        ("baselines", ["reproduce", "--out", "{tmp}/file.md"], "is a file, not a folder"),
        ("metrics", ["report", "--page", "{tmp}/missing.md"], "argument --page: no such page"),
        ("webnlg2017", ["report", "--page", "{tmp}/missing.md"], "argument --page: no such page"),
        ("webnlg2017", ["report"], "argument --page: no such page docs/webnlg.md"),
        ("webnlg2017", ["test", "--threads", "0"], "argument --threads: expected a positive integer"),
    ],
)
def test_study_drivers_refuse_bad_arguments_in_one_line_and_write_nothing(driver, args, word, tmp_path):
    """Bad arguments used to end in tracebacks; `baselines report --page <missing>` wrote results.json before
    failing. Run as documented, `python -m studies.<driver>`, from another folder (the repository on the path)."""
    import subprocess

    (tmp_path / "file.md").write_text("a file\n")
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    before = sorted(p.name for p in tmp_path.rglob("*"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(
        [sys.executable, "-m", f"studies.{driver}", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    err = [line for line in proc.stderr.strip().splitlines() if not line.startswith(("usage:", "  "))]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and len(err) == 1, proc.stderr[-2000:]
    assert word in err[0], err
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # no results.json beside the missing page


def test_report_on_a_page_without_its_blocks_is_one_line_naming_the_page(tmp_path):
    """Issue 67, item 6: `baselines report --page <a page without the generated-block markers>` ended in a
    traceback."""
    import subprocess

    page = tmp_path / "page.md"
    page.write_text("no generated blocks here\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(
        [sys.executable, "-m", "studies.baselines", "report", "--page", str(page), "--out", str(tmp_path / "runs")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.strip() == (
        f"baselines.py: {page}: the page has no generated block 'reproduction' (markers <!-- reproduction:start --> "
        "... <!-- reproduction:end -->)"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["page.md"]


def test_a_page_without_its_blocks_writes_no_results(tmp_path):
    """The page is read and rendered before anything is written."""
    study = _load("baselines")
    page = tmp_path / "baselines.md"
    page.write_text("no generated blocks here\n")
    with pytest.raises(GraphRMAError, match=f"^{page}: the page has no generated block 'reproduction'"):
        study.report(tmp_path / "runs", page)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["baselines.md"]


def test_every_page_is_what_its_committed_results_render_to(capsys):
    """`python -m studies.render --check`: every results page, the benchmarks page and the summaries of the README
    and the docs home are what the committed results files render to."""
    render = _load("render")
    assert render.main(["--check"]) == 0, capsys.readouterr().out
    assert {"README.md", "docs/index.md", "benchmarks/README.md", "docs/baselines.md"} <= set(render.renderers())


def test_the_summary_has_a_row_per_finished_comparison_and_links_each_page():
    summary = _load("summary")
    results = summary.load()
    for link, page in (("docs/", "README.md"), ("", "docs/index.md")):
        table = summary.render_summary(results, link)
        assert table in (REPO / page).read_text()
        for name in ("cora", "baselines", "agenda", "webnlg"):
            assert f"]({link}{name}.md)" in table and f"]({link}{name}/results.json)" in table
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line][1:]
    names = [r.split(" ")[1] for r in rows]  # the baselines' finished evidence entries first
    assert names[-4:] == ["Cora", "Cora", "AGENDA,", "WebNLG"] and "chameleon" in names
    assert set(names[:-4]) <= {dataset for dataset, _ in _load("baselines").EVIDENCE}


def test_render_writes_nothing_when_a_page_lacks_a_block(tmp_path, monkeypatch):
    """Every page is rendered before any is written: a page without its block leaves every file as it was."""
    render = _load("render")
    pages = {"a.md": "<!-- x:start -->\nold\n<!-- x:end -->\n", "b.md": "no block\n"}
    for name, text in pages.items():
        (tmp_path / name).write_text(text)
    from graph_rma import GraphRMAError
    from graph_rma.engine.blocks import splice

    monkeypatch.setattr(render, "REPO", tmp_path)
    monkeypatch.setattr(render, "renderers", lambda: {name: lambda t: splice(t, "x", "new") for name in pages})
    with pytest.raises(GraphRMAError, match="^b.md: the page has no generated block 'x'"):
        render.render_all()
    assert {name: (tmp_path / name).read_text() for name in pages} == pages


def test_every_page_writes_a_spread_and_a_paired_difference_one_way():
    from studies.pages import mean_std_cell, paired_cell

    assert mean_std_cell([1.0, 2.0, 3.0]) == "2.00 ± 1.00"  # sample std: sqrt(((1)^2 + 0 + (1)^2) / 2) = 1
    assert mean_std_cell([1.0, 2.0, 4.0], 1) == "2.3 ± 1.5"  # mean 7/3; std sqrt((16/9 + 1/9 + 25/9) / 2) = 1.53
    assert mean_std_cell([52.317]) == "52.32" and mean_std_cell([]) == "–" and mean_std_cell([], empty="") == ""
    assert mean_std_cell({0: 1.0, 1: 3.0}.values()) == "2.00 ± 1.41"
    pc = {"mean": 0.4444, "se": 0.1, "wins": 3, "ties": 0, "losses": 1}
    assert paired_cell(pc) == "+0.44 ± 0.10 (3/0/1)" and paired_cell(dict(pc, mean=-1.005)).startswith("-1.00")


def test_every_page_calls_a_paired_difference_noise_within_two_standard_errors():
    from graph_rma.engine import paired_comparison
    from studies.pages import paired_verdict

    # differences +1, +2, +3: mean 2, sd 1, se 1/sqrt(3) = 0.577, z = 3.46: a gain; the mirror image a loss
    a = {0: 10.0, 1: 10.0, 2: 10.0}
    assert paired_verdict(paired_comparison(a, {0: 11.0, 1: 12.0, 2: 13.0})) == "a gain"
    assert paired_verdict(paired_comparison(a, {0: 9.0, 1: 8.0, 2: 7.0})) == "a loss"
    # differences +1, -1, +3: mean 1, sd 2, se 1.155, z = 0.87: noise; one seed has no standard error: noise
    assert paired_verdict(paired_comparison(a, {0: 11.0, 1: 9.0, 2: 13.0})) == "within noise"
    assert paired_verdict(paired_comparison({0: 1.0}, {0: 5.0})) == "within noise"
    assert (
        paired_verdict({"mean": -2.0, "se": 1.0}) == "a loss"
        and paired_verdict({"mean": 1.99, "se": 1.0}) == "within noise"
    )
