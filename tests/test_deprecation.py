"""Names that say what they are (issue 33 item 6): every renamed public name still works for one release, with a
DeprecationWarning, and gives the very object of its new name; the package itself uses only the new names."""

import ast
import importlib
import pickle
import warnings
from pathlib import Path

import pytest
import torch
from conftest import REPO

from graph_rma.tasks.defaults import CORA_DROPATTN_SPEC, CORA_SPOS_SPEC, CORA_SVGD_SPEC


def _old(module: str, name: str):
    """``module.name`` (an old name), asserting that it warns once, naming its new home."""
    mod = importlib.import_module(module)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = getattr(mod, name)
    assert len(caught) == 1 and caught[0].category is DeprecationWarning, [str(w.message) for w in caught]
    assert f"{module}.{name} is deprecated" in str(caught[0].message)
    assert caught[0].filename == __file__  # points at the caller, not at the package
    return value


def _new(target: str):
    module, name = target.split(":")
    return getattr(importlib.import_module(module), name)


RENAMED = [
    # the node benchmark's spec strings (SVGD & co. are also the sampler classes)
    *[
        (module, old, f"graph_rma.tasks.defaults:CORA_{old}_SPEC")
        for module in ("graph_rma.tasks.defaults", "graph_rma.tasks.node_classification")
        for old in ("MA", "REG", "SGLD", "SVGD", "SPOS", "DROPATTN")
    ],
    # the Cora model shadowed PyG's GAT, whose positional arguments differ
    ("graph_rma.models", "GAT", "graph_rma.models:TwoLayerGAT"),
    ("graph_rma.models.gat", "GAT", "graph_rma.models.gat:TwoLayerGAT"),
    # the report in one place
    ("graph_rma.diagnostics", "node_classification_report", "graph_rma.tasks.report:node_classification_report"),
    ("graph_rma.diagnostics.report", "node_classification_report", "graph_rma.tasks.report:node_classification_report"),
    # the edges' CSR is no "layout" (the heads' slices are)
    ("graph_rma.nn.lean", "EdgeLayout", "graph_rma.nn.lean:EdgeCSR"),
    ("graph_rma.nn.lean", "edge_layout", "graph_rma.nn.lean:edge_csr"),
    ("graph_rma.nn.lean", "LayoutCache", "graph_rma.nn.lean:CSRCache"),
    ("graph_rma.nn.lean", "share_layout_cache", "graph_rma.nn.lean:share_csr_cache"),
    ("graph_rma.nn.lean", "cached_layout", "graph_rma.nn.lean:cached_csr"),
    ("graph_rma.nn.lean.csr", "EdgeLayout", "graph_rma.nn.lean.csr:EdgeCSR"),
    ("graph_rma.nn.lean.csr", "edge_layout", "graph_rma.nn.lean.csr:edge_csr"),
    ("graph_rma.nn.lean.cache", "LayoutCache", "graph_rma.nn.lean.cache:CSRCache"),
    ("graph_rma.nn.lean.cache", "share_layout_cache", "graph_rma.nn.lean.cache:share_csr_cache"),
    ("graph_rma.nn.lean.layers", "cached_layout", "graph_rma.nn.lean.layers:cached_csr"),
    ("graph_rma.nn.lean.functions", "layout_for", "graph_rma.nn.lean.functions:csr_for"),
    ("graph_rma.nn.edge_layout", "EdgeLayout", "graph_rma.nn.lean:EdgeCSR"),
    ("graph_rma.nn.edge_layout", "edge_layout", "graph_rma.nn.lean:edge_csr"),
]


@pytest.mark.parametrize("module,old,new", RENAMED, ids=[f"{m}.{o}" for m, o, _ in RENAMED])
def test_an_old_name_warns_and_is_the_new_object(module, old, new):
    assert _old(module, old) is _new(new)


def test_old_names_also_import_and_unknown_names_still_fail():
    with pytest.warns(DeprecationWarning, match="CORA_SVGD_SPEC"):
        from graph_rma.tasks.node_classification import SVGD
    assert SVGD == CORA_SVGD_SPEC == "svgd:alpha=0.01,eps=8,roles=att_src/att_dst"
    with pytest.warns(DeprecationWarning, match="TwoLayerGAT"):
        from graph_rma.models import GAT
    from graph_rma.models import TwoLayerGAT

    assert GAT is TwoLayerGAT and isinstance(GAT(4, 2), TwoLayerGAT)
    import graph_rma.models
    import graph_rma.tasks.defaults

    for module in (graph_rma.tasks.defaults, graph_rma.models):
        with pytest.raises(AttributeError, match="has no attribute 'NOPE'"):
            module.NOPE
    with pytest.raises(AttributeError):
        graph_rma.models.gat_model


