"""A Griffe extension for the documentation site: this package's docstrings are reST (Sphinx roles, ``.. math::``)
inside Google-style sections; the site renders Markdown. Each docstring is rewritten before rendering: roles become
code spans, ``.. math::`` blocks and ``:math:`` roles become MathJax (pymdownx.arithmatex), double backquotes become
code, and a paragraph ending in ``::`` introduces its indented code block as Markdown expects."""

from __future__ import annotations

import re
import textwrap

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj|const|ref):`(~?)([^`]+)`")
MATH_ROLE = re.compile(r":math:`([^`]+)`")
LITERAL = re.compile(r"``([^`\n]+?)``")


def _math_blocks(text: str) -> str:
    out, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped.startswith(".. math::"):
            indent = line[: len(line) - len(line.lstrip())]
            body, i = [stripped[len(".. math::") :].strip()], i + 1
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith(indent + " ")):
                body.append(lines[i])
                i += 1
            tex = textwrap.dedent("\n".join(b for b in body if b is not None)).strip("\n")
            out += [indent + "$$", *[indent + t for t in tex.split("\n")], indent + "$$", ""]
            continue
        out.append(line)
        i += 1
    return "\n".join(out)


def rest_to_markdown(text: str) -> str:
    text = _math_blocks(text)
    text = MATH_ROLE.sub(lambda m: f"${m.group(1)}$", text)
    text = ROLE.sub(lambda m: f"`{m.group(2).split('.')[-1] if m.group(1) else m.group(2)}`", text)
    text = LITERAL.sub(lambda m: f"`{m.group(1)}`", text)
    text = re.sub(r"(\S)::\n", r"\1:\n", text)  # "From Python::" introduces an indented code block
    return text


class RestToMarkdown(griffe.Extension):
    """Rewrites every docstring of a loaded package once it is complete."""

    def on_package(self, *, pkg: griffe.Module, **kwargs) -> None:  # noqa: D102
        seen = set()

        def walk(obj) -> None:
            if id(obj) in seen or getattr(obj, "is_alias", False):
                return
            seen.add(id(obj))
            if obj.docstring is not None:
                obj.docstring.value = rest_to_markdown(obj.docstring.value)
            for member in obj.members.values():
                walk(member)

        walk(pkg)
