"""The README's pictures: a finished search + fetch answer, light and dark, the same on a
phone (400 px), an answer with a wide table, and a regenerated answer showing its versions.

Every run takes them (into a temporary folder) and checks what they show; `make screenshots`
sets SCREENSHOT_DIR=docs to refresh the committed ones. Look at them before committing.
"""

from __future__ import annotations

import os
from pathlib import Path

from playwright.sync_api import expect

from tests.browser import opened
from tests.fakes.llm_server import Reply, ToolCall
from tests.page_actions import send, wait_turn_end

QUESTION = "Jak długo gotować pierogi z kapustą?"
ANSWER = """Pierogi gotuje się krótko: wrzuca się je na osolony wrzątek i liczy od chwili, \
gdy wypłyną [21].

| Farsz | Minuty po wypłynięciu |
|---|--:|
| Ziemniaki i ser | 4 |
| Kapusta i grzyby | 5 |

Farsz z surowego mięsa potrzebuje dłużej niż farsz ugotowany wcześniej [21]. Jeśli \
robisz ich dużo, gotuj partiami:

```python
for batch in batches(pierogi, 12):
    boil(batch, minutes=5)
```

Podawaj z podsmażoną cebulką i kwaśną śmietaną [1].
"""


def test_screenshots_of_a_finished_search_and_fetch_answer(browser, chat, llm, pages, tmp_path):
    target = Path(os.environ.get("SCREENSHOT_DIR") or tmp_path)
    target.mkdir(parents=True, exist_ok=True)
    llm.script(
        Reply(
            reasoning="The user asks in Polish about cooking times; search in Polish.",
            tool_calls=[ToolCall("web_search", {"query": "pierogi z kapustą czas gotowania"})],
        ),
        Reply(tool_calls=[ToolCall("web_fetch", {"url": f"{pages.url}/article"})]),  # given below
        Reply(
            text=ANSWER,
            usage={
                "prompt_tokens": 6120,
                "completion_tokens": 212,
                "prompt_tokens_details": {"cached_tokens": 3900},
            },
            chunk_delay=0.005,
        ),
    )
    for scheme, width, height in (("light", 1280, 900), ("dark", 1280, 900), ("phone", 400, 800)):
        with opened(browser, chat.url, width=width, height=height, dark=scheme == "dark") as page:
            if scheme == "light":
                # A search and a page read (the first starts the extraction worker): waited
                # for as every page test waits for a turn, not Playwright's 5 s.
                send(page, f"{QUESTION} {pages.url}/article")
                wait_turn_end(page)
                address = page.url
            else:
                page.goto(address)
            expect(page.locator(".answer table")).to_be_visible()
            # The page read, then the result the answer cites beside it; the others folded.
            expect(page.locator(".source-chip")).to_have_count(2)
            expect(page.locator(".source-chip .source-title").first).to_have_text(
                "Pierogi, step by step"
            )
            page.locator(".trail summary").click()
            expect(page.locator(".timeline")).to_contain_text("pierogi z kapustą")
            if scheme == "phone":  # the answer's end: its sources and its line of figures
                page.locator(".answer-stats").scroll_into_view_if_needed()
                assert page.evaluate("document.documentElement.scrollWidth") <= width
            path = target / f"page-{scheme}.png"
            page.screenshot(path=str(path))
            assert path.stat().st_size > 20_000
            assert page.log.errors == [] and page.log.outside() == []


VERSION_QUESTION = "Suggest a name for a small pierogi shop in Kraków."
FIRST_VERSION = """A few names that say what you sell and where:

1. **Pierogarnia pod Wawelem** — the castle hill everyone in Kraków knows
2. **Lepione** — "hand-folded", which is what sets you apart
3. **Babcine Pierogi** — grandmother's pierogi, warm and familiar
"""
SECOND_VERSION = """Shorter names are easier to remember and to find on a map:

1. **Ulep** — from *ulepić*, to shape by hand
2. **Farsz** — the filling, the heart of every pieróg
3. **Pieróg i Spółka** — "Pierogi & Co.", friendly and plain

If the shop is near the Main Square, a name with *Rynek* helps tourists find it.
"""


def test_screenshot_of_a_regenerated_answer_with_its_versions(browser, chat, llm, tmp_path):
    target = Path(os.environ.get("SCREENSHOT_DIR") or tmp_path)
    target.mkdir(parents=True, exist_ok=True)
    usage = {"prompt_tokens": 1480, "completion_tokens": 96}
    llm.script(
        Reply(text=FIRST_VERSION, usage=usage, chunk_delay=0.005),
        Reply(text=SECOND_VERSION, usage=usage, chunk_delay=0.005),
    )
    with opened(browser, chat.url, width=1280, height=900) as page:
        send(page, VERSION_QUESTION)
        wait_turn_end(page)
        page.get_by_role("button", name="Regenerate").click()
        wait_turn_end(page)
        expect(page.locator(".versions .version-count")).to_have_text("2/2")
        expect(page.locator(".answer")).to_contain_text("Ulep")
        page.locator("#composer-input").focus()
        path = target / "page-versions.png"
        page.screenshot(path=str(path))
        assert path.stat().st_size > 20_000
        assert page.log.errors == [] and page.log.outside() == []


TABLE_QUESTION = "Porównaj popularne serwery WWW"
TABLE_ROWS = (
    "| Serwer | Język | Pierwsze wydanie | Licencja | Konfiguracja | Reverse proxy | HTTP/3 "
    "| Certyfikaty TLS | Udział w rynku |",
    "|:--|:--:|--:|:--:|:--|:--:|:--:|:--|--:|",
    "| nginx | C | 2004 | BSD-2-Clause | nginx.conf, bloki server | wbudowane | od 1.25 "
    "| certbot, ręcznie | 34,1% |",
    "| Apache httpd | C | 1995 | Apache-2.0 | httpd.conf, .htaccess | mod_proxy | nie "
    "| mod_md, certbot | 29,8% |",
    "| Caddy | Go | 2015 | Apache-2.0 | Caddyfile albo JSON | wbudowane | domyślnie "
    "| automatycznie (ACME) | 0,9% |",
    "| LiteSpeed | C++ | 2003 | GPLv3 / komercyjna | panel WebAdmin | wbudowane | tak "
    "| panel, ACME | 13,5% |",
)
TABLE_ANSWER = (
    "Najczęściej spotykane serwery i ich cechy:\n\n"
    + "\n".join(TABLE_ROWS)
    + "\n\nDla prostego reverse proxy zwykle wystarcza nginx albo Caddy.\n"
)


def test_screenshot_of_a_wide_table(browser, chat, llm, tmp_path):
    target = Path(os.environ.get("SCREENSHOT_DIR") or tmp_path)
    target.mkdir(parents=True, exist_ok=True)
    llm.script(Reply(text=TABLE_ANSWER, usage={"prompt_tokens": 900, "completion_tokens": 180}))
    with opened(browser, chat.url, width=1280, height=900) as page:
        send(page, TABLE_QUESTION)
        wait_turn_end(page)
        table = page.locator(".answer table")
        expect(table.locator("td.align-right").last).to_have_text("13,5%")
        assert table.evaluate("t => t.scrollWidth > t.clientWidth"), "the table does not scroll"
        path = target / "page-table.png"
        page.screenshot(path=str(path))
        assert path.stat().st_size > 20_000
        assert page.log.errors == [] and page.log.outside() == []
