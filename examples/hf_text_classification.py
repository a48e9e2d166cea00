"""Repulsive heads and DropAttention in a HuggingFace model trained with transformers' Trainer: one callback each.

    python examples/hf_text_classification.py                        # TREC: plain vs DropAttention vs SVGD, 3 seeds
    python examples/hf_text_classification.py --dataset sst2 --epochs 3
    python examples/hf_text_classification.py --model prajjwal1/bert-tiny   # weights you have (hub name or path)

By default the model is a small BERT built from a ``BertConfig`` (random initialisation, a word-level vocabulary from
the training sentences: nothing is downloaded); ``--model`` loads a checkpoint and its tokenizer instead. Each arm is
one ``SamplerCallback`` (``graph_rma.hf``): ``ma`` (plain), ``dropattn:...`` (DropAttention in every attention module)
and ``svgd:...`` (the heads as SVGD particles), trained on the same seeds. It prints one table, test accuracy mean ±
sd over the seeds and the paired difference against plain, and writes ``head_importance.png``: the test-accuracy drop
when each head is masked (Michel et al.), before training and after each arm's training on the first seed. A progress
bar (``Trainer``'s, on stderr) shows each arm's steps while it trains. Data:
``$GRAPH_RMA_DATA/text`` (``../shared/data`` with ``make``), as in ``examples/text_classification.py``.
"""

import argparse
import tempfile

import torch

import graph_rma
import graph_rma.engine
from graph_rma.argtypes import SeedsAction, add_threads_option, out_dir, positive_float, positive_int, seed_list
from graph_rma.data.text import Vocabulary, load_text_dataset
from graph_rma.diagnostics import head_importance, plot_head_importance
from graph_rma.engine.optional import MissingExtraError, require
from graph_rma.engine.stats import format_spread, mean_std, paired_comparison
from graph_rma.tasks.text_classification import stratified_subset

graph_rma.engine.one_line_errors()  # a mistake, missing data or a missing extra: one line, not a traceback
transformers = require("transformers", "hf", "this example")
import graph_rma.hf  # noqa: E402  (after the one-line check that transformers is installed)

p = argparse.ArgumentParser()
p.add_argument("--dataset", default="trec", help="trec, sst2, mr, ... (graph_rma.data.text)")
p.add_argument(
    "--model",
    default=None,
    help="a transformers checkpoint (hub name or path); default: a small BERT from a BertConfig, randomly initialised",
)
p.add_argument(
    "--seeds",
    nargs="+",
    type=seed_list,
    action=SeedsAction,
    default=[0, 1, 2],
    metavar="S",
    help="seeds, or ranges such as 0-2 (each arm runs every seed)",
)
p.add_argument("--epochs", type=positive_float, default=4)
p.add_argument("--lr", type=positive_float, default=None, help="default 1e-3 for the small BERT, 5e-5 for --model")
p.add_argument(
    "--max-train",
    type=positive_int,
    default=None,
    help="train on N training sentences: a stratified subset drawn with seed 0 (each class keeps its share; "
    "default: all)",
)
p.add_argument(
    "--arms",
    nargs="+",
    default=["ma", "dropattn:p=0.1,mode=column", "svgd:alpha=0.1,eps=1"],
    help="variant specs, one per arm (the first is the reference)",
)
p.add_argument("--out", type=out_dir, default="runs/example_hf", help="folder for head_importance.png")
add_threads_option(p)  # torch CPU threads: the one default of every command and example
args = p.parse_args()
torch.set_num_threads(args.threads)
if max(args.seeds) >= 2**32:
    # the script's own check: parser.error is one line (one_line_errors shortens only what graph_rma raises)
    p.error(f"argument --seeds: transformers' set_seed takes seeds below 2**32 (NumPy's range), got {max(args.seeds)}")
for spec in args.arms:  # every spec checked before the first run
    graph_rma.parse_variant(spec)

train, test = load_text_dataset(args.dataset, "train"), load_text_dataset(args.dataset, "test")
keep = stratified_subset(train.labels, args.max_train, 0) if args.max_train else range(len(train.labels))
if args.max_train:  # a file sorted by label would give one class in its first N lines
    print(f"--max-train {args.max_train}: {len(keep)} of {len(train.labels)} training sentences, stratified by class")
train_tokens = [train.tokens[i] for i in keep]
train_sentences, train_labels = [train.sentences[i] for i in keep], [train.labels[i] for i in keep]
if args.model is None:  # word ids from the package's tokenizer; "[cls]" first, where BERT pools
    vocab = Vocabulary.build([["[cls]"]] + train_tokens)

    def encode(tokens_list, sentences):
        return [{"input_ids": vocab.encode(["[cls]"] + t)[:64]} for t in tokens_list]
