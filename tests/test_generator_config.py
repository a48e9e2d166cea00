"""graph_rma.tasks.generator_config: the graph-to-text configuration as one dataclass (issue 33 item 1). Its fields
are the ``train`` options of ``graph-rma agenda`` / ``webnlg`` (and a new field becomes one by itself), every preset
validates and is the mapping the trainer always took, a bad value is one line naming the field, and runs saved with
the old dict configuration load and resume with a missing setting at its default."""

import dataclasses
import math

import pytest
from conftest import REPO

from graph_rma.cli import _generator
from graph_rma.cli import main as cli_main
from graph_rma.tasks import defaults
from graph_rma.tasks.generator_config import (
    AGENDA_CONFIGS,
    DECODING_FIELDS,
    OPTIONAL_FIELDS,
    REQUIRED_FIELDS,
    WEBNLG_CONFIGS,
    GeneratorConfig,
    generator_fields,
    resolve_config,
    saved_config,
)

FIXTURE = REPO / "datasets" / "fixtures" / "agenda_tiny"
#: runs/webnlg2017/ma-s0/config.json's "config", as the dict configuration of the previous version saved it
SAVED_WEBNLG2017 = {
    "hidden": 256,
    "layers": 3,
    "heads": 4,
    "dropout": 0.3,
    "attention_dropout": 0.1,
    "decoder_heads": 4,
    "epochs": 30,
    "batch_size": 32,
    "optimizer": "adam",
    "lr": 0.001,
    "momentum": 0.9,
    "clip": 1.0,
    "min_freq": 2,
    "max_target_len": None,
    "beam": 5,
    "max_len": 80,
    "length_penalty": 1.0,
    "lr_schedule": {"kind": "plateau", "factor": 0.5, "patience": 0, "min_lr": 1e-05},
}


def _train_parser(name="webnlg"):
    module = __import__(f"graph_rma.cli.{name}", fromlist=["_parser"])
    sub = next(a for a in module._parser()._actions if a.dest == "cmd")
    return sub.choices


# ---- the command line's options are the dataclass's fields -------------------------------------------------------
@pytest.mark.parametrize("name", ["agenda", "webnlg"])
def test_every_field_is_a_train_option_and_every_setting_option_a_field(name):
    """``train`` has one option per field (all but ``lr_schedule``, a dict), with the field's help and the argument
    check of its kind; ``generate`` / ``evaluate`` take the decoding fields over the run's."""
    subparsers = _train_parser(name)
    train = {a.dest: a for a in subparsers["train"]._actions}
    for f in generator_fields():
        if f.name in ("lr_schedule",):
            assert f.name not in train and not f.metadata["option"]
            continue
        action = train[f.name]
        assert action.option_strings == ["--" + f.name.replace("_", "-")] and action.default is None
        assert action.help == f.metadata["help"] + " (default: the preset's)"
        if f.metadata["kind"] == "choice":
            assert tuple(action.choices) == f.metadata["choices"]
    settings = {f.name for f in generator_fields()}
    others = {"help", "variant", "out", "root", "quiet", "device", "threads", "protocol", "preset", "seed", "max_train"}
    others |= {"max_dev", "save_every", "evaluate"}
    assert set(train) - others == settings - {"lr_schedule"}
    for cmd in ("generate", "evaluate"):
        actions = {a.dest: a for a in subparsers[cmd]._actions}
        for key in DECODING_FIELDS:
            assert actions[key].help.endswith("(default: the run's)") and actions[key].default is None


def test_the_options_given_are_put_over_the_preset_and_nothing_else():
    args = _train_parser()["train"].parse_args(
        ["--preset", "full", "--decoder-heads", "2", "--optimizer", "adam", "--max-target-len", "50"]
    )
    config = _generator.preset_config(args, defaults.WEBNLG_PRESETS)
    assert config == {**defaults.WEBNLG_PRESETS["full"], "decoder_heads": 2, "optimizer": "adam", "max_target_len": 50}
    assert (
        _generator.preset_config(_train_parser()["train"].parse_args([]), defaults.WEBNLG_PRESETS)
        == (defaults.WEBNLG_PRESETS["cpu"])
    )


