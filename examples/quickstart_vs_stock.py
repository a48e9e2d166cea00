"""The README's quick start over many seeds: stock PyG heads against repulsive heads, paired.

    python examples/quickstart_vs_stock.py                               # chameleon, seeds 0-9: the protocol's setting
    python examples/quickstart_vs_stock.py --lr 0.02 --patience 50 --epochs 300 --seeds 0   # the README's quick start
    python examples/quickstart_vs_stock.py --seeds 0-9 --dataset cora    # the same code on Cora
    python examples/quickstart_vs_stock.py --seeds 0 1 2 --alpha 0.01    # other seeds, another strength

``--seeds`` is a list of seeds, each a number or an inclusive range ``A-B``, as in every ``graph-rma`` command.
For each seed both arms start from the same weights (the repulsive arm converts the stock model after seeding),
train on split ``seed mod 10`` (Cora: its one public split) with the GGCN protocol's recipe (row-normalised
features, each node attending over its out-links, Adam lr 0.005 and weight decay 5e-5, up to 1500 epochs with
patience 100 on the validation loss; the README's quick start shortens it to lr 0.02, up to 300 epochs, patience 50)
and report the test accuracy and the first layer's head distance (the mean
distance between the heads' outputs, :func:`graph_rma.diagnostics.head_distance`) at the epoch with the lowest
validation loss, with the paired difference over seeds. The model is PyG's stock ``GAT`` (ReLU, no dropout on the
input features, 8 averaged output heads), not the published one that ``graph-rma node --dataset NAME`` trains
(docs/baselines.md). The data are read offline with graph_rma's loader ($GRAPH_RMA_DATA or --root). A progress bar
shows each arm's epochs while it trains.

``--out DIR`` writes every seed's results to ``DIR/results.json`` as soon as the seed is done, and a later run with
the same settings keeps the seeds already there; the README's expected output is rendered from the committed
``docs/quickstart/results.json`` (``python examples/quickstart_vs_stock.py --seeds 0-9 --out docs/quickstart``, then
``python -m studies.render``).
"""

import argparse
import time

import torch
import torch.nn.functional as F
from torch_geometric.nn.models import GAT
from tqdm import trange

import graph_rma
import graph_rma.engine
from graph_rma.argtypes import (
    SeedsAction,
    add_threads_option,
    nonnegative_float,
    out_dir,
    positive_float,
    positive_int,
    seed_list,
)
from graph_rma.data.nodes import load_node_graph, select_split
from graph_rma.data.transforms import direct_edges, normalize_features
from graph_rma.diagnostics import HeadCapture, head_distance
from graph_rma.engine import format_spread, mean_std, paired_comparison, read_json, write_json

graph_rma.engine.one_line_errors()  # a mistake or missing data: one line, not a traceback

ARMS = ("plain", "repulsive")


