"""What a user installing the package gets: version, licence, citation metadata."""

import re
from importlib.metadata import version

from conftest import REPO

from graph_rma.cli import main as cli_main


def _pyproject(key: str) -> str:
    return re.search(rf'^{key} = "([^"]+)"', (REPO / "pyproject.toml").read_text(), re.M).group(1)


def test_version_flag_prints_the_installed_version(capsys):
    assert cli_main(["--version"]) == 0
    assert capsys.readouterr().out == f"graph-rma {version('graph-rma')}\n"


def test_license_is_the_declared_mit_licence():
    assert _pyproject("license") == "MIT"
    text = (REPO / "LICENSE").read_text()
    assert text.startswith("MIT License\n\nCopyright (c) ") and "graph_rma contributors" in text.splitlines()[2]
    assert 'THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND' in text


def test_citation_cites_the_package_and_both_papers():
    text = (REPO / "CITATION.cff").read_text()
    assert text.startswith("cff-version: 1.2.0\n")
    assert re.search(r"^version: (\S+)$", text, re.M).group(1) == _pyproject("version")
    assert re.search(r"^license: (\S+)$", text, re.M).group(1) == _pyproject("license")
    titles = re.findall(r'^  - type: \S+\n    title: "([^"]+)"', text, re.M)
    assert titles == [
        "Repulsive Attention: Rethinking Multi-head Attention as Bayesian Inference",
        "DropAttention: A Regularization Method for Fully-Connected Self-Attention Networks",
    ]
    assert "doi: 10.18653/v1/2020.emnlp-main.17" in text and '"arXiv:1907.11065"' in text
