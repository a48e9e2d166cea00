"""The documentation site works offline and opened from disk: it loads nothing from a CDN (its math is MathML and its
code colours a stylesheet, both made at build time), every link between its pages names a file (a link to a folder
shows a directory listing under file://), and wide tables scroll instead of hiding their last columns."""

import os
import re
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
    # 404.html is only ever served by a web server, which fills in its absolute links
    return [p for p in sorted(site.rglob("*.html")) if p.name != "404.html"]


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
