"""The answer renderer, app/api/static/js/markdown.js, in real Chromium: the module as the
service serves it, imported inside the chat page, rendering into a container of its own.

Depends only on /static/js/markdown.js being served, not on the rest of the page."""

from __future__ import annotations

import textwrap
from typing import Any

# Renders `text` into a fresh container appended to the body; `citations` maps a number to
# its href (numbers not in it get null). Returns what the tests look at.
RENDER = """async ([text, citations]) => {
  const m = await import('/static/js/markdown.js');
  const container = document.createElement('div');
  container.className = 'answer md-test';
  document.body.append(container);
  const citationHref = (n) => (citations && String(n) in citations ? citations[String(n)] : null);
  container.append(m.renderMarkdown(text, { citationHref }));
  return { html: container.innerHTML, text: container.textContent };
}"""

SPLIT = """async (texts) => {
  const m = await import('/static/js/markdown.js');
  return texts.map((text) => m.splitStable(text));
}"""


def render(page, text: str, citations: dict[str, str] | None = None) -> dict[str, str]:
    return page.evaluate(RENDER, [text, citations])


def split(page, *texts: str) -> list[dict[str, str]]:
    results = page.evaluate(SPLIT, list(texts))
    for text, result in zip(texts, results, strict=True):
        assert result["stable"] + result["tail"] == text
    return results


def query(page, script: str) -> Any:
    """Evaluates `script` with `c` bound to the last rendered container."""
    return page.evaluate(
        "() => { const all = document.querySelectorAll('.md-test');"
        f" const c = all[all.length - 1]; return {script}; }}"
    )


# -- splitStable ------------------------------------------------------------------------------


def test_only_complete_lines_are_stable(page):
    no_newline, half_row, growing_list = split(
        page,
        "Just a sentence with no newline yet",
        "| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4",
        "Steps:\n- one\n- two\n- thr",
    )
    assert no_newline == {"stable": "", "tail": "Just a sentence with no newline yet"}
    assert half_row["stable"] == "| a | b |\n|---|---|\n| 1 | 2 |\n"
    assert half_row["tail"] == "| 3 | 4"
    assert growing_list["stable"] == "Steps:\n- one\n- two\n"


def test_an_open_fence_and_all_after_it_stay_in_the_tail(page):
    text = "Intro.\n\n```html\n<img src=x onerror=alert(1)>\nmore\n"
    (result,) = split(page, text)
    assert result["stable"] == "Intro.\n\n"
    assert result["tail"].startswith("```html\n<img")


def test_a_closed_fence_is_stable(page):
    backticks, tildes, indented = split(
        page,
        "A:\n```py\nx = 1\n```\nAfter",
        "A:\n~~~\nx\n~~~\n",
        "1. step\n   ```sh\n   ls\n   ```\n",
    )
    assert backticks["stable"] == "A:\n```py\nx = 1\n```\n" and backticks["tail"] == "After"
    assert tildes["stable"] == "A:\n~~~\nx\n~~~\n"
    assert indented["stable"] == "1. step\n   ```sh\n   ls\n   ```\n"


def test_a_fence_closes_only_with_its_own_kind_and_length(page):
    outer_open, outer_closed, tilde_open, backtick_open = split(
        page,
        "Doc:\n````md\n```js\nx\n```\n",
        "Doc:\n````md\n```js\nx\n```\n````\nend\n",
        "T:\n~~~\n```\n",
        "T:\n```\n~~~\n",
    )
    assert outer_open["stable"] == "Doc:\n"
    assert outer_closed["stable"] == "Doc:\n````md\n```js\nx\n```\n````\nend\n"
    assert tilde_open["stable"] == "T:\n"
    assert backtick_open["stable"] == "T:\n"


def test_inline_triple_backticks_and_deep_indents_open_no_fence(page):
    inline, four_spaces, incomplete_fence_line = split(
        page, "Use ```x``` here\nok\n", "    ```\nok\n", "a\n```py"
    )
    assert inline["tail"] == "" and four_spaces["tail"] == ""
    assert incomplete_fence_line == {"stable": "a\n", "tail": "```py"}


