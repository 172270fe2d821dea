from __future__ import annotations

import pytest

from qdqkit.report.html_page import HtmlPage, render_page, shell_css


def test_page_is_self_contained_and_escapes_text() -> None:
    page = render_page(HtmlPage(
        title="a<b> · x", heading="a & b", summary='"quoted"', tools_html="<button>go</button>",
        content_html="<svg></svg>", details_hint="Click <here>", css="p{}", script="var x = 1;",
    ))
    assert page.startswith("<!DOCTYPE html>\n") and page.endswith("</body></html>\n")
    assert "<title>a&lt;b&gt; · x</title>" in page
    assert f"<style>{shell_css()}p{{}}</style>" in page
    assert '<div class="title">a &amp; b</div><div class="summary">&quot;quoted&quot;</div>' in page
    assert '<div class="tools"><button>go</button></div>' in page
    assert ('<div id="canvas"><svg></svg></div><aside id="details"><div id="detail-body">'
            '<p>Click &lt;here&gt;</p>') in page
    assert "<script>var x = 1;</script>" in page
    assert "http" not in page  # nothing to fetch


def test_no_details_panel_or_script_unless_asked() -> None:
    page = render_page(HtmlPage(title="t", heading="h"))
    assert "details" not in page.split("</style>")[1] and "<script>" not in page


def test_inline_text_cannot_close_its_element() -> None:
    with pytest.raises(ValueError, match="</script"):
        render_page(HtmlPage(title="t", heading="h", script="'</SCRIPT>'"))
