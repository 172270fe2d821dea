"""A self-contained HTML page shell: one file that opens offline in any browser.

1. Everything is inline: the shell's CSS, then the page's CSS, and the page's script at the end of
   the body, so the file needs no network and no neighbouring files.
2. Text (title, heading, summary, the details hint) is escaped here; the ``*_html`` parts are markup
   the caller built (escaping its own text with ``escape``).
3. The layout is a sticky header (heading, one summary line, tools), a scrolling main pane
   (``#canvas``) and, when a details hint is given, a details panel (``#details``) beside it: the
   page script fills its ``#detail-body``; ``side_html`` (e.g. a list of entries to jump to)
   stays below it.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from functools import cache
from importlib import resources


def escape(text: object) -> str:
    """``text`` made safe for HTML content and double-quoted attributes."""
    return html.escape(str(text), quote=True)


@cache
def shell_css() -> str:
    css = resources.files("qdqkit.report").joinpath("static").joinpath("page.css")
    return css.read_text(encoding="utf-8")


@dataclass(frozen=True)
class HtmlPage:
    title: str  # the browser tab's title
    heading: str
    summary: str = ""
    tools_html: str = ""
    content_html: str = ""
    details_hint: str | None = None  # None: no details panel
    side_html: str = ""  # markup below the details, in the same panel
    css: str = ""  # after the shell's CSS, so a page can refine it
    script: str = ""


def _inline(kind: str, text: str) -> str:
    # Inlined text cannot be escaped, so a closing tag inside it would end the element early.
    if f"</{kind}" in text.lower():
        raise ValueError(f"inline {kind} must not contain '</{kind}'")
    return f"<{kind}>{text}</{kind}>"


def render_page(page: HtmlPage) -> str:
    """The whole document, deterministic for a given ``page``."""
    details = (
        "" if page.details_hint is None
        else f'<aside id="details"><div id="detail-body"><p>{escape(page.details_hint)}</p></div>'
        f"{page.side_html}</aside>"
    )
    return "".join([
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(page.title)}</title>", _inline("style", shell_css() + page.css),
        "</head><body>",
        '<header><div class="title">', escape(page.heading), '</div><div class="summary">',
        escape(page.summary), "</div>",
        '<div class="tools">', page.tools_html, "</div></header>",
        '<main><div id="canvas">', page.content_html, "</div>", details, "</main>",
        _inline("script", page.script) if page.script else "",
        "</body></html>\n",
    ])