else:
    try:  # before any training: a wrong path or an unreachable hub name is one line, not transformers' traceback
        tokenizer = transformers.AutoTokenizer.from_pretrained(args.model)
    except (OSError, ValueError) as exc:
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise graph_rma.GraphRMAError(f"--model: cannot load {args.model!r}: {why}") from None

    def encode(tokens_list, sentences):
        return [{"input_ids": ids} for ids in tokenizer(list(sentences), truncation=True, max_length=64)["input_ids"]]


def examples(ds_tokens, sentences, labels):
    return [dict(e, labels=y) for e, y in zip(encode(ds_tokens, sentences), labels)]


train_set = examples(train_tokens, train_sentences, train_labels)
test_set = examples(test.tokens, test.sentences, test.labels)
pad_id = 0 if args.model is None else (tokenizer.pad_token_id or 0)


def collate(rows):
    """Right-padded ``input_ids``, the ``attention_mask`` that hides the padding, and ``labels``."""
    n = max(len(r["input_ids"]) for r in rows)
    ids = torch.full((len(rows), n), pad_id, dtype=torch.long)
    mask = torch.zeros(len(rows), n, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r["input_ids"])] = torch.tensor(r["input_ids"])
        mask[i, : len(r["input_ids"])] = 1
    return {"input_ids": ids, "attention_mask": mask, "labels": torch.tensor([r["labels"] for r in rows])}


def build(seed):
    transformers.set_seed(seed)
    if args.model is not None:
        return transformers.AutoModelForSequenceClassification.from_pretrained(  # a new head for this set's classes
            args.model, num_labels=train.num_classes, ignore_mismatched_sizes=True
        )
    config = transformers.BertConfig(
        vocab_size=len(vocab),
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=64,
        num_labels=train.num_classes,
    )
    return transformers.BertForSequenceClassification(config)


@torch.no_grad()
def accuracy(model):
    model.eval()
    device = next(model.parameters()).device
    hits = 0
    for s in range(0, len(test_set), 250):
        batch = {k: v.to(device) for k, v in collate(test_set[s : s + 250]).items()}
        hits += int((model(**batch).logits.argmax(-1) == batch["labels"]).sum())
    return hits / len(test_set)


def importance(model):
    """Test-accuracy drop (points) when each head of each attention layer is masked, in layer order."""
    res = head_importance(model, list(graph_rma.hf.attention_layers(model)), lambda: 100 * accuracy(model))
    return res.all_drops()


def run(spec, seed, work):
    model = build(seed)
    before = importance(model) if seed == args.seeds[0] else None
    targs = transformers.TrainingArguments(
        output_dir=work,
        num_train_epochs=args.epochs,
        per_device_train_batch_size=32,
        seed=seed,
        learning_rate=args.lr or (1e-3 if args.model is None else 5e-5),
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        disable_tqdm=False,  # Trainer's progress bar (stderr) while each arm trains
        dataloader_num_workers=0,
        dataloader_pin_memory=torch.cuda.is_available(),
    )
    trainer = transformers.Trainer(
        model=model,
        args=targs,
        train_dataset=train_set,
        data_collator=collate,
        callbacks=[graph_rma.hf.SamplerCallback(spec)],
    )
    trainer.remove_callback(transformers.PrinterCallback)  # the table below says what matters
    trainer.train()
    return 100 * accuracy(model), before, importance(model) if seed == args.seeds[0] else None


results, drops = {}, {}
with tempfile.TemporaryDirectory() as work:
    for spec in args.arms:
        results[spec] = {}
        for seed in args.seeds:
            acc, before, after = run(spec, seed, work)
            results[spec][seed] = acc
            if before is not None:
                drops.setdefault("before training", before)
                drops[spec] = after
            print(f"{spec} seed {seed}: test accuracy {acc:.2f}%", flush=True)

name = args.model or "BERT from BertConfig (random init)"
print(f"\n{train.name}, {name}, {len(args.seeds)} seeds, {args.epochs:g} epochs: test accuracy (%)")
print(f"| {'arm':<28} | {'mean ± sd':>13} | {'vs ' + args.arms[0]:>18} | wins/losses |")
print(f"|{'-' * 30}|{'-' * 15}|{'-' * 20}|{'-' * 13}|")
reference = results[args.arms[0]]
for spec, accs in results.items():
    m, s = mean_std(list(accs.values()))
    if spec == args.arms[0]:
        diff, record = "", ""
    else:
        c = paired_comparison(reference, accs)
        diff, record = format_spread(c["mean"], c["se"], c["n"], sign=True), f"{int(c['wins'])}/{int(c['losses'])}"
    print(f"| {spec:<28} | {format_spread(m, s, len(accs)):>13} | {diff:>18} | {record:>11} |")
print("(paired difference: mean ± standard error over the seeds; one seed has no spread to state)")
for arm, d in drops.items():
    print(f"head importance, {arm}: mean drop {sum(d) / len(d):+.2f} points over {len(d)} heads")
try:
    path = plot_head_importance(drops, args.out / "head_importance.png", metric="test accuracy (points)")
    print(f"wrote {path}")
except MissingExtraError as exc:
    print(f"plot skipped (matplotlib not installed): {exc.hint}")