def test_the_spec_strings_are_unchanged():
    from graph_rma.tasks import defaults

    assert defaults.NODE_DEFAULT_VARIANTS == ["ma", CORA_SVGD_SPEC]
    assert defaults.NODE_FULL_VARIANTS[-2:] == [CORA_SPOS_SPEC, CORA_DROPATTN_SPEC]
    assert defaults.node_default_variants("chameleon") == ["ma", "svgd:alpha=0.1,eps=8"]


def test_a_layers_layout_cache_is_its_csr_cache_with_a_warning():
    from graph_rma.nn import GraphTransformerLayer, RepulsiveGATConv, RepulsiveGATv2Conv
    from graph_rma.nn.lean import CSRCache

    for layer in (RepulsiveGATConv(4, 2, heads=2, lean=True), RepulsiveGATv2Conv(4, 2), GraphTransformerLayer(4, 2)):
        with pytest.warns(DeprecationWarning, match="csr_cache"):
            assert layer.layout_cache is layer.csr_cache
        other = CSRCache()
        with pytest.warns(DeprecationWarning, match="csr_cache"):
            layer.layout_cache = other
        assert layer.csr_cache is other and "layout_cache" not in vars(layer)
        # a layer pickled before the rename kept its cache as layout_cache: it comes back as csr_cache
        state = dict(vars(layer))
        state["layout_cache"] = state.pop("csr_cache")
        old = type(layer).__new__(type(layer))
        old.__setstate__(state)
        assert isinstance(old.csr_cache, CSRCache) and "layout_cache" not in vars(old)
        assert isinstance(pickle.loads(pickle.dumps(layer)).csr_cache, CSRCache)


def test_the_layout_keyword_still_works_with_a_warning():
    from graph_rma.nn.lean import edge_aggregate, edge_csr

    src, dst = torch.tensor([0, 1, 2, 2]), torch.tensor([1, 2, 0, 1])
    w, x = torch.rand(4, 2), torch.rand(3, 2, 3)
    csr = edge_csr(src, dst, 3, 3)
    want = edge_aggregate(w, x, src, dst, 3, csr=csr)
    with pytest.warns(DeprecationWarning, match=r"edge_aggregate\(layout=...\)"):
        got = edge_aggregate(w, x, src, dst, 3, layout=csr)
    torch.testing.assert_close(got, want)
    with pytest.raises(TypeError, match="both layout= and its new name csr="):
        edge_aggregate(w, x, src, dst, 3, layout=csr, csr=csr)


def test_early_stopping_holds_the_metric_under_its_name():
    from graph_rma.engine import EarlyStopping

    stopper = EarlyStopping("val_auc", patience=2)
    stopper.update(0.7, 1.0)
    assert stopper.best_metric == stopper.metric_max == 0.7
    with pytest.warns(DeprecationWarning, match="best_metric"):
        assert stopper.best_acc == 0.7
    with pytest.warns(DeprecationWarning, match="metric_max"):
        assert stopper.acc_max == 0.7