def test_streaming_char_by_char_never_shrinks_and_ends_fully_rendered(page):
    text = textwrap.dedent(
        """\
        # Plan

        1. First **step** [1]
           - detail
        2. Second

        ```python
        print("<b>")
        ```

        | a | b |
        |---|--:|
        | 1 | 2 |

        > quoted `code`
        Done.
        """
    )
    result = page.evaluate(
        """async (text) => {
          const m = await import('/static/js/markdown.js');
          let last = 0, shrank = false, broken = false, fenceInStable = false;
          for (let i = 0; i <= text.length; i++) {
            const { stable, tail } = m.splitStable(text.slice(0, i));
            if (stable + tail !== text.slice(0, i)) broken = true;
            if (stable.length < last) shrank = true;
            last = stable.length;
            const fences = (stable.match(/^```/gm) || []).length;
            if (fences % 2) fenceInStable = true;
            const box = document.createElement('div');
            box.append(m.renderMarkdown(stable));
          }
          const final = m.splitStable(text);
          return { shrank, broken, fenceInStable, final };
        }""",
        text,
    )
    assert not result["broken"] and not result["shrank"] and not result["fenceInStable"]
    assert result["final"] == {"stable": text, "tail": ""}


# -- rendering ---------------------------------------------------------------------------------


def test_a_table_has_a_header_and_alignment_classes(page):
    render(
        page,
        "| Name | Qty | Price |\n|:--|:-:|--:|\n"
        "| a \\| b | 2 | 3 |\n| short |\n| 1 | 2 | 3 | 4 |\n",
    )
    table = query(
        page,
        """{
          th: [...c.querySelectorAll('thead th')].map((e) => [e.textContent, e.className]),
          rows: [...c.querySelectorAll('tbody tr')]
            .map((r) => [...r.cells].map((e) => e.textContent)),
          td: [...c.querySelectorAll('tbody tr:first-child td')].map((e) => e.className),
          styled: c.querySelectorAll('[style]').length,
        }""",
    )
    assert table["th"] == [
        ["Name", "align-left"],
        ["Qty", "align-center"],
        ["Price", "align-right"],
    ]
    assert table["td"] == ["align-left", "align-center", "align-right"]
    assert table["rows"] == [["a | b", "2", "3"], ["short", "", ""], ["1", "2", "3"]]
    assert table["styled"] == 0


def test_a_code_block_shows_its_language_and_copies_its_code(page):
    code = 'def f():\n    return "<b>**not bold**</b>"'
    result = render(page, f"Example:\n\n```python\n{code}\n```\n")
    assert query(page, "c.querySelector('.code-block').className") == "code-block has-lang"
    assert query(page, "c.querySelector('.code-lang').textContent") == "python"
    assert query(page, "c.querySelector('pre > code').textContent") == code
    assert "<strong>" not in result["html"]
    button = page.locator(".md-test .code-block button.copy")
    assert button.get_attribute("type") == "button" and button.text_content() == "Copy"
    button.click()
    page.wait_for_function(
        "() => document.querySelector('.md-test .code-block button.copy').textContent === 'Copied'"
    )
    assert page.evaluate("() => navigator.clipboard.readText()") == code
    # It goes back to "Copy" by itself.
    page.wait_for_function(
        "() => document.querySelector('.md-test .code-block button.copy').textContent === 'Copy'"
    )


def test_a_failed_copy_says_so_and_on_copy_hears_only_of_success(page):
    result = page.evaluate(
        """async () => {
          const m = await import('/static/js/markdown.js');
          const copied = [];
          const box = document.createElement('div');
          document.body.append(box);
          box.append(m.renderMarkdown('```\\nok\\n```\\n', { onCopy: (t) => copied.push(t) }));
          const button = box.querySelector('button.copy');
          const settle = () => new Promise((resolve) => setTimeout(resolve, 50));
          button.click();
          for (let i = 0; i < 100 && button.textContent === 'Copy'; i++) await settle();
          const first = button.textContent;
          navigator.clipboard.writeText = () => Promise.reject(new Error('denied'));
          button.click();
          for (let i = 0; i < 100 && button.textContent !== 'Copy failed'; i++) await settle();
          return { first, second: button.textContent, copied };
        }"""
    )
    assert result == {"first": "Copied", "second": "Copy failed", "copied": ["ok"]}


def test_an_unclosed_fence_in_a_finished_answer_is_a_code_block(page):
    render(page, "Before\n```js\nlet a = 1;\n# not a heading")
    assert query(page, "c.querySelector('pre code').textContent") == "let a = 1;\n# not a heading"
    assert query(page, "c.querySelectorAll('h1').length") == 0