def test_a_new_field_becomes_a_train_option_by_itself(monkeypatch, capsys):
    """A field added to the dataclass (with its metadata) is an option of both ``train`` commands with nothing
    else written: its help, its kind's argument check, its choices."""
    from graph_rma.tasks import config_fields

    @dataclasses.dataclass(frozen=True)
    class Extended(GeneratorConfig):
        warmup: int = config_fields.config_field(5, "positive_int", "optimizer steps of learning-rate warm-up")
        label_smoothing: float = config_fields.config_field(0.0, "probability", "label smoothing of the loss")
        tie: str = config_fields.config_field("none", "choice", "tie the embeddings", ("none", "decoder", "all"))

    monkeypatch.setattr(_generator, "generator_fields", lambda: list(dataclasses.fields(Extended)))
    for name in ("agenda", "webnlg"):
        parser = _train_parser(name)["train"]
        args = parser.parse_args(["--warmup", "3", "--label-smoothing", "0.1", "--tie", "all"])
        assert (args.warmup, args.label_smoothing, args.tie) == (3, 0.1, "all")
        text = " ".join(parser.format_help().split())
        assert "--warmup WARMUP optimizer steps of learning-rate warm-up (default: the preset's)" in text
        assert "--tie {none,decoder,all}" in text
        with pytest.raises(SystemExit):
            parser.parse_args(["--warmup", "0"])
        assert "argument --warmup: expected a positive integer, got '0'" in capsys.readouterr().err


# ---- presets -------------------------------------------------------------------------------------------------------
def test_every_preset_validates_and_is_the_mapping_the_trainer_always_took():
    for configs, presets in ((AGENDA_CONFIGS, defaults.AGENDA_PRESETS), (WEBNLG_CONFIGS, defaults.WEBNLG_PRESETS)):
        assert list(configs) == list(presets)
        for name, config in configs.items():
            mapping = presets[name]
            assert GeneratorConfig.from_mapping(mapping) == config and resolve_config(mapping) == mapping
            assert list(mapping)[: len(REQUIRED_FIELDS)] == list(REQUIRED_FIELDS)  # the order --help shows
            assert set(mapping) - set(REQUIRED_FIELDS) == ({"lr_schedule"} if config.lr_schedule else set())
    # the values the dict presets had (GraphWriter's configuration; the challenge preset)
    full = AGENDA_CONFIGS["full"]
    assert (full.hidden, full.layers, full.heads, full.optimizer, full.lr, full.momentum, full.min_freq) == (
        500,
        6,
        4,
        "sgd",
        0.1,
        0.9,
        5,
    )
    assert dataclasses.replace(full, min_freq=2, max_len=100) == WEBNLG_CONFIGS["full"]
    assert defaults.WEBNLG_PRESETS["webnlg2017"] == SAVED_WEBNLG2017
    assert GeneratorConfig().to_dict() == defaults.AGENDA_PRESETS["cpu"]


