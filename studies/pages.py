"""What every study driver shares: generated blocks spliced between markers on its page (written by
:mod:`graph_rma.engine.blocks`, which the benchmarks' report shares), and how it stops.

A page's generated block sits between ``<!-- name:start -->`` and ``<!-- name:end -->``; everything outside the
markers is prose kept by hand. The drivers render the blocks from their committed results file, so a page is
always what its results render to (the tests check it).
"""

from __future__ import annotations

import argparse
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Callable, Dict, Optional, Sequence

from graph_rma import GraphRMAError
from graph_rma.argtypes import out_dir, out_file, positive_int
from graph_rma.engine import deferred_interrupt, interrupt_requested, mean_std, one_line_errors, write_json
from graph_rma.engine.blocks import render_blocks


def page_file(text: str) -> Path:
    """``--page``: an existing page (a file that can be rewritten, beside a folder its results can go to); checked
    when the command line is read, so a mistake is one line and writes nothing."""
    path = out_file(text)
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"no such page {text}")
    out_dir(str(path.parent / path.stem))  # docs/<page>/results.json must be writable too
    return path


def stop_if_interrupted(result: Dict) -> Dict:
    """A study driver's check after each ``run_study``, which returns when Ctrl-C stops it (finished runs saved, the
    run in progress where it stopped, ``result["interrupted"]`` true): end the whole driver with exit status 130
    there, instead of going on with its next study; else ``result``."""
    if result.get("interrupted"):
        raise SystemExit(130)
    return result


def run_child(cmd: Sequence[str], env: Optional[Dict[str, str]] = None) -> None:
    """Run one command of a driver in its own process (a ``graph-rma`` training) to its end; if it fails (a child
    stopped by its own SIGTERM included), one line after the child's own and :class:`SystemExit` with its exit
    status, no traceback. Ctrl-C or SIGTERM to the driver is held: the child gets SIGTERM (a Ctrl-C at the
    terminal reaches it as well), the driver waits while it saves and stops, then ends with one line and exit status
    130 (``subprocess.run`` killed the child a quarter of a second after a Ctrl-C, before its save; a SIGTERM to the
    driver alone left the child running)."""
    with deferred_interrupt():
        child = subprocess.Popen(list(cmd), env=env)
        told = False
        while True:
            try:
                code = child.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                if interrupt_requested() and not told:
                    child.send_signal(signal.SIGTERM)
                    told = True
        if interrupt_requested():
            print(f"interrupted: its run stopped (exit status {code}); the same command continues", file=sys.stderr)
            raise SystemExit(130)
    if code != 0:  # the child said why in its own line above: one more line, no traceback
        shown = shlex.join(cmd[:5]) + (" ..." if len(cmd) > 5 else "")
        print(f"stopped: {shown} ended with exit status {code}", file=sys.stderr)
        raise SystemExit(code)


def mean_std_cell(values: Sequence[float], digits: int = 2, empty: str = "–") -> str:
    """``mean ± std`` (sample std) of ``values`` at ``digits`` decimals, the one way every page writes a spread; one
    value alone has no spread to show; ``empty`` for none."""
    values = list(values)
    if not values:
        return empty
    m, s = mean_std(values)
    return f"{m:.{digits}f}" if len(values) == 1 else f"{m:.{digits}f} ± {s:.{digits}f}"


def paired_cell(pc: Dict) -> str:
    """A paired comparison (:func:`graph_rma.engine.paired_comparison`) as ``mean ± SE (wins/ties/losses)``."""
    return f"{pc['mean']:+.2f} ± {pc['se']:.2f} ({pc['wins']}/{pc['ties']}/{pc['losses']})"


def paired_verdict(pc: Dict) -> str:
    """The verdict every page gives a paired comparison (higher is better): ``within noise`` when the mean difference
    is within 2 standard errors of zero, else ``a gain`` or ``a loss``."""
    z = pc["mean"] / pc["se"] if pc["se"] > 0 else 0.0
    return "within noise" if abs(z) < 2 else ("a gain" if z > 0 else "a loss")


def render_page(page: Path, results: Dict, render: Callable[[str, Dict], str]) -> str:
    """``render(page's text, results)``; a page without one of its generated blocks is a one-line
    :class:`~graph_rma.GraphRMAError` naming the page."""
    try:
        return render(page.read_text(encoding="utf-8"), results)
    except GraphRMAError as exc:
        raise GraphRMAError(f"{page}: {exc}") from None


def renderer(blocks: Dict[str, Callable[[Dict], str]]) -> Callable[[str, Dict], str]:
    """A driver's ``render(page_text, results)``: the page with its generated ``blocks`` rendered from results."""
    return lambda text, results: render_blocks(text, results, blocks)


def check_defaults(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The checks of ``--out`` (for ``run``: it is written) and ``--page`` (for ``report``) on their defaults too,
    which argparse leaves unchecked; a problem is argparse's one-line error."""
    try:
        if args.step == "report":
            page_file(str(args.page))
        else:
            out_dir(str(args.out))
    except argparse.ArgumentTypeError as exc:
        parser.error(f"argument {'--page' if args.step == 'report' else '--out'}: {exc}")


def publish(page: Path, results: Dict, blocks: Dict[str, Callable[[Dict], str]], to: Optional[Path] = None) -> None:
    """Commit ``results`` to ``to`` (default: beside the page, ``docs/<page>/results.json``) and render the page's
    blocks from them; the page is read and rendered first, so a missing page or block writes nothing."""
    to = page.parent / page.stem / "results.json" if to is None else to
    text = render_page(page, results, render=lambda t, r: render_blocks(t, r, blocks))
    write_json(to, results)
    page.write_text(text, encoding="utf-8")
    print(f"wrote {page} and {to}")


def cli(
    doc: str,
    *,
    run: Callable[..., None],
    out: str,
    page: str,
    stages: Sequence[str] = (),
    threads: bool = False,
    report: Optional[Callable[[Path, Path], None]] = None,
    collect: Optional[Callable[[Path], Dict]] = None,
    blocks: Optional[Dict[str, Callable[[Dict], str]]] = None,
) -> None:
    """A study driver's command line: ``run [STAGE ...]`` measures (every stage by default), ``report`` writes
    the page; ``--out`` holds the runs, ``--page`` is the page (its results go in the folder of its name).
    ``report(out, page)`` defaults to :func:`publish` of ``collect(out)`` with the driver's ``blocks``."""
    if report is None:

        def report(out_dir: Path, page_path: Path) -> None:
            publish(page_path, collect(out_dir), blocks)

    one_line_errors()  # a mistake (a bad value, missing data): one line, not a traceback
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("step", choices=["run", "report"])
    if stages:
        p.add_argument("stages", nargs="*", help=f"run: the stages (default: {' '.join(stages)})")
    p.add_argument("--out", type=out_dir, default=Path(out))
    p.add_argument("--page", type=page_file, default=Path(page))
    if threads:
        p.add_argument("--threads", type=positive_int, default=1)
    a = p.parse_args()
    check_defaults(p, a)
    chosen = getattr(a, "stages", [])
    unknown = [s for s in chosen if s not in stages]
    if unknown:
        p.error(f"unknown stage {unknown[0]!r}: choose from {', '.join(stages)}")
    if a.step == "report":
        report(a.out, a.page)
        return
    args = [a.out] + ([chosen or list(stages)] if stages else [])
    run(*args, **({"threads": a.threads} if threads else {}))