def test_lists_nest_and_keep_their_start_number(page):
    render(page, "3. three\n4. four\n   - a\n   - b\n     1. deep\n5. five\n\n- x\n- y\n")
    shape = query(
        page,
        """{
          start: c.querySelector('ol').getAttribute('start'),
          top: [...c.querySelector('ol').children].map((li) => li.firstChild.textContent),
          nested: c.querySelectorAll('ol > li > ul > li').length,
          deep: c.querySelector('ol > li > ul > li > ol > li')?.textContent,
          lists: [...c.children].map((e) => e.tagName),
        }""",
    )
    assert shape == {
        "start": "3",
        "top": ["three", "four", "five"],
        "nested": 2,
        "deep": "deep",
        "lists": ["OL", "UL"],
    }


def test_blockquotes_and_headings(page):
    render(page, "# One\n### Three ###\n#not\n> quoted **bold**\n> > inner\n\n---\n")
    shape = query(
        page,
        """{
          h1: c.querySelector('h1').textContent,
          h3: c.querySelector('h3').textContent,
          paragraphs: [...c.querySelectorAll(':scope > p')].map((p) => p.textContent),
          quote: c.querySelector('blockquote > p > strong')?.textContent,
          inner: c.querySelector('blockquote > blockquote > p')?.textContent,
          rules: c.querySelectorAll('hr').length,
        }""",
    )
    assert shape == {
        "h1": "One",
        "h3": "Three",
        "paragraphs": ["#not"],
        "quote": "bold",
        "inner": "inner",
        "rules": 1,
    }


def test_inline_styles_code_and_escapes(page):
    result = render(
        page,
        "**b** *i* _u_ ~~s~~ ***bi*** `a **b** <i>` snake_case_name 2 * 3 \\*lit\\* ``x ` y``",
    )
    html = result["html"]
    assert "<strong>b</strong>" in html and "<em>i</em>" in html and "<em>u</em>" in html
    assert "<del>s</del>" in html and "<strong><em>bi</em></strong>" in html
    assert "<code>a **b** &lt;i&gt;</code>" in html and "<code>x ` y</code>" in html
    assert "snake_case_name" in result["text"] and "2 * 3 *lit*" in result["text"]


def test_links_open_in_a_new_tab_and_bare_urls_are_links(page):
    render(
        page,
        "[docs](https://example.com/a_(b)) and https://example.org/x. and <https://e.net/y>"
        " and <me@example.com> and [mail](mailto:me@example.com)",
    )
    links = query(
        page,
        "[...c.querySelectorAll('a')].map((a) => [a.textContent, a.getAttribute('href'),"
        " a.target, a.rel])",
    )
    new_tab = ["_blank", "noopener noreferrer"]
    assert links == [
        ["docs", "https://example.com/a_(b)", *new_tab],
        ["https://example.org/x", "https://example.org/x", *new_tab],
        ["https://e.net/y", "https://e.net/y", *new_tab],
        ["me@example.com", "mailto:me@example.com", *new_tab],
        ["mail", "mailto:me@example.com", *new_tab],
    ]


def test_citations_link_when_the_page_knows_the_source(page):
    result = render(
        page,
        "Fact [1]. Both [1][2]. Listed [1, 2]. Unknown [3]. Code `[1]`.\n",
        citations={"1": "#m1-source-1", "2": "#m1-source-2"},
    )
    links = query(
        page,
        "[...c.querySelectorAll('a')].map((a) => [a.className, a.getAttribute('href'),"
        " a.textContent, a.hasAttribute('target')])",
    )
    one = ["citation", "#m1-source-1", "[1]", False]
    two = ["citation", "#m1-source-2", "[2]", False]
    assert links == [one, one, two, one, two]
    assert "Unknown [3]." in result["text"] and "<code>[1]</code>" in result["html"]


def test_citations_stay_text_when_the_page_has_no_source(page):
    result = render(page, "Fact [1] and [1, 2].\n", citations={})
    assert query(page, "c.querySelectorAll('a').length") == 0
    assert result["text"] == "Fact [1] and [1, 2]."


# -- hostile input -----------------------------------------------------------------------------

HOSTILE = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "[x](javascript:alert(1))",
    "[x](JaVaScRiPt:alert(1))",
    "[x](data:text/html,<script>alert(1)</script>)",
    "[x](java\tscript:alert(1))",
    "[x](java\\tscript:alert(1))",
    "[x]( javascript:alert(1))",
    "[x](<javascript:alert(1)>)",
    "[x](vbscript:msgbox(1))",
    "[x](//203.0.113.5/x)",
    "[x](/relative/path)",
    "<javascript:alert(1)>",
    "![i](http://203.0.113.5/x.png)",
    "![](https://203.0.113.5/y.png)",
    "| a | b |\n|---|---|\n| <img src=x onerror=alert(1)> | <script>alert(2)</script> |",
    '<a href="javascript:alert(1)">click</a>',
    '<iframe src="javascript:alert(1)"></iframe><object data=x></object>',
    '<b style="color:red" onclick="alert(1)">b</b>',
    "**<svg onload=alert(1)>**",
    "```\n<img src=x onerror=alert(1)>",
]