def test_node_runs_saved_with_the_old_metric_keys_read_as_the_new_ones():
    """test_acc held ROC AUC on binary graphs: runs and summary rows say test_metric now, and every reader takes
    the runs and rows saved before (resume, summarize, format_table, the report's training metrics)."""
    from graph_rma.tasks.node_classification import format_table, summarize, upgrade_metrics

    new = [
        {
            "variant": v,
            "seed": s,
            "metrics": {
                "test_metric": 0.5 + 0.1 * s + (0.05 if v == "b" else 0),
                "val_metric": 0.6,
                "val_loss": 1.0,
                "dist": None,
                "epochs": 10,
                "sec_per_epoch": 0.1,
                "metric": "roc_auc",
            },
        }
        for v in ("a", "b")
        for s in (0, 1)
    ]
    old = [
        {
            **r,
            "metrics": {
                {"test_metric": "test_acc", "val_metric": "val_acc"}.get(k, k): x for k, x in r["metrics"].items()
            },
        }
        for r in new
    ]
    assert "test_acc" in old[0]["metrics"] and upgrade_metrics(old[0]["metrics"]) == new[0]["metrics"]
    rows = summarize(new, ["a", "b"])
    assert rows == summarize(old, ["a", "b"]) and "test_metric_mean" in rows[0] and "test_acc_mean" not in rows[0]
    assert rows[1]["paired_mean"] == pytest.approx(5.0)
    old_rows = [{k.replace("_metric_", "_acc_"): x for k, x in r.items()} for r in rows]
    assert "test_acc_mean" in old_rows[0] and format_table(old_rows, "roc_auc") == format_table(rows, "roc_auc")
    assert list(upgrade_metrics(old_rows[0])) == list(rows[0])  # the order (results.csv's columns) is kept
    # code that reads the old keys of new results still works, with a warning, for one release
    with pytest.warns(DeprecationWarning, match="key 'test_metric_mean'"):
        assert rows[0]["test_acc_mean"] == rows[0]["test_metric_mean"]
    with pytest.warns(DeprecationWarning, match="'val_metric'"):
        assert upgrade_metrics(new[0]["metrics"]).get("val_acc") == 0.6
    assert upgrade_metrics({}).get("test_acc") is None and type(dict(rows[0])) is dict
    with pytest.raises(KeyError):
        rows[0]["nope"]


def test_the_report_lives_in_one_place():
    """The checkpoint report: the registry, the checkpoint and model reports, the comparison and the printed lines
    are graph_rma.tasks.report; the command only parses its arguments."""
    from graph_rma.tasks import report

    for name in ("report_checkpoint", "node_classification_report", "compare_reports", "format_report"):
        assert callable(getattr(report, name)) and name in report.__all__
    cli = (REPO / "src" / "graph_rma" / "cli" / "report.py").read_text()
    assert "def " not in cli.replace("def build_parser", "").replace("def _run", "").replace("def main", "")
    assert "from .report import" not in (REPO / "src" / "graph_rma" / "diagnostics" / "__init__.py").read_text()


OLD_NAMES = {
    "EdgeLayout",
    "edge_layout",
    "LayoutCache",
    "share_layout_cache",
    "cached_layout",
    "layout_for",
    "layout_cache",
    "GAT",
    "best_acc",
    "acc_max",
}
OLD_SPECS = {"MA", "REG", "SGLD", "SVGD", "SPOS", "DROPATTN"}
OLD_KEYS = {"test_acc", "val_acc", "test_acc_mean", "test_acc_std", "val_acc_mean", "val_acc_std"}


def _old_uses(path: Path):
    """Uses of old names in the code of ``path`` (not in its strings, its deprecation mappings or the deprecated
    properties themselves): names, attributes, imports, keyword arguments, and old metric keys as subscripts or
    dict keys. The text task's ``test_acc`` (accuracy, always) is its own and not an old name."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name in OLD_NAMES:  # the deprecated property and its setter
            skip |= {id(n) for d in node.decorator_list for n in ast.walk(d)}
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "renamed_keywords":  # the old keyword
            skip |= {id(n) for n in ast.walk(node)}
    text_task = path.name == "text_classification.py"
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Name) and node.id in OLD_NAMES:
            yield node.lineno, node.id
        elif isinstance(node, ast.Attribute) and (
            node.attr in OLD_NAMES
            or node.attr in OLD_SPECS
            and isinstance(node.value, ast.Name)
            and node.value.id == "defaults"
        ):
            yield node.lineno, node.attr
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name in OLD_NAMES or alias.name in OLD_SPECS and (node.module or "").endswith("defaults"):
                    yield node.lineno, alias.name
                if alias.name == "node_classification_report" and (node.module or "").endswith("diagnostics"):
                    yield node.lineno, alias.name
        elif isinstance(node, ast.keyword) and node.arg == "layout":
            yield node.lineno, "layout="
        elif not text_task and isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            if node.slice.value in OLD_KEYS:
                yield node.lineno, node.slice.value
        elif not text_task and isinstance(node, ast.Dict):
            for key in node.keys:
                if isinstance(key, ast.Constant) and key.value in OLD_KEYS:
                    yield key.lineno, key.value


def test_the_package_uses_only_the_new_names():
    found = [
        f"{path.relative_to(REPO)}:{line}: {name}"
        for path in sorted((REPO / "src" / "graph_rma").rglob("*.py"))
        for line, name in _old_uses(path)
    ]
    assert not found, found
