"""The results summary of the README and the docs home: one table rendered from the results pages' committed
results files (docs/<page>/results.json), so that neither summary types a measured figure.

    python -m studies.render     # renders this block on both pages, with every other generated block

A row per comparison of plain and repulsive heads: the Cora study's two early-stopping rules, each evidence entry of
the baselines page whose final runs are in, AGENDA and WebNLG. WebNLG's row is the current plain generator:
the latest round of the reproduced challenge baseline (docs/webnlg2017/) whose test set is scored (each round's
recipe follows from the previous one's dev diagnosis, never from a test score), with the repulsion evidence on it
as its finals come in; the CPU preset's one-seed comparison before that. The verdicts
follow the pages' own: a paired difference within 2 standard errors is noise, and one seed tells nothing apart.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List, Optional

from graph_rma import GraphRMAError
from graph_rma.engine import mean_std, paired_comparison
from studies import baselines, calibration, cora, webnlg2017, webnlg2017_evidence
from studies.pages import mean_std_cell as _ms
from studies.pages import paired_cell as _paired
from studies.pages import paired_verdict as _verdict

DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGES = (
    "cora",
    "baselines",
    "agenda",
    "webnlg",
    "webnlg2017/evidence",
    "calibration",
)  # the results files read, beside the rounds


def load() -> Dict[str, Dict]:
    """The committed results of the pages the summary reads, by page name; ``webnlg2017`` is the latest round of the
    reproduced challenge baseline whose test set is scored (``{}`` before any; its name under ``round``)."""
    results = {name: json.loads((DOCS / name / "results.json").read_text()) for name in PAGES}
    rounds = webnlg2017.committed()
    name = webnlg2017.latest(rounds)
    results["webnlg2017"] = dict(rounds[name], round=name) if name else {}
    return results


def _cora_rows(results: Dict, link: str) -> List[str]:
    rows = []
    pub_m, pub_s, _ = cora.PUBLISHED["ma"]
    for stage, rule in (("full", "validation-accuracy early stopping"), ("gat", "the GAT code's early stopping")):
        ma, sv, sp = (cora._by(results[stage], s) for s in ("ma", cora.SVGD, cora.SPOS))
        tests = [[r["test"] for r in runs] for runs in (ma, sv, sp)]
        p_sv, p_sp = cora._paired(ma, sv), cora._paired(ma, sp)
        setting = f"{len(ma)} paired seeds, {rule}"
        if abs(mean_std(tests[0])[0] - pub_m) <= pub_s:
            setting += f" (plain reproduces the published {pub_m} ± {pub_s})"
        verdicts = " and ".join(dict.fromkeys(_verdict(p) for p in (p_sv, p_sp)))
        rows.append(
            f"| Cora (GAT), test accuracy % | {setting} | {_ms(tests[0], 1)} | SVGD {_ms(tests[1], 1)}, SPOS "
            f"{_ms(tests[2], 1)} | paired {_paired(p_sv)} / {_paired(p_sp)}: {verdicts} | [Cora]({link}cora.md) |"
        )
    return rows


def _baseline_rows(results: Dict, link: str) -> List[str]:
    rows = []
    for (dataset, protocol), arms in baselines.EVIDENCE.items():
        finals = baselines.evidence_finals(results, dataset, protocol)
        if not baselines.entry_complete(results, dataset, protocol) or not {"plain", "svgd"} <= set(finals):
            continue  # not run yet, or runs still going: the baselines page says so
        (plain_setting, plain), (svgd_setting, svgd) = finals["plain"], finals["svgd"]
        runs = [
            r for e in results["evidence"] if (e["dataset"], e["protocol"]) == (dataset, protocol) for r in e["final"]
        ]
        metric = "ROC AUC" if runs[0]["metric"] == "roc_auc" else "test accuracy %"
        as_published = [
            r["test"]
            for row in results["reproduction"]
            if (row["dataset"], row["protocol"]) == (dataset, protocol)
            for r in row["runs"]
        ]
        published = baselines.published_cell(dataset, protocol)
        plain_cell = f"{_ms(list(plain.values()))} (`{plain_setting}`"
        plain_cell += f"; as published: {_ms(as_published)})" if as_published else ")"
        pc = paired_comparison(plain, svgd)
        select = baselines.SELECT_SEEDS
        rows.append(
            f"| {dataset} (`{protocol}` protocol; published plain GAT {published}), {metric} | {pc['n']} paired "
            f"seeds, each arm chosen on validation seeds {select[0]}-{select[-1]} from {len(arms['plain'])} "
            f"settings | {plain_cell} | SVGD {_ms(list(svgd.values()))} (`{svgd_setting}`) | paired {_paired(pc)}: "
            f"{_verdict(pc)} | [baselines]({link}baselines.md) |"
        )
    return rows


def _one_seed(task: str, rows: List[Dict]) -> Dict[str, Dict]:
    by = {("ma" if r["variant"] == "ma" else "svgd"): r for r in rows}
    if len(rows) != 2:
        raise GraphRMAError(f"{task}: expected one plain and one repulsive run, got {[r['variant'] for r in rows]}")
    return by


def _webnlg2017_row(base: Dict, evidence: Dict, link: str) -> Optional[str]:
    """The reproduced challenge baseline's row (``None`` before its test set is scored), with the repulsion
    evidence on it once both arms have a final run of the same seed: both arms over their paired seeds."""
    if not base.get("test"):
        return None
    subsets = ("seen", "unseen", "all")
    target = f"GCN_EC's published seen BLEU {webnlg2017.target():g}"
    by_subset = {s: webnlg2017_evidence.per_arm(evidence, s, "BLEU") for s in subsets}
    arms = {arm: by_subset["all"][arm] for arm in ("plain", "svgd")}
    if arms["plain"] and arms["svgd"]:
        paired = sorted(set(arms["plain"]) & set(arms["svgd"]))  # a seed of one arm alone is not in the row
        cells = {arm: " / ".join(_ms([by_subset[s][arm][k] for k in paired]) for s in subsets) for arm in arms}
        bleu = {s: row["BLEU"] for s, row in webnlg2017_evidence.paired_scores(evidence).items()}
        pc = bleu["all"]
        verdict = "one seed: no difference to tell"
        if pc["n"] > 1:
            verdict = f"paired (all) {_paired(pc)}: {_verdict(pc)}"
            for subset, other in bleu.items():
                if _verdict(other) != _verdict(pc):  # a subset that tells otherwise is named
                    verdict += f"; {subset} {_paired(other)}: {_verdict(other)}"
        k = len(webnlg2017_evidence.ARMS["plain"])
        seeds = f"{pc['n']} paired seed{'s' if pc['n'] > 1 else ''}"
        setting = f"{seeds}, each arm chosen on dev from {k} settings ({target})"
        return (
            f"| WebNLG 2017 (challenge scorer), BLEU seen / unseen / all | {setting} | {cells['plain']} | SVGD "
            f"{cells['svgd']} | {verdict} | [WebNLG]({link}webnlg.md) |"
        )
    s = base["test"]["scores"]
    plain = " / ".join(f"{s[k]['BLEU']:.2f}" for k in subsets)
    met = "reaches" if webnlg2017.acceptance(base) else "is below"
    return (
        f"| WebNLG 2017 (challenge scorer), BLEU seen / unseen / all | plain: 1 seed, `--preset webnlg2017` (round "
        f"`{base['round']}`), decoding chosen on dev | {plain} | not measured on this baseline yet | the plain "
        f"generator {met} {target} | [WebNLG]({link}webnlg.md) |"
    )


def _generation_rows(agenda: Dict, webnlg: Dict, link: str, strong: Optional[str] = None) -> List[str]:
    a = _one_seed("agenda", agenda["agenda"])
    w = _one_seed("webnlg", webnlg["webnlg"])
    cells = {k: " / ".join(f"{r['test'][m]:.2f}" for m in ("BLEU-4", "METEOR")) for k, r in a.items()}
    subsets = ("all", "seen", "unseen")
    bleu = {k: " / ".join(f"{r['test'][s]['BLEU-4']:.2f}" for s in subsets) for k, r in w.items()}
    diffs = [w["svgd"]["test"][s]["BLEU-4"] - w["ma"]["test"][s]["BLEU-4"] for s in subsets]
    trend = "lower on every subset" if max(diffs) < 0 else "higher on every subset" if min(diffs) > 0 else "mixed"
    weak = (
        f"| WebNLG 2017, BLEU-4 all / seen / unseen | 1 seed, CPU preset, all training data | {bleu['ma']} | SVGD "
        f"{bleu['svgd']} | one seed: {trend} | [WebNLG]({link}webnlg.md) |"
    )
    return [
        f"| AGENDA, BLEU-4 / METEOR 1.5 | 1 seed, CPU preset | {cells['ma']} | SVGD {cells['svgd']} | one seed: no "
        f"difference to tell | [AGENDA]({link}agenda.md) |",
        strong or weak,
    ]


def render_summary(results: Dict[str, Dict], link: str) -> str:
    """The table; ``link``: the path from the page to docs/ (``docs/`` from the README, empty from docs/)."""
    lines = [
        "| task | setting | plain heads | repulsive heads | verdict | page |",
        "| --- | --- | --- | --- | --- | --- |",
        *_baseline_rows(results["baselines"], link),
        *_cora_rows(results["cora"], link),
        *_generation_rows(
            results["agenda"],
            results["webnlg"],
            link,
            _webnlg2017_row(results["webnlg2017"], results["webnlg2017/evidence"], link),
        ),
    ]
    verdicts = [
        f"{calibration.DATA[key][0]}, {CLAIMS[claim]}: {text}"
        for key in calibration.DATA
        for claim, text in calibration.verdicts(results["calibration"], key).items()
    ]
    if verdicts:  # the calibration page's claims, once their final seeds are complete
        lines += [
            "",
            f"Calibration and uncertainty ([calibration]({link}calibration.md)): " + "; ".join(verdicts) + ".",
        ]
    names = list(PAGES) + [webnlg2017.folder(name) for name in webnlg2017.ROUNDS]
    files = ", ".join(f"[{name}/results.json]({link}{name}/results.json)" for name in names)
    return "\n".join(lines) + f"\n\nGenerated by `python -m studies.render` from {files}."


BLOCK = "results-summary"
CLAIMS = {"calibration": "calibration (ECE)", "ood": "held-out-class entropy AUROC"}