def test_hostile_markdown_stays_text(page):
    for text in HOSTILE:
        render(page, text + "\n")
    # Give any event a loaded element could fire (onerror, onload) the chance to run.
    page.evaluate("() => new Promise((resolve) => setTimeout(resolve, 300))")
    found = page.evaluate(
        """() => {
          const boxes = [...document.querySelectorAll('.md-test')];
          const all = boxes.flatMap((b) => [...b.querySelectorAll('*')]);
          return {
            boxes: boxes.length,
            dangerous: all.filter((e) => /^(script|img|iframe|object|embed|svg|style)$/i
              .test(e.tagName)).map((e) => e.outerHTML),
            handlers: all.filter((e) => [...e.attributes].some((a) => /^on/i.test(a.name)))
              .map((e) => e.outerHTML),
            styled: all.filter((e) => e.hasAttribute('style')).length,
            hrefs: all.filter((e) => e.hasAttribute('href')).map((e) => e.href),
            texts: boxes.map((b) => b.textContent),
          };
        }"""
    )
    assert found["boxes"] == len(HOSTILE)
    assert found["dangerous"] == [] and found["handlers"] == [] and found["styled"] == 0
    assert found["hrefs"] == []  # not one of these is a safe link
    assert page.log.dialogs == []
    assert page.log.outside() == []
    texts = dict(zip(HOSTILE, found["texts"], strict=True))
    assert "<script>alert(1)</script>" in texts["<script>alert(1)</script>"]
    assert "<img src=x onerror=alert(1)>" in texts["<img src=x onerror=alert(1)>"]
    assert "javascript:alert(1)" in texts['<a href="javascript:alert(1)">click</a>']
    assert texts["[x](javascript:alert(1))"] == "x"
    assert texts["![i](http://203.0.113.5/x.png)"] == "i"
    assert "<script>alert(2)</script>" in texts[HOSTILE[15]]
    assert query(page, "c.querySelector('pre code').textContent") == "<img src=x onerror=alert(1)>"


def test_deep_nesting_and_unmatched_markers_render_as_text(page):
    cases = {
        ">" * 5000 + " deep": "deep",
        "1. " * 3000 + "x": "x",
        "*_" * 3000 + "x" + "_*" * 3000: "x",
        "[" * 20000: "[" * 20000,
        "* a " * 5000: "a * a",
        "a " + "`" * 9999: "`" * 9999,
    }
    texts = page.evaluate(
        """async (inputs) => {
          const m = await import('/static/js/markdown.js');
          return inputs.map((t) => {
            const box = document.createElement('div');
            box.append(m.renderMarkdown(t));
            return box.textContent;
          });
        }""",
        list(cases),
    )
    for text, expected in zip(cases.values(), texts, strict=True):
        assert text in expected


# -- a long answer -----------------------------------------------------------------------------


SECTIONS = 80


def test_a_20_kb_mixed_answer_renders_whole(page):
    section = textwrap.dedent(
        """\
        ## Section {n}

        Text with **bold**, *italic*, `code`, a [link](https://example.com/{n}) and a cite [1].
        Second line with https://example.org/{n}.

        - item one
          - nested {n}
        1. first
        2. second

        | k | v |
        |---|--:|
        | a | {n} |

        > a quote

        ```js
        console.log({n});
        ```

        """
    )
    text = "".join(section.format(n=n) for n in range(SECTIONS))
    assert len(text) > 20_000
    render(page, text, citations={"1": "#s-1"})
    counts = query(
        page,
        """{
          h2: c.querySelectorAll('h2').length, tables: c.querySelectorAll('table').length,
          code: c.querySelectorAll('.code-block').length,
          nested: c.querySelectorAll('ul ul').length,
          links: c.querySelectorAll('a:not(.citation)').length,
          cites: c.querySelectorAll('a.citation').length,
          quotes: c.querySelectorAll('blockquote').length,
          last: c.querySelector('.code-block:last-of-type code').textContent,
        }""",
    )
    n = SECTIONS
    assert counts == {
        "h2": n,
        "tables": n,
        "code": n,
        "nested": n,
        "links": 2 * n,
        "cites": n,
        "quotes": n,
        "last": f"console.log({n - 1});",
    }
