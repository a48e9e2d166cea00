"""The site needs nothing from the network: its math and its code colours are made when the site is built.

* Math: ``pymdownx.arithmatex`` (generic mode) leaves each formula as ``<span class="arithmatex">\\(...\\)</span>``
  (``<div>`` and ``\\[...\\]`` for display math); this hook turns it into MathML with latex2mathml, which browsers
  typeset themselves (no MathJax, no CDN). A formula that cannot be converted stops the build, naming it.
* Code: ``pymdownx.highlight`` colours code blocks with Pygments at build time; the colours are the stylesheet
  ``css/pygments.css`` that this hook adds to the site (theme option ``highlightjs: false``: no highlight.js).

Opened from disk:

* Search: the search box runs only when the site is served (its index is fetched); every page says so under the box
  (``python -m http.server -d site``, :data:`SEARCH_NOTE`).
* ``404.html``: mkdocs writes it with absolute links (``/css/theme.css``), made for a web server's root; they are
  made relative (the page is at the site's top), so that it is styled and its links work opened from disk too.

mkdocs.yml loads this file under ``hooks:``.
"""

from __future__ import annotations

import html
import re

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

PYGMENTS_CSS = "css/pygments.css"
SEARCH_NOTE = (
    '<p class="search-needs-server">Search needs the site served: <code>python -m http.server -d site</code>, '
    "then http://localhost:8000</p>"
)
_SEARCH_FORM = re.compile(r'(<form id ="rtd-search-form".*?</form>)', re.S)
_ABSOLUTE = re.compile(r'\b(href|src|action)="/+(?=[^"/])')
_MATH = re.compile(r'<(span|div) class="arithmatex">(.*?)</\1>', re.S)
_DELIMITERS = {"span": (r"\(", r"\)"), "div": (r"\[", r"\]")}


def to_mathml(tag: str, body: str, where: str) -> str:
    """One arithmatex element (``tag`` ``span`` or ``div``, its escaped text ``body``) as a MathML ``<math>``."""
    from latex2mathml.converter import convert

    tex = html.unescape(body).strip()
    left, right = _DELIMITERS[tag]
    if not (tex.startswith(left) and tex.endswith(right)):
        raise PluginError(f"{where}: math {tex!r} is not wrapped in {left} ... {right}")
    try:
        return convert(tex[len(left) : -len(right)], display="block" if tag == "div" else "inline")
    except Exception as exc:  # latex2mathml's errors have no common base class
        raise PluginError(f"{where}: latex2mathml cannot convert {tex!r}: {exc}") from exc


def on_config(config):
    try:
        import latex2mathml.converter  # noqa: F401
        import pygments  # noqa: F401
    except ImportError as exc:
        raise PluginError(
            f"the docs need {(exc.name or 'latex2mathml').split('.')[0]}: pip install -e '.[docs]'"
        ) from None
    return config


def on_page_content(html_text, page, config, files):
    return _MATH.sub(lambda m: to_mathml(m.group(1), m.group(2), page.file.src_uri), html_text)


def on_files(files, config):
    from pygments.formatters import HtmlFormatter

    css = HtmlFormatter(style="default").get_style_defs(".highlight")
    files.append(File.generated(config, PYGMENTS_CSS, content=css + "\n"))
    return files


def with_search_note(html_text: str) -> str:
    """The page with :data:`SEARCH_NOTE` after its search form (once)."""
    if SEARCH_NOTE in html_text:
        return html_text
    return _SEARCH_FORM.sub(lambda m: m.group(1) + "\n" + SEARCH_NOTE, html_text, count=1)


def relative_links(html_text: str) -> str:
    """Absolute links (``href="/css/theme.css"``, ``action="//search.html"``) made relative to the site's top."""
    return _ABSOLUTE.sub(lambda m: f'{m.group(1)}="', html_text)


def on_post_page(output, page, config):
    return with_search_note(output)


def on_post_template(output_content, template_name, config):
    if template_name == "404.html":
        output_content = relative_links(output_content)
    return with_search_note(output_content) if template_name.endswith(".html") else output_content
