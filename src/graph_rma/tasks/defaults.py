"""The defaults of every task, importable without torch: the command line shows them in ``--help`` without loading
the tasks themselves.

The task modules take their defaults from here (:data:`graph_rma.tasks.node_classification.DEFAULT_VARIANTS` is
:data:`NODE_DEFAULT_VARIANTS`, :data:`graph_rma.tasks.agenda.PRESETS` is :data:`AGENDA_PRESETS`, ...). The names of
things defined below the task layer (datasets, models, METEOR implementations) are repeated
here for the help texts; ``tests/test_cli.py`` checks that they match their sources.

The node benchmark's variant specs are ``CORA_*_SPEC`` (``CORA_SVGD_SPEC``, ...).
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

from .generator_config import AGENDA_CONFIGS, WEBNLG_CONFIGS, preset_dicts

# ---- node classification (graph-rma cora) ---------------------------------------------------------------------
# Chosen on validation accuracy only, seeds 100-102 (docs/cora.md lists every configuration
# tried). eps=8 (= the number of heads) undoes the 1/M of Eq. (4) relative to Adam's weight decay. The SGLD/SPOS
# noise in a head's gradient has standard deviation sqrt(2 eps / beta) (1.3e-3 at beta=1e7, 1.3e-4 at beta=1e9),
# against loss gradients of about 1e-5..1e-3 per coordinate, hence the large betas.
CORA_MA_SPEC = "ma"
CORA_REG_SPEC = "reg:kind=frobenius,weight=0.01"
CORA_SGLD_SPEC = "sgld:eps=8,beta=1e7"
CORA_SVGD_SPEC = "svgd:alpha=0.01,eps=8,roles=att_src/att_dst"
CORA_SPOS_SPEC = "spos:alpha=0.01,eps=8,beta=1e9,roles=att_src/att_dst"
CORA_DROPATTN_SPEC = "dropattn:p=0.6,mode=column"
NODE_DEFAULT_VARIANTS = [CORA_MA_SPEC, CORA_SVGD_SPEC]
NODE_FULL_VARIANTS = [CORA_MA_SPEC, CORA_REG_SPEC, CORA_SGLD_SPEC, CORA_SVGD_SPEC, CORA_SPOS_SPEC, CORA_DROPATTN_SPEC]
# A graph's own validated SVGD setting, where a study chose one on its validation seeds: chameleon, all of the first
# layer's head parameters. Chosen twice: with GATv2 under the Cora protocol (docs/where-it-helps.md, against a weak
# plain model) and again with GAT under the ggcn protocol, among alpha 0.01/0.1/1 (docs/baselines.md), where it does
# not beat the equally tuned plain model. It replaces CORA_SVGD_SPEC in the default and --full variants there.
NODE_DATASET_SVGD: Dict[str, str] = {"chameleon": "svgd:alpha=0.1,eps=8"}


def node_default_variants(dataset: str = "cora", full: bool = False) -> List[str]:
    """The node benchmark's variants for ``dataset`` when none are given: :data:`NODE_DEFAULT_VARIANTS` (``full``:
    :data:`NODE_FULL_VARIANTS`) with the graph's own SVGD setting (:data:`NODE_DATASET_SVGD`) where it has one."""
    svgd = NODE_DATASET_SVGD.get(dataset.lower(), CORA_SVGD_SPEC)
    return [svgd if v == CORA_SVGD_SPEC else v for v in (NODE_FULL_VARIANTS if full else NODE_DEFAULT_VARIANTS)]


NODE_DEFAULT_SEEDS = 3
NODE_FULL_SEEDS = 20
# Mirrored, not imported: the real lists load torch and PyG, 9-14 s per --help instead of 0.05-0.16 s (measured).
#: :data:`graph_rma.data.nodes.NODE_DATASETS`
NODE_DATASET_NAMES: Tuple[str, ...] = (
    "Cora",
    "CiteSeer",
    "Cornell",
    "Texas",
    "Wisconsin",
    "chameleon",
    "squirrel",
    "Actor",
    "minesweeper",
    "tolokers",
    "chameleon_filtered",
    "chameleon_filtered_directed",
)

