"""The documentation site works offline and opened from disk: it loads nothing from a CDN (its math is MathML and its
code colours a stylesheet, both made at build time), every link between its pages names a file (a link to a folder
shows a directory listing under file://, and 404.html's links are relative), wide tables scroll instead of hiding
their last columns, the tables fit a 1,400 px window (checked in headless Chromium where one is installed), and the
search box says that it needs a web server."""

import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from conftest import REPO

pytest.importorskip("mkdocs")
pytest.importorskip("latex2mathml")

pytestmark = pytest.mark.slow  # builds the whole site in a subprocess (mkdocstrings reads every module)

REMOTE_ASSET = re.compile(r'<(?:script|link|img)\b[^>]*\b(?:src|href)="(?:https?:)?//[^"]*"', re.I)
LINK = re.compile(r'\b(?:href|src)="([^"]*)"')


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def _pages(site: Path):
    return sorted(site.rglob("*.html"))  # 404.html too: its links are relative, so that it works from disk


def test_no_page_loads_anything_from_the_network(site):
    remote = {str(p.relative_to(site)): REMOTE_ASSET.findall(p.read_text()) for p in _pages(site)}
    assert not {k: v for k, v in remote.items() if v}


def test_math_is_mathml_made_at_build_time(site):
    page = (site / "api" / "particles.html").read_text()
    assert page.count("<math ") > 10 and 'class="arithmatex"' not in page
    leftover = [str(p.relative_to(site)) for p in _pages(site) if 'class="arithmatex"' in p.read_text()]
    assert not leftover  # no formula is left for a script to typeset


def test_code_is_coloured_at_build_time(site):
    page = (site / "hf.html").read_text()
    assert '<div class="highlight"><pre>' in page and '<span class="kn">import</span>' in page
    assert not [str(p.relative_to(site)) for p in _pages(site) if '<pre><code class="language-' in p.read_text()]
    assert 'href="css/pygments.css"' in page and ".highlight .kn {" in (site / "css" / "pygments.css").read_text()


def test_every_link_between_pages_names_a_file(site):
    """Opened from disk, a link to a folder (``cora/``) shows a directory listing: every relative link of every
    page must resolve to a file of the site."""
    broken = []
    pages = _pages(site)
    assert len(pages) > 30
    for page in pages:
        for url in LINK.findall(page.read_text()):
            parts = urlsplit(url)
            if parts.scheme or url.startswith(("#", "//")) or not parts.path:
                continue
            if not (page.parent / unquote(parts.path)).resolve().is_file():
                broken.append(f"{page.relative_to(site)}: {url}")
    assert not broken, broken[:20]
    nav = (site / "cora.html").read_text()
    assert 'href="benchmarks.html"' in nav and 'href="api/particles.html"' in nav


def test_wide_tables_scroll(site):
    page = (site / "benchmarks.html").read_text()
    assert "<table>" in page and 'href="css/site.css"' in page
    css = re.sub(r"/\*.*?\*/", "", (site / "css" / "site.css").read_text(), flags=re.S)
    rules = {k.strip(): v for k, v in re.findall(r"([^{}]+)\{([^}]*)\}", css)}
    table = rules.get(".rst-content table", "")
    assert re.search(r"overflow-x:\s*auto", table) and re.search(r"display:\s*block", table), css


def _hook():
    import importlib.util

    spec = importlib.util.spec_from_file_location("offline_hook", REPO / "docs" / "hooks" / "offline.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_hook_turns_arithmatex_into_mathml_and_refuses_what_it_cannot_read():
    from mkdocs.exceptions import PluginError

    hook = _hook()
    inline = hook.to_mathml("span", r"\(\frac{1}{M} \sum_{h&lt;k} x\)", "page.md")  # escaped as arithmatex leaves it
    assert inline.startswith("<math") and 'display="inline"' in inline and "<mfrac>" in inline
    assert "<mo>&#x0003C;</mo>" in inline and "&amp;" not in inline  # the unescaped "<", an operator
    assert 'display="block"' in hook.to_mathml("div", r"\[a^2\]", "page.md")
    with pytest.raises(PluginError, match=r"page\.md: math .* is not wrapped"):
        hook.to_mathml("span", r"\(x", "page.md")


def test_404_has_relative_links(site):
    page = (site / "404.html").read_text()
    assert 'href="css/theme.css"' in page and 'action="search.html"' in page
    assert not re.findall(r'\b(?:href|src|action)="/', page)


def test_every_page_says_search_needs_a_server(site):
    note = _hook().SEARCH_NOTE
    missing = [str(p.relative_to(site)) for p in _pages(site) if p.read_text().count(note) != 1]
    assert not missing and "python -m http.server" in note


def test_the_hook_makes_links_relative_and_adds_the_note_once():
    hook = _hook()
    assert hook.relative_links('<a href="/a.html"><form action="//search.html"><img src="https://x/y.png">') == (
        '<a href="a.html"><form action="search.html"><img src="https://x/y.png">'
    )
    page = '<form id ="rtd-search-form" class="wy-form" action="search.html"><input/></form><p>x</p>'
    once = hook.with_search_note(page)
    assert once.count(hook.SEARCH_NOTE) == 1 and hook.with_search_note(once) == once


@pytest.fixture(scope="module")
def chromium():
    found = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
    if found is None:
        pytest.skip("no headless Chromium (Debian: apt-get install chromium)")
    return found


def _browser(chromium: str, *args: str) -> str:
    argv = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1400,1000"]
    proc = subprocess.run(argv + list(args), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


_PROBE = """<script>window.addEventListener("load", function () {
  var tables = Array.prototype.map.call(document.querySelectorAll(".rst-content table"),
    function (t) { return [t.scrollWidth, t.clientWidth]; });
  document.body.setAttribute("data-layout", JSON.stringify({
    content: document.querySelector(".wy-nav-content").clientWidth, tables: tables}));
});</script>"""


@pytest.mark.parametrize("name", ["index", "benchmarks"])
def test_the_tables_fit_a_1400_px_window(site, chromium, name):
    """The home page's results summary and the benchmarks tables show every column in a 1,400 px window: the content
    column is not capped at the theme's 800 px, and no table needs sideways scrolling."""
    probe = site / f"_probe_{name}.html"
    probe.write_text((site / f"{name}.html").read_text().replace("</body>", _PROBE + "</body>"))
    try:
        dom = _browser(chromium, "--virtual-time-budget=3000", "--dump-dom", probe.as_uri())
    finally:
        probe.unlink()
    layout = json.loads(html.unescape(re.search(r'data-layout="([^"]*)"', dom).group(1)))
    assert layout["content"] >= 1000, layout
    assert layout["tables"] and all(scroll <= client + 1 for scroll, client in layout["tables"]), layout


def test_a_screenshot_of_the_home_page_uses_the_window(site, chromium, tmp_path):
    """A third of a 1,400 px window stayed empty (the theme's grey): the right-hand part now holds text."""
    image = pytest.importorskip("PIL.Image")
    shot = tmp_path / "home.png"
    _browser(chromium, f"--screenshot={shot}", (site / "index.html").as_uri())
    gray = image.open(shot).convert("L")
    assert gray.size == (1400, 1000)
    px = gray.load()
    dark = sum(1 for x in range(1120, 1390) for y in range(60, 1000) if px[x, y] < 100)  # text, right of 1,120 px
    assert dark > 500, dark
