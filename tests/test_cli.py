"""The command line as a user meets it: one grammar in every command, one-line errors before any data is read,
help texts with defaults and without reST, ``--help`` without torch, and the default run folder per variant."""

import argparse
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

from graph_rma import parse_variant
from graph_rma.cli import commands
from graph_rma.cli import main as cli_main
from graph_rma.cli._common import Parser, run_command, seed_list
from graph_rma.tasks import defaults

FIXTURE = REPO / "datasets" / "fixtures" / "agenda_tiny"
TINY = [
    "--hidden",
    "16",
    "--layers",
    "1",
    "--heads",
    "2",
    "--epochs",
    "1",
    "--batch-size",
    "4",
    "--min-freq",
    "1",
    "--quiet",
]


def _parsers():
    """(name, parser) of every command and subcommand."""
    for name in commands():
        module = importlib.import_module(f"graph_rma.cli.{name}")
        parser = (getattr(module, "build_parser", None) or module._parser)()
        yield name, parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub, subparser in action.choices.items():
                    yield f"{name} {sub}", subparser


def test_building_every_parser_and_its_help_imports_no_torch():
    """--help answers fast because no command imports torch, PyG or a task before it runs."""
    code = (
        "import sys, importlib, argparse\n"
        "from graph_rma.cli import commands, usage\n"
        "usage()\n"
        "for name in commands():\n"
        "    m = importlib.import_module('graph_rma.cli.' + name)\n"
        "    p = (getattr(m, 'build_parser', None) or m._parser)()\n"
        "    p.format_help()\n"
        "    for a in p._actions:\n"
        "        if isinstance(a, argparse._SubParsersAction):\n"
        "            [s.format_help() for s in a.choices.values()]\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'torch_geometric', 'numpy')\n"
        "               or m.startswith('graph_rma.tasks.') and m not in ('graph_rma.tasks.defaults',\n"
        "               'graph_rma.tasks.protocols', 'graph_rma.tasks.generator_config',\n"
        "               'graph_rma.tasks.config_fields'))\n"
        "print(heavy)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
    # and the real entry point: `python -m graph_rma.cli cora --help` imports no torch
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "graph_rma.cli", "cora", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0 and "--variants SPEC [SPEC ...]" in r.stdout
    imported = {line.split("|")[-1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")}
    # (importlib.import_module, which loads the command's module, is not traced by -X importtime)
    assert "graph_rma.cli._common" in imported and not {m for m in imported if m.split(".")[0] == "torch"}


def test_graph_rma_alone_lists_the_commands_one_line_each(capsys):
    assert cli_main([]) == 0
    out = capsys.readouterr().out.splitlines()
    listed = {line.split()[0]: line.split(None, 1)[1] for line in out if line.startswith("  ")}
    assert set(listed) == set(commands()) == {"agenda", "cora", "node", "report", "score", "text", "webnlg"}
    assert listed["cora"].startswith("node classification with GAT")
    assert all("``" not in s and ":" not in s.split(" ")[0] for s in listed.values())


def test_every_option_has_help_and_shows_its_default_and_no_rest_markup():
    seen = 0
    for name, parser in _parsers():
        text = parser.format_help()
        for marker in ("``", ":class:", ":func:", ":mod:", ":meth:", "::"):
            assert marker not in text, (name, marker)
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            if action.help == argparse.SUPPRESS:  # a removed option kept to explain its removal
                assert name in ("cora", "node") and action.dest == "seed"
                continue
            assert action.help, (name, action.option_strings)
            seen += 1
            shown = parser._get_formatter()._get_help_string(action)
            if action.default not in (None, False) and action.option_strings:
                assert "(default: " in shown, (name, action.option_strings, shown)
            if action.default is None and not action.required and action.option_strings:
                assert "default" in shown, (name, action.option_strings, shown)  # says what happens without it
    assert seen > 100
    train = dict(_parsers())["agenda train"].format_help()
    # the presets show their values
    assert "cpu: hidden=128, layers=2" in " ".join(train.split()) and "full: hidden=500, layers=6" in " ".join(
        train.split()
    )


def test_task_defaults_match_their_sources():
    from graph_rma.data.nodes import NODE_DATASETS
    from graph_rma.data.text import DATASETS
    from graph_rma.engine import EarlyStopping
    from graph_rma.metrics.generation import METEOR_CHOICES, SCORERS
    from graph_rma.models.text import MODELS
    from graph_rma.tasks import agenda, node_classification, text_classification, webnlg

    assert defaults.NODE_DATASET_NAMES == NODE_DATASETS and defaults.TEXT_MODELS == MODELS
    assert defaults.TEXT_DATASETS == DATASETS and defaults.METEOR_CHOICES == METEOR_CHOICES
    assert defaults.SCORERS == SCORERS
    from graph_rma.tasks.protocols import STOPPING

    assert STOPPING == ("val_metric",) + EarlyStopping.RULES  # one list (graph_rma.kinds), read by both
    assert agenda.PRESETS is defaults.AGENDA_PRESETS and webnlg.PRESETS is defaults.WEBNLG_PRESETS
    assert node_classification.DEFAULT_VARIANTS is defaults.NODE_DEFAULT_VARIANTS
    assert text_classification.VARIANTS is defaults.TEXT_VARIANTS


def test_seeds_are_a_list_with_ranges():
    p = Parser(prog="t")
    from graph_rma.cli._common import add_seeds

    add_seeds(p, "0-2")
    assert p.parse_args(["--seeds", "0", "1", "5-7"]).seeds == [0, 1, 5, 6, 7]
    assert p.parse_args(["--seeds", "3"]).seeds == [3]  # one seed, not a count
    assert p.parse_args([]).seeds is None
    assert seed_list("0-9") == list(range(10))
    for bad in ("a", "-1", "3-1", "1-x"):
        with pytest.raises(argparse.ArgumentTypeError):
            seed_list(bad)


@pytest.fixture
def a_file(tmp_path):
    path = tmp_path / "results.txt"
    path.write_text("not a folder\n")
    return path


# Every case must fail on its own mistake before any data is read: the data root does not exist, so reading data
# would end with "missing ... under /nonexistent" (exit 1) instead.
MISTAKES = [
    (["cora", "--variants", "svdg:alpha=0.1"], "unknown part 'svdg'"),
    (["cora", "--variants", "ma", "svgd:alpha=-0.5"], "alpha='-0.5' in 'svgd:alpha=-0.5' must be >= 0"),
    (["cora", "--epochs", "0"], "--epochs: expected a positive integer, got '0'"),
    (["cora", "--seeds", "2-1"], "--seeds: expected seeds >= 0"),
    (["cora", "--seed", "3"], "--seed was removed: give the seeds themselves"),
    (["cora", "--out", "{file}"], "is a file, not a folder"),
    (["cora", "--out", "{file}/sub"], "which is a file, not a folder"),
    (["text", "--variants", "nope:x=1"], "unknown part 'nope'"),
    (["text", "--models", "lstm"], "unknown model 'lstm'"),
    (["text", "--datasets", "imdb"], "unknown dataset 'imdb'"),
    (["text", "--out", "{file}"], "is a file, not a folder"),
    (["agenda", "train", "--variant", "svdg:alpha=0.1"], "unknown part 'svdg'"),
    (["agenda", "train", "--variant", "svgd:alpha=-1"], "must be >= 0"),
    (["agenda", "train", "--epochs", "0"], "--epochs: expected a positive integer"),
    (["agenda", "train", "--batch-size", "0"], "--batch-size: expected a positive integer"),
    (["agenda", "train", "--out", "{file}"], "is a file, not a folder"),
    (
        ["agenda", "evaluate", "--out", "{empty}"],
        "no trained run in {empty}: run `graph-rma agenda train --out {empty}` first",
    ),
    (["agenda", "generate", "--out", "{empty}"], "no trained run in {empty}"),
    (["agenda", "heads", "--out", "{empty}"], "no trained run in {empty}"),
    (["webnlg", "train", "--variant", "spos:beta=0"], "beta='0' in 'spos:beta=0' must be > 0"),
    (["webnlg", "train", "--dropout", "1.5"], "--dropout: expected a probability in [0, 1)"),
    (
        ["webnlg", "evaluate", "--out", "{empty}"],
        "no trained run in {empty}: run `graph-rma webnlg train --out {empty}`",
    ),
    (["score", "--hyp", "{empty}/none.txt", "--ref", "{empty}/none.txt"], "--hyp {empty}/none.txt: No such file"),
    (["report", "--checkpoint", "{empty}/none.pt"], "--checkpoint: no such file"),
    (["report", "--checkpoint", "{file}", "--bins", "0"], "--bins: expected a positive integer"),
]


@pytest.mark.parametrize("argv, message", MISTAKES, ids=[" ".join(a[:3]) for a, _ in MISTAKES])
def test_a_user_mistake_is_one_line_and_exit_2(argv, message, tmp_path, a_file, monkeypatch, capsys):
    monkeypatch.setenv("GRAPH_RMA_DATA", "/nonexistent")
    empty = tmp_path / "empty"
    empty.mkdir()
    fill = {"file": str(a_file), "empty": str(empty)}
    assert cli_main([a.format(**fill) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert message.format(**fill) in err


@pytest.mark.parametrize("argv", [["agenda", "train"], ["webnlg", "train"], ["text", "--models", "selfattn"]])
def test_missing_data_is_one_line_and_exit_1(argv, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("GRAPH_RMA_DATA", str(tmp_path / "nodata"))
    assert cli_main([*argv, "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "missing" in err and str(tmp_path / "nodata") in err
    assert not (tmp_path / "nodata").exists()


def test_a_bug_still_shows_its_traceback(monkeypatch):
    def broken():
        raise KeyError("a bug")

    with pytest.raises(KeyError):
        run_command("graph-rma x", broken)
    assert run_command("graph-rma x", lambda: parse_variant("bad input")) == 2  # a mistake the package raised
    with pytest.raises(ValueError):  # one raised outside the package (here: this test) is not the user's mistake
        run_command("graph-rma x", lambda: (_ for _ in ()).throw(ValueError("bad input")))


def test_score_without_the_text_metrics_extra_is_one_line(tmp_path, monkeypatch, capsys):
    for name in ("hyp", "ref"):
        (tmp_path / f"{name}.txt").write_text("a b c\n")
    for name in [m for m in sys.modules if m.split(".")[0] == "pycocoevalcap"] + ["pycocoevalcap"]:
        monkeypatch.setitem(sys.modules, name, None)
    argv = [
        "score",
        "--hyp",
        str(tmp_path / "hyp.txt"),
        "--ref",
        str(tmp_path / "ref.txt"),
        "--meteor",
        "none",
        "--tokenize",
        "split",
    ]
    assert cli_main(argv) == 1
    err = capsys.readouterr().err
    assert err == "graph-rma score: BLEU needs pycocoevalcap: pip install 'graph-rma[text-metrics]'\n"


def test_default_run_folder_holds_the_variant(tmp_path, monkeypatch, capsys):
    """Without --out every variant trains into its own runs/agenda/<variant>; generate finds it by --variant."""
    from graph_rma.tasks.graph_to_text import run_folder

    monkeypatch.chdir(tmp_path)
    for spec in ("svgd:alpha=0.1", "svgd:alpha=1"):
        assert cli_main(["agenda", "train", "--root", str(FIXTURE), "--variant", spec, *TINY]) == 0
        printed = json.loads(capsys.readouterr().out.splitlines()[0])
        assert printed["variant"] == parse_variant(spec).spec and printed["out"] == str(run_folder("runs/agenda", spec))
        assert (
            json.loads((run_folder("runs/agenda", spec) / "config.json").read_text())["variant"]
            == parse_variant(spec).spec
        )
    assert len(list((tmp_path / "runs" / "agenda").iterdir())) == 2
    assert (
        cli_main(
            ["agenda", "generate", "--root", str(FIXTURE), "--variant", "svgd:alpha=1", "--quiet", "--max-len", "5"]
        )
        == 0
    )
    assert (run_folder("runs/agenda", "svgd:alpha=1") / "hyp.test.txt").is_file()
    assert not (run_folder("runs/agenda", "svgd:alpha=0.1") / "hyp.test.txt").exists()


def test_text_lists_are_words_and_a_comma_list_is_refused_naming_it(capsys):
    from graph_rma.cli.text import _parse

    args = _parse(["--variants", "svgd:alpha=1,eps=1", "ma", "--models", "selfattn", "--seeds", "0-2"])
    assert args.variants == ["svgd:alpha=1,eps=1", "ma"] and args.models == ["selfattn"] and args.seeds == [0, 1, 2]
    for argv, option, word in (
        (["--variants", "ma,svgd"], "--variants", "ma,svgd"),
        (["--models", "transformer,selfattn"], "--models", "transformer,selfattn"),
        (["--datasets", "trec,mr"], "--datasets", "trec,mr"),
    ):
        with pytest.raises(SystemExit) as exc:
            _parse(argv)
        err = capsys.readouterr().err
        assert exc.value.code == 2 and f"argument {option}" in err and word in err, err


def test_default_variants_follow_the_validated_settings(monkeypatch):
    """Without --variants the node benchmark runs plain heads and SVGD, with a graph's own validated SVGD setting
    where the where-it-helps study chose one (chameleon), the Cora one elsewhere; the text benchmark's named
    svgd/spos are the TREC-validated ones; SVGD() and the spec "svgd" have the same default strength."""
    import torch

    from graph_rma import SVGD
    from graph_rma.tasks import node_classification
    from graph_rma.tasks.text_classification import variant_spec

    seen = {}

    def fake_run_study(protocol, variants, seeds, out, **kw):
        seen[kw["dataset"]] = list(variants)
        return {"summary": [], "interrupted": False}

    monkeypatch.setattr(node_classification, "run_study", fake_run_study)
    for dataset in ("cora", "chameleon", "texas"):
        assert cli_main(["cora", "--dataset", dataset, "--seeds", "0", "--no-plot"]) == 0
    assert seen["cora"] == seen["texas"] == ["ma", defaults.CORA_SVGD_SPEC]
    assert seen["chameleon"] == ["ma", "svgd:alpha=0.1,eps=8"]
    assert defaults.node_default_variants("chameleon", full=True)[3] == "svgd:alpha=0.1,eps=8"
    assert (
        variant_spec("selfattn", "svgd") == variant_spec("transformer", "svgd") == "svgd:alpha=0.01,kernel_grad=false"
    )
    assert variant_spec("transformer", "spos") == "spos:alpha=0.01,beta=100000"
    model = torch.nn.MultiheadAttention(8, 4)
    assert SVGD(model).alpha == parse_variant("svgd").alpha == 0.1


# ---- issue 32: output folders that cannot be written, help texts, empty folders, printed scores ---------------
@pytest.mark.parametrize(
    "argv",
    [
        ["cora", "--out", "{ro}/runs"],
        ["node", "--dataset", "chameleon", "--out", "{ro}/runs"],
        ["text", "--out", "{ro}/runs"],
        ["agenda", "train", "--out", "{ro}/runs"],
        ["webnlg", "evaluate", "--out", "{ro}"],
        ["report", "--checkpoint", "{file}", "--out", "{ro}/report"],
        ["score", "--hyp", "{file}", "--ref", "{file}", "--json", "{ro}/scores.json"],
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_an_output_folder_that_cannot_be_written_is_refused_before_any_data_is_read(
    argv, unwritable, a_file, monkeypatch, capsys
):
    """It used to be found after training (cora, node, report, agenda) or after the scores were printed (score)."""
    monkeypatch.setenv("GRAPH_RMA_DATA", "/nonexistent")  # reading data would end in "missing ..." (exit 1)
    argv = [a.format(ro=unwritable, file=a_file) for a in argv]
    assert cli_main(argv) == 2
    printed = capsys.readouterr()
    assert printed.err.count("\n") == 1 and "Traceback" not in printed.err and printed.out == ""
    assert "not writable" in printed.err and str(unwritable) in printed.err, printed.err


@pytest.mark.parametrize(
    "argv", [["cora"], ["agenda", "train"], ["report", "--checkpoint", "{checkpoint}"]], ids=lambda a: " ".join(a[:2])
)
def test_a_default_output_folder_that_cannot_be_written_is_refused_too(argv, unwritable, monkeypatch, capsys):
    """Without --out the command's own folder (runs/<dataset>, runs/agenda/<variant>, beside the checkpoint) is
    checked the same way: here the working folder (or the checkpoint's) cannot be written."""
    checkpoint = unwritable / "model.pt"
    if unwritable == Path("/proc/sys"):  # root: a file of /proc/sys stands for a checkpoint in a read-only folder
        checkpoint = Path("/proc/sys/kernel/hostname")
    else:
        mode = unwritable.stat().st_mode
        unwritable.chmod(0o700)
        checkpoint.write_bytes(b"not read: the output folder is refused first")
        unwritable.chmod(mode)
    monkeypatch.setenv("GRAPH_RMA_DATA", "/nonexistent")
    monkeypatch.chdir(unwritable)
    assert cli_main([a.format(checkpoint=checkpoint) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--out: " in err and "not writable" in err, err


def test_a_failing_command_leaves_no_empty_output_folder(tmp_path, monkeypatch, capsys):
    """`graph-rma text --heads 3` used to create runs/text, then fail (after reading the data) on the Transformer's
    width; the bad size is now refused first, and nothing is created."""
    monkeypatch.setenv("GRAPH_RMA_DATA", "/nonexistent")
    monkeypatch.chdir(tmp_path)
    assert cli_main(["text", "--heads", "3", "--models", "transformer"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "heads: the Transformer's width 64 must split evenly" in err
    assert list(tmp_path.iterdir()) == []


def test_score_help_shows_the_entity_separator_default_once():
    text = " ".join(dict(_parsers())["score"].format_help().split())
    assert text.count("(default: ;)") == 1 and "default: ';'" not in text and "(default ;" not in text


def test_no_option_states_its_default_twice():
    """An option whose help already says ``(default: X)`` gets no second one from the formatter (``webnlg evaluate
    --scorer`` showed "(default: coco) (default: coco)")."""
    twice = []
    for name, parser in _parsers():
        formatter = parser._get_formatter()
        for action in parser._actions:
            if action.help and formatter._get_help_string(action).count("(default:") > 1:
                twice.append(f"{name} {'/'.join(action.option_strings) or action.dest}")
    assert not twice, twice


@pytest.mark.parametrize("name", ["agenda", "webnlg"])
def test_subcommand_help_does_not_repeat_the_commands_page(name):
    parsers = dict(_parsers())
    page = parsers[name].format_help()
    for sub in ("train", "generate", "evaluate") + (("heads",) if name == "agenda" else ()):
        text = parsers[f"{name} {sub}"].format_help()
        assert "\nExamples:\n" in page and "\nExamples:\n" not in text and "train    --preset full" not in text, sub
        assert f"graph-rma {name} --help" in text or sub == "heads", sub


def test_evaluate_prints_scores_rounded_and_keeps_every_digit_in_its_file(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    assert cli_main(["agenda", "train", "--root", str(FIXTURE), "--out", str(out), *TINY]) == 0
    train_line = json.loads(capsys.readouterr().out.splitlines()[0])
    assert train_line["best_dev_loss"] == round(train_line["best_dev_loss"], 4)
    assert (
        cli_main(
            [
                "agenda",
                "evaluate",
                "--root",
                str(FIXTURE),
                "--out",
                str(out),
                "--meteor",
                "none",
                "--quiet",
                "--max-len",
                "5",
            ]
        )
        == 0
    )
    printed = json.loads(capsys.readouterr().out)
    saved = json.loads((out / "metrics.test.json").read_text())

    def floats(obj):
        if isinstance(obj, float):
            yield obj
        elif isinstance(obj, dict):
            for v in obj.values():
                yield from floats(v)

    assert list(floats(printed)) and all(v == round(v, 2) for v in floats(printed))
    assert [round(v, 2) for v in floats(saved)] == list(floats(printed))
    assert any(v != round(v, 2) for v in floats(saved))  # the file keeps every digit


def test_score_mistakes_and_missing_resources_are_one_line(tmp_path, capsys, monkeypatch):
    from graph_rma.cli import main

    (tmp_path / "h.txt").write_text("a b\n")
    (tmp_path / "folder").mkdir()
    h = str(tmp_path / "h.txt")
    assert main(["score", "--hyp", h, "--ref", h, "--meteor", "none", "--json", str(tmp_path / "folder")]) == 2
    err = capsys.readouterr().err.strip()
    assert "is a folder, not a file" in err and len(err.splitlines()) == 1
    # without the NLTK data: one line that says where it was looked for, exit 1, no traceback
    monkeypatch.delenv("GRAPH_RMA_DATA", raising=False)
    monkeypatch.setenv("NLTK_DATA", str(tmp_path / "nowhere"))
    import nltk

    monkeypatch.setattr(nltk.data, "path", [str(tmp_path / "nowhere")])
    assert main(["score", "--hyp", h, "--ref", h, "--meteor", "none", "--tokenize", "nltk"]) == 1
    err = capsys.readouterr().err.strip()
    assert "punkt_tab" in err and "Traceback" not in err and len(err.splitlines()) == 1


@pytest.mark.slow  # real-data training (Cora): left out of make test-fast
def test_filesystem_failures_are_one_line_naming_the_users_path(tmp_path, capsys, monkeypatch):
    from conftest import PLANETOID

    from graph_rma.cli import main
    from graph_rma.engine import slug

    if not (PLANETOID / "Cora" / "raw").is_dir():
        pytest.skip("needs the Cora raw files")
    out = tmp_path / "out"
    (out / "checkpoints" / f"{slug('ma')}_seed0.pt").mkdir(parents=True)  # a folder where the checkpoint goes
    assert (
        main(
            [
                "cora",
                "--seeds",
                "0",
                "--epochs",
                "1",
                "--variants",
                "ma",
                "--out",
                str(out),
                "--no-plot",
                "--root",
                str(PLANETOID),
            ]
        )
        == 1
    )
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.endswith(f"is a folder, not a file: {out / 'checkpoints' / (slug('ma') + '_seed0.pt')}")


@pytest.mark.slow  # real-data training (Cora): left out of make test-fast
def test_an_output_folder_on_a_virtual_file_system_is_one_line(capsys):
    from conftest import PLANETOID

    from graph_rma.cli import main

    if not (PLANETOID / "Cora" / "raw").is_dir() or not __import__("os").path.isdir("/proc/self"):
        pytest.skip("needs the Cora raw files and /proc")
    code = main(
        [
            "cora",
            "--seeds",
            "0",
            "--epochs",
            "1",
            "--variants",
            "ma",
            "--out",
            "/proc/self/graph_rma_out",
            "--no-plot",
            "--root",
            str(PLANETOID),
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()[-1]
    # 2: refused as not writable when the command line is read (os.access says so: not for root, who may write
    # there as far as permissions go); 1: the write itself failed
    assert code in (1, 2) and err.startswith("graph-rma cora: ") and "/proc/self/graph_rma_out" in err


def test_version_flag_prints_the_installed_version(capsys):
    from importlib.metadata import version

    assert cli_main(["--version"]) == 0
    assert capsys.readouterr().out == f"graph-rma {version('graph-rma')}\n"


@pytest.mark.slow
def test_a_stopped_train_ends_in_one_line_with_exit_status_130_and_the_same_command_continues(
    tmp_path, monkeypatch, capsys
):
    """A real SIGINT during the second training step: the trainer saves that step, the command prints where (no
    traceback) and returns 130; the same command then finishes the run. Stopped before anything is saved, it says
    the run starts again."""
    import signal

    import torch

    out = tmp_path / "run"
    argv = ["agenda", "train", "--root", str(FIXTURE), "--out", str(out), *TINY]
    real_step, steps = torch.optim.Adam.step, []

    def step_with_ctrl_c(self, *args, **kwargs):
        steps.append(1)
        if len(steps) == 2:
            signal.raise_signal(signal.SIGINT)
        return real_step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.Adam, "step", step_with_ctrl_c)
    assert cli_main(argv) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"interrupted: saved in {out / 'checkpoint.pt'}; the same command continues from there"
    assert "Traceback" not in "\n".join(err)
    monkeypatch.setattr(torch.optim.Adam, "step", real_step)
    assert cli_main(argv) == 0 and (out / "train.json").is_file()

    def ctrl_c_at_once(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(torch.optim.Adam, "step", ctrl_c_at_once)
    fresh = tmp_path / "fresh"
    assert cli_main(["agenda", "train", "--root", str(FIXTURE), "--out", str(fresh), *TINY]) == 130
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert (
        last == f"interrupted before the first save ({fresh / 'checkpoint.pt'}); the same command starts the run again"
    )