# ---- sentence classification (graph-rma text) -----------------------------------------------------------------
# Named variants of the benchmark (any spec string of graph_rma.variants is accepted too). svgd/spos: chosen on
# TREC dev accuracy, selection seeds 100-104, over alpha in {0.01, 0.1, 1} with and without the kernel-weighted
# gradient mixing (docs/where-it-helps.md, "The text sweep"): SVGD's choice was alpha=0.01 without the mixing
# (kernel_grad=false) for the self-attentive model (r = 30) and the Transformer (4 and 16 heads) alike.
TEXT_VARIANTS: Dict[str, str] = {
    "ma": "ma",
    "reg": "reg:kind=frobenius,weight=0.1",
    "svgd": "svgd:alpha=0.01,kernel_grad=false",
    "spos": "spos:alpha=1,beta=100000",
    "dropattn-c": "dropattn:p=0.1,mode=column",
    "dropattn-e": "dropattn:p=0.1,mode=element",
}
# Per-model settings of a named variant, chosen the same way: SPOS's choice for the Transformer (4 heads).
TEXT_MODEL_VARIANTS: Dict[Tuple[str, str], str] = {
    ("transformer", "spos"): "spos:alpha=0.01,beta=100000",
}
#: :data:`graph_rma.models.text.MODELS`
TEXT_MODELS: Tuple[str, ...] = ("transformer", "selfattn")
#: :data:`graph_rma.data.text.DATASETS`
TEXT_DATASETS: Tuple[str, ...] = ("trec", "mr", "sst2", "sst1", "subj", "cr", "mpqa")
TEXT_DEFAULT = {"datasets": ["trec"], "seeds": 2, "epochs": 6}
TEXT_FULL = {"datasets": ["trec", "mr"], "seeds": 5, "epochs": 15}

# ---- graph to text (graph-rma agenda / webnlg) ----------------------------------------------------------------
# The presets are GeneratorConfig instances (graph_rma.tasks.generator_config, where each is explained); here they
# are the plain mappings the trainer takes and the runs save (the tasks' PRESETS), validated when they were built.
AGENDA_PRESETS: Dict[str, Dict[str, Any]] = preset_dicts(AGENDA_CONFIGS)  # cpu, full
WEBNLG_PRESETS: Dict[str, Dict[str, Any]] = preset_dicts(WEBNLG_CONFIGS)  # cpu, full, webnlg2017
#: What each WebNLG preset is for, shown by ``graph-rma webnlg train --help``.
WEBNLG_PRESET_HELP: Dict[str, str] = {
    "cpu": "trains and scores on 2 CPU cores in minutes",
    "full": "GraphWriter's configuration; for a GPU",
    "webnlg2017": "aimed at the WebNLG 2017 challenge baseline's BLEU on the seen test categories (the BLEU table of "
    "Gardent et al., INLG 2017; score with evaluate --scorer webnlg2017); nothing chosen on test",
}
AGENDA_SPLITS = ("dev", "val", "test", "train")
WEBNLG_SPLITS = ("dev", "test", "train")
#: :data:`graph_rma.metrics.generation.METEOR_CHOICES`
METEOR_CHOICES: Tuple[str, ...] = ("auto", "meteor-1.5", "nltk", "none")
#: :data:`graph_rma.metrics.generation.SCORERS`
SCORERS: Tuple[str, ...] = ("coco", "webnlg2017")
SCORER_HELP = (
    "coco: coco-caption BLEU-1..4, METEOR 1.5, ROUGE, entity coverage, repetition (GraphWriter's scorer; "
    "AGENDA's published numbers use it); webnlg2017: the WebNLG 2017 challenge's BLEU (multi-bleu.perl "
    "-lc), METEOR 1.5 -norm and TER on its tokenisation, against the first three references (default: coco)"
)