# ---- one line naming the field ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "changes, message",
    [
        ({"hidden": 0}, "hidden: expected a positive integer, got 0"),
        ({"heads": True}, "heads: expected a positive integer, got True"),
        ({"min_freq": 0.5}, "min_freq: expected a positive integer, got 0.5"),
        ({"max_target_len": 0}, "max_target_len: expected None or a positive integer, got 0"),
        ({"dropout": 1.0}, r"dropout: expected a probability in \[0, 1\), got 1.0"),
        ({"lr": 0.0}, "lr: expected a finite number > 0, got 0.0"),
        ({"clip": -1.0}, "clip: expected a finite number >= 0, got -1.0"),
        ({"length_penalty": math.nan}, "length_penalty: expected a finite number, got nan"),
        ({"no_repeat_ngram": -1}, "no_repeat_ngram: expected an integer >= 0, got -1"),
        ({"no_repeat_ngram": 2.0}, "no_repeat_ngram: expected an integer >= 0, got 2.0"),
        ({"label_smoothing": 1.0}, r"label_smoothing: expected a probability in \[0, 1\), got 1.0"),
        ({"keep": "dev_rouge"}, r"keep: expected one of \('dev_loss', 'dev_bleu'\), got 'dev_rouge'"),
        ({"optimizer": "adagrad"}, r"optimizer: expected one of \('adam', 'sgd'\), got 'adagrad'"),
        ({"lr_schedule": {"kind": "cosine"}}, "lr_schedule: expected None or a dict with kind in"),
        ({"colour": 1}, "config: unknown setting colour"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_field(changes, message):
    with pytest.raises(ValueError, match="^" + message) as info:
        resolve_config(defaults.AGENDA_PRESETS["cpu"], changes)
    assert "\n" not in str(info.value)


def test_a_missing_setting_of_a_users_configuration_is_refused():
    with pytest.raises(ValueError, match="^config: missing hidden, beam$"):
        GeneratorConfig.from_mapping({k: v for k, v in SAVED_WEBNLG2017.items() if k not in ("hidden", "beam")})
    without = {k: v for k, v in SAVED_WEBNLG2017.items() if k != "lr_schedule"}
    assert GeneratorConfig.from_mapping(without).lr_schedule is None  # optional: absent = off


def test_the_command_line_refuses_a_value_its_option_type_lets_through(tmp_path, capsys):
    """``--length-penalty nan`` parses as a float; the dataclass refuses it, in one line, before any data is read."""
    out = tmp_path / "run"
    argv = ["webnlg", "train", "--root", str(tmp_path / "none"), "--out", str(out), "--length-penalty", "nan"]
    assert cli_main(argv) == 2
    assert capsys.readouterr().err == "graph-rma webnlg: length_penalty: expected a finite number, got nan\n"
    assert not out.exists()


# ---- runs saved with the old dict configuration --------------------------------------------------------------------
def test_old_saved_configurations_load_with_missing_settings_at_their_defaults():
    assert saved_config(SAVED_WEBNLG2017) == SAVED_WEBNLG2017 == defaults.WEBNLG_PRESETS["webnlg2017"]
    old = {k: v for k, v in SAVED_WEBNLG2017.items() if k != "lr_schedule"}  # saved before the schedule existed
    assert saved_config(old) == old and saved_config({**old, "lr_schedule": None}) == old
    older = {k: v for k, v in old.items() if k not in ("decoder_heads", "length_penalty")}
    assert saved_config(older) == {**old, "decoder_heads": 4, "length_penalty": 1.0}  # the dataclass's defaults
    assert list(saved_config(older)) == list(old)
    with pytest.raises(ValueError, match="^config: unknown setting colour"):
        saved_config({**old, "colour": 1})
    assert OPTIONAL_FIELDS == ("no_repeat_ngram", "keep", "lr_schedule", "label_smoothing", "coverage_reward")
    # a configuration that leaves an optional decoding setting off is the mapping it always was (the running runs
    # resume)
    assert GeneratorConfig.from_mapping(old).to_dict() == old
    assert GeneratorConfig.from_mapping({**old, "no_repeat_ngram": 3}).to_dict()["no_repeat_ngram"] == 3
    assert GeneratorConfig.from_mapping({**old, "coverage_reward": 0.5}).to_dict()["coverage_reward"] == 0.5
    with pytest.raises(ValueError, match="coverage_reward"):
        GeneratorConfig.from_mapping({**old, "coverage_reward": -1.0})


def test_a_run_saved_without_a_setting_resumes_with_it_at_its_default(tmp_path, capsys):
    """The trainer reads a checkpoint's configuration as the dataclass does: a run whose saved configuration lacks a
    setting (saved before it existed) resumes when the new one has the default, and is refused otherwise."""
    from graph_rma.engine import ResumeMismatchError, load_checkpoint, save_checkpoint
    from graph_rma.tasks import agenda

    small = dict(AGENDA_CONFIGS["cpu"].to_dict(), hidden=16, layers=1, heads=2, decoder_heads=2, epochs=1, batch_size=4)
    small.update(min_freq=1, beam=1, max_len=5)
    out = tmp_path / "run"
    assert agenda.train(dict(small), out, FIXTURE, seed=0, stop_after=1, progress=False)["stopped"]
    ckpt = load_checkpoint(out / "checkpoint.pt")
    ckpt["config"] = {k: v for k, v in ckpt["config"].items() if k != "momentum"}  # as an older version saved it
    save_checkpoint(out / "checkpoint.pt", ckpt)
    with pytest.raises(ResumeMismatchError, match=r"momentum 0.9 -> 0.5"):
        agenda.train(dict(small, momentum=0.5), out, FIXTURE, seed=0, progress=False)
    summary = agenda.train(dict(small, lr_schedule=None), out, FIXTURE, seed=0, progress=False)
    assert summary["steps"] > 1 and load_checkpoint(out / "checkpoint.pt")["config"] == small