def run(
    x,
    edge_index,
    y,
    train,
    val,
    test,
    seed: int,
    repulsive: bool,
    epochs: int,
    alpha: float,
    patience: int = 100,
    lr: float = 0.005,
) -> dict:
    """One arm of one seed: the test accuracy (%) and the first layer's head distance (the paper's Dist: the mean
    distance between the heads' outputs, over the test nodes) at the epoch with the lowest validation loss, the
    epochs trained and the wall-clock seconds."""
    start = time.perf_counter()
    torch.manual_seed(seed)
    model = GAT(x.size(1), 64, num_layers=2, out_channels=int(y.max()) + 1, heads=8, dropout=0.6)
    if repulsive:
        model = graph_rma.convert(model)
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=5e-5)
    if repulsive:
        graph_rma.SVGD(model, alpha=alpha, eps=8, layers=["convs.0"]).attach(opt)
    best_loss, best_test, waited, dist = float("inf"), 0.0, 0, float("nan")
    desc = f"seed {seed}, {'repulsive' if repulsive else 'plain'} heads"
    for epoch in trange(epochs, desc=desc, leave=False):
        model.train()
        opt.zero_grad()
        F.cross_entropy(model(x, edge_index)[train], y[train]).backward()
        opt.step()
        model.eval()
        with torch.no_grad(), HeadCapture(model.convs[0]) as heads:
            out = model(x, edge_index)
        val_loss = F.cross_entropy(out[val], y[val]).item()
        if val_loss < best_loss:
            best_loss, best_test, waited = val_loss, (out[test].argmax(-1) == y[test]).float().mean().item(), 0
            dist = head_distance(heads.outputs[test])
        elif (waited := waited + 1) >= patience:
            break
    seconds = round(time.perf_counter() - start, 1)
    return {"test_acc": 100 * best_test, "head_distance": dist, "epochs": epoch + 1, "seconds": seconds}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="examples/quickstart_vs_stock.py", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--seeds",
        nargs="+",
        type=seed_list,
        action=SeedsAction,
        default=list(range(10)),
        metavar="S",
        help="the seeds, each a number or a range A-B, e.g. --seeds 0 1 2 or --seeds 0-9 (default: 0-9)",
    )
    p.add_argument(
        "--epochs",
        type=positive_int,
        default=1500,
        help="most epochs per run (the protocol's 1500; it stops after 100 without a lower validation loss)",
    )
    p.add_argument(
        "--patience",
        type=positive_int,
        default=100,
        help="epochs without a lower validation loss before an arm stops (the protocol's 100)",
    )
    p.add_argument("--lr", type=positive_float, default=0.005, help="Adam's learning rate (the protocol's 0.005)")
    p.add_argument("--dataset", default="chameleon", help="a graph of graph_rma.data.nodes.NODE_DATASETS")
    p.add_argument("--alpha", type=nonnegative_float, default=0.1, help="SVGD's repulsive weight")
    p.add_argument("--root", default=None, help="data folder (default $GRAPH_RMA_DATA/pyg or .../planetoid)")
    p.add_argument(
        "--out",
        type=out_dir,
        default=None,
        help="write each seed's results to OUT/results.json as it finishes; the seeds already there are kept, not "
        "rerun (runs with other settings there: refused)",
    )
    add_threads_option(p)  # torch CPU threads: the one default of every command and example
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    settings = {"dataset": args.dataset, "alpha": args.alpha, "lr": args.lr, "epochs": args.epochs}
    settings["patience"] = args.patience
    results = {"settings": settings, "runs": []}
    path = None if args.out is None else args.out / "results.json"
    if path is not None and path.is_file():  # the seeds already measured with these settings are kept
        results = read_json(path)
        if results.get("settings") != settings:
            p.error(
                f"argument --out: {path} holds runs with other settings ({results.get('settings')}): "
                "choose another folder"
            )
    try:
        data = load_node_graph(args.dataset, root=args.root)
    except (ValueError, FileNotFoundError) as exc:  # a bad name, or no data: one line
        p.exit(2, f"{p.prog}: {exc}\n")
    x = normalize_features(data.x, "row").to_dense()
    edge_index = direct_edges(data.edge_index, "reversed", data.num_nodes)
    done = {r["seed"] for r in results["runs"]}
    splits = 1 if data.train_mask.dim() == 1 else data.train_mask.size(1)  # PyG's shapes: [N] (Cora) or [N, 10]
    for seed in args.seeds:
        if seed not in done:
            split = select_split(data, seed % splits)  # the [N] masks of split seed mod 10
            masks = split.train_mask, split.val_mask, split.test_mask
            arms = {
                arm: run(
                    x,
                    edge_index,
                    data.y,
                    *masks,
                    seed,
                    arm == "repulsive",
                    args.epochs,
                    args.alpha,
                    args.patience,
                    args.lr,
                )
                for arm in ARMS
            }
            results["runs"] = sorted(
                results["runs"] + [{"seed": seed, "split": seed % splits, **arms}], key=lambda r: r["seed"]
            )
            results["conditions"] = {"torch": torch.__version__, "threads": torch.get_num_threads()}
            if path is not None:
                write_json(path, results)
        r = next(r for r in results["runs"] if r["seed"] == seed)
        print(
            f"seed {seed}: split {r['split']}, "
            + ", ".join(
                f"{arm} heads {r[arm]['test_acc']:.1f} % (head distance {r[arm]['head_distance']:.2f})" for arm in ARMS
            )
            + (" (kept from --out)" if seed in done else "")
        )
    runs = [r for r in results["runs"] if r["seed"] in args.seeds]
    acc = {arm: {r["seed"]: r[arm]["test_acc"] for r in runs} for arm in ARMS}
    dist = {arm: mean_std([r[arm]["head_distance"] for r in runs])[0] for arm in ARMS}
    pc = paired_comparison(acc["plain"], acc["repulsive"])
    print(
        f"mean over {len(runs)} seeds: plain {mean_std(acc['plain'].values())[0]:.2f} %, repulsive "
        f"{mean_std(acc['repulsive'].values())[0]:.2f} %; paired difference "
        f"{format_spread(pc['mean'], pc['se'], pc['n'], sign=True)}{' (SE)' if pc['n'] > 1 else ''}, "
        f"wins/ties/losses {pc['wins']}/{pc['ties']}/{pc['losses']}; head distance plain {dist['plain']:.2f}, "
        f"repulsive {dist['repulsive']:.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
