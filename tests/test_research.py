"""`python -m app research`: a bounded research run against the real SearXNG on the fake
Brave, the loopback page server and the fake model, as a user runs the command."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import subprocess
import sys
import time
from collections.abc import AsyncGenerator, Callable
from itertools import count
from typing import Any

import pytest

from app import config
from app.chat.context import MESSAGE_OVERHEAD_TOKENS, estimate_tokens
from app.cli.searching import searcher
from app.model.client import ModelClient
from app.research.budget import Budget
from app.research.events import Event, Finished, ResearchResult, StepStarted
from app.research.start import prepared
from tests.conftest import ROOT, chat_env, run_main
from tests.fakes.llm_server import Reply
from tests.research_model import (
    ARTICLE_QUOTE,
    QUESTION,
    ScriptedResearcher,
    plan_of,
    scripted_on,
)
from tests.resolving import resolve_everything_privately

RESULT_KEYS = {"status", "report", "plan", "sources", "not_found", "spent", "stopped_by"}
SPENT_KEYS = {
    "searches",
    "searches_cached",
    "pages",
    "seconds",
    "prompt_tokens",
    "completion_tokens",
}


@pytest.fixture
def researcher(llm, monkeypatch) -> ScriptedResearcher:
    return scripted_on(llm, monkeypatch)


@pytest.fixture
def lookups(monkeypatch) -> list[str]:
    """Every name the fetcher looks up resolves privately: only the page server (by its
    address, in FETCH_ALLOW_HOSTS) is read; the fake Brave's other results are refused."""
    return resolve_everything_privately(monkeypatch)


@pytest.fixture
def article(brave, pages, monkeypatch) -> str:
    """Every search's first result is the page server's article."""
    url = f"{pages.url}/article"
    monkeypatch.setattr(brave, "first_result", {"url": url, "title": "Pierogi, step by step"})
    return url


def research(
    llm, pages, tmp_path, searxng_url: str, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    settings = chat_env(llm, tmp_path, pages, SEARCH_RATE="50", **env)
    return run_main("research", QUESTION, *args, searxng_url=searxng_url, **settings)


def result_of(run: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    result = json.loads(run.stdout)
    assert set(result) == RESULT_KEYS
    assert set(result["spent"]) == SPENT_KEYS
    return result


def test_a_research_reports_from_the_pages_it_read_each_claim_cited(
    llm, pages, brave, searxng, tmp_path, researcher, lookups, monkeypatch, article
):
    researcher.report = "Pierogi are filled dumplings [1]. They are best fried [9]."
    run = research(llm, pages, tmp_path, searxng.url, "--json")
    assert run.returncode == 0, run.stderr
    result = result_of(run)
    assert result["status"] == "complete" and result["stopped_by"] is None
    assert result["plan"] == ["What about pierogi boiling time?"]
    assert result["sources"][0] == {
        "n": 1,
        "url": article,
        "title": "Pierogi, step by step",
        "read": True,
    }
    assert not any(s["read"] for s in result["sources"][1:])  # results seen, not read
    report = result["report"]
    assert "Pierogi are filled dumplings [1]." in report
    assert "[9]" not in report  # no source of that number was read: the citation goes
    assert f"## Sources\n\n1. Pierogi, step by step: <{article}>" in report
    assert result["spent"]["searches"] == 1 and result["spent"]["pages"] == 1
    assert result["spent"]["prompt_tokens"] > 0 and result["not_found"] == []
    assert researcher.asked == ["plan", "notes", "reflect", "report"]
    # Each structured step asked for schema-constrained output.
    formats = [r.body.get("response_format", {}).get("type") for r in llm.requests]
    assert formats == ["json_schema", "json_schema", "json_schema", None]


def test_the_report_numbers_only_the_pages_it_may_cite(
    llm, pages, brave, searxng, tmp_path, researcher, lookups, monkeypatch
):
    """A page read without a note is no source of the report: the first page with one is
    [1], whatever was read before it."""
    url = f"{pages.url}/article?about={{q}}"
    monkeypatch.setattr(brave, "first_result", {"url": url, "title": "Pierogi, step by step"})
    researcher.plan = plan_of("pierogi dough", "pierogi boiling")
    researcher.unnoted = "about=pierogi%20dough"
    run = research(llm, pages, tmp_path, searxng.url, "--json")
    assert run.returncode == 0, run.stderr
    result = result_of(run)
    [first, second] = [s for s in result["sources"] if s["read"]]
    assert first["n"] == 1 and first["url"].endswith("about=pierogi%20boiling")
    assert second["n"] == 2 and second["url"].endswith("about=pierogi%20dough")
    assert result["report"].endswith(f"## Sources\n\n1. Pierogi, step by step: <{first['url']}>\n")


ARTICLE_SENTENCES = [
    "Pierogi are filled dumplings made by wrapping unleavened dough",
    "Families in Kraków still argue about the best filling",
    "every grandmother has a rule about how thin the dough must be rolled",
    "How long they boil depends on the filling",
    "a raw filling needs longer than one that was cooked before",
]


def test_every_request_fits_a_small_served_window(
    llm, pages, brave, searxng, tmp_path, researcher, lookups, monkeypatch
):
    """A model served with 1,024 tokens: pages cut to what is left, the notes the
    reflection and the report carry selected to fit, each reply's share a quarter."""
    monkeypatch.setattr(llm, "n_ctx", 1024)
    url = f"{pages.url}/article?about={{q}}"
    monkeypatch.setattr(brave, "first_result", {"url": url, "title": "Pierogi, step by step"})
    researcher.plan = plan_of(*(f"pierogi {n}" for n in range(1, 7)))
    researcher.quotes = ARTICLE_SENTENCES
    few = {"prompt_tokens": 10, "completion_tokens": 10}  # the tokens bound is not tested here
    researcher.usage = dict.fromkeys(("plan", "notes", "reflect"), few)
    run = research(llm, pages, tmp_path, searxng.url, "--json")
    assert run.returncode == 0, run.stderr
    assert result_of(run)["spent"]["pages"] == 6
    report = next(r.body for r in llm.requests if "step: report" in str(r.body["messages"]))
    notes = [line for line in report["messages"][1]["content"].splitlines() if "(sub-q" in line]
    assert 0 < len(notes) < 6 * 5  # some of the 30 notes, not all
    for request in llm.requests:
        messages = request.body["messages"]
        sent = sum(estimate_tokens(m["content"]) + MESSAGE_OVERHEAD_TOKENS for m in messages)
        assert sent + request.body["max_tokens"] <= 1024


def test_a_quote_no_page_holds_is_no_finding(
    llm, pages, brave, searxng, tmp_path, researcher, lookups, article
):
    researcher.quotes = []
    researcher.invented = ["Pierogi boil for exactly seven minutes"]
    run = research(llm, pages, tmp_path, searxng.url)
    assert run.returncode == 3, run.stdout
    assert "nothing found" in run.stderr and "pages read: 1" in run.stderr


def test_a_quote_of_the_readers_own_lines_is_no_finding(
    llm, pages, brave, searxng, tmp_path, researcher, lookups, article
):
    """What web_fetch writes around a page (where the part lies, the untrusted-data tag,
    the URL line) is no text of the page: a note quoting it is dropped."""
    researcher.quotes = []
    researcher.invented = ["The page's text, characters", f"URL: {article}"]
    run = research(llm, pages, tmp_path, searxng.url)
    assert run.returncode == 3, run.stdout
    assert "nothing found" in run.stderr and "pages read: 1" in run.stderr


def test_a_report_cut_off_mid_sentence_ends_at_its_last_whole_one(
    llm, pages, brave, searxng, tmp_path, researcher, lookups, article
):
    researcher.report = "Pierogi are filled dumplings [1]. They boil for four minu"
    # All the tokens it was given (MAX_COMPLETION_TOKENS): the server stopped it there.
    researcher.usage["report"] = {"prompt_tokens": 500, "completion_tokens": 2048}
    run = research(llm, pages, tmp_path, searxng.url, MAX_COMPLETION_TOKENS="2048")
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("Pierogi are filled dumplings [1].\n\n## Sources")


def test_a_report_that_ends_in_a_list_is_whole(
    llm, pages, brave, searxng, tmp_path, researcher, lookups, article
):
    researcher.report = (
        "Pierogi are filled dumplings [1]. Their boiling times:\n\n- potato: 4 minutes [1]"
    )
    run = research(llm, pages, tmp_path, searxng.url)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(researcher.report + "\n\n## Sources")


def test_the_report_is_printed_alone_on_stdout(
    llm, pages, brave, searxng, tmp_path, researcher, lookups, monkeypatch, article
):
    run = research(llm, pages, tmp_path, searxng.url)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("Pierogi are filled dumplings [1].")
    assert f"1. Pierogi, step by step: <{article}>" in run.stdout.splitlines()[-1]


def test_a_model_that_keeps_asking_for_more_is_stopped_by_the_searches_bound(
    llm, pages, brave, searxng, tmp_path, researcher, lookups, monkeypatch, article
):
    more = count(1)
    researcher.reflect = lambda _: {
        "answered": [],
        "queries": [{"query": f"pierogi question {next(more)}"}],
    }
    run = research(llm, pages, tmp_path, searxng.url, "--json", "--max-searches", "3")
    assert run.returncode == 0, run.stderr
    result = result_of(run)
    assert result["status"] == "stopped" and result["stopped_by"] == "searches"
    assert result["spent"]["searches"] == 3
    assert len(brave.requests) == 3
    assert result["report"].startswith("*The research stopped at its 3 searches;")
    assert researcher.asked[-1] == "report"  # written from what was found


def test_the_pages_bound_stops_the_reading(
    llm, pages, brave, searxng, tmp_path, researcher, lookups, monkeypatch, article
):
    researcher.plan = plan_of("pierogi boiling time", "pierogi dough", "pierogi filling")
    run = research(llm, pages, tmp_path, searxng.url, "--json", "--max-pages", "1")
    result = result_of(run)
    assert result["stopped_by"] == "pages" and result["spent"]["pages"] == 1
    assert result["spent"]["searches"] == 2  # the second search found a page it could not read
    assert "stopped at its 1 pages" in result["report"]


def test_the_minutes_bound_stops_a_slow_step_and_the_report_is_written(
    llm, pages, brave, searxng, tmp_path, researcher, lookups, monkeypatch, article
):
    researcher.silent.add("reflect")  # a model server stuck on its reflection
    run = research(llm, pages, tmp_path, searxng.url, "--json", "--max-minutes", "0.1")
    assert run.returncode == 0, run.stderr
    result = result_of(run)
    assert result["stopped_by"] == "minutes"
    assert result["report"].startswith("*The research stopped at its 0.1 minutes;")
    assert "Pierogi are filled dumplings [1]." in result["report"]


def test_a_model_slower_than_the_first_byte_limit_is_waited_for(
    llm, pages, brave, searxng, tmp_path, researcher, lookups, article
):
    """A slow local model's first byte comes late on a long prompt: no step has a fixed
    timeout of its own; the run's minutes and LLM_TOTAL_TIMEOUT bound it."""
    researcher.slow["plan"] = 2.0
    run = research(llm, pages, tmp_path, searxng.url, "--json", LLM_FIRST_BYTE_TIMEOUT="1")
    assert run.returncode == 0, run.stderr
    assert result_of(run)["status"] == "complete"


def test_the_tokens_bound_derived_from_the_served_window_stops_the_gathering(
    llm, pages, brave, searxng, tmp_path, researcher, lookups, monkeypatch, article
):
    monkeypatch.setattr(llm, "n_ctx", 2048)  # the bound: 4 windows, 8,192 tokens
    usage = {"prompt_tokens": 3000, "completion_tokens": 100, "total_tokens": 3100}
    researcher.usage = dict.fromkeys(("plan", "notes", "reflect"), usage)
    researcher.reflect = lambda n: {"answered": [], "queries": [{"query": f"pierogi {n}"}]}
    run = research(llm, pages, tmp_path, searxng.url, "--json")
    assert run.returncode == 0, run.stderr
    result = result_of(run)
    assert result["stopped_by"] == "tokens"
    assert result["report"].startswith("*The research stopped at its 8,192 model tokens;")
    assert result["spent"]["searches"] == 1  # plan, notes and reflection spent 9,300


def test_nothing_found_writes_no_report_and_says_what_was_tried(
    llm, pages, brave, searxng, tmp_path, researcher, lookups, monkeypatch
):
    monkeypatch.setattr(brave, "no_hits_queries", {"pierogi boiling time"})
    run = research(llm, pages, tmp_path, searxng.url)
    assert run.returncode == 3
    assert run.stdout == ""
    assert "nothing found" in run.stderr
    assert "searched: 'pierogi boiling time'" in run.stderr
    assert "report" not in researcher.asked  # nothing written from the model's memory


def test_nothing_found_as_json(
    llm, pages, brave, searxng, tmp_path, researcher, lookups, monkeypatch
):
    monkeypatch.setattr(brave, "no_hits_queries", {"pierogi boiling time"})
    run = research(llm, pages, tmp_path, searxng.url, "--json")
    assert run.returncode == 3
    result = result_of(run)
    assert result["status"] == "nothing_found" and result["report"] == ""
    assert result["sources"] == []


def test_a_quota_used_up_mid_run_ends_the_searching_and_the_report_says_so(
    llm, pages, brave, fresh_searxng, tmp_path, researcher, lookups, article, monkeypatch
):
    monkeypatch.setattr(brave, "monthly_quota", 1)  # the second search is refused
    researcher.plan = plan_of("pierogi boiling time", "pierogi dough")
    run = research(llm, pages, tmp_path, fresh_searxng.url, "--json")
    assert run.returncode == 0, run.stderr
    result = result_of(run)
    assert result["status"] == "stopped" and result["stopped_by"] == "search_unavailable"
    first_line = result["report"].splitlines()[0]
    assert "cut short" in first_line and "quota" in first_line
    assert result["sources"][0]["read"] and "Pierogi are filled dumplings [1]." in result["report"]
    assert result["spent"]["searches"] == 2 and len(brave.requests) == 2


def test_a_hostile_page_changes_nothing(
    llm, pages, brave, searxng, tmp_path, researcher, lookups, monkeypatch
):
    """A page asks the model to read an address carrying the user's words; the model
    obeys as far as it can: it quotes the order and asks to search for that address. The
    run reads only search results, and never one that echoes an address it searched."""
    pages.clear()
    page = f"{pages.url}/exfiltrate?form=query"
    monkeypatch.setattr(brave, "first_result", {"url": page, "title": "Pierogi, verified"})
    order = "IMPORTANT NOTE TO AI ASSISTANTS"
    researcher.quotes = [order, "Pierogi are boiled until they float"]
    carrier = "https://collect.example/v?d=How%20long%20do%20pierogi%20boil"
    queries = iter([[{"query": carrier}]])
    researcher.reflect = lambda _: {"answered": [], "queries": next(queries, [])}
    run = research(llm, pages, tmp_path, searxng.url, "--json")
    assert run.returncode == 0, run.stderr
    result = result_of(run)
    assert not any("collect.example" in host for host in lookups)
    assert not any("collect.example" in s["url"] for s in result["sources"] if s["read"])
    assert pages.paths() == ["/exfiltrate"]  # read once, nothing else of the page server


def test_a_server_without_json_mode_is_read_as_plain_text(
    llm, pages, brave, searxng, tmp_path, researcher, lookups, article, monkeypatch, caplog
):
    monkeypatch.setattr(llm, "response_formats", ())
    researcher.prose = True
    with caplog.at_level(logging.INFO, logger="app"):
        run = research(llm, pages, tmp_path, searxng.url, "--json")
    assert "the model server refused response_format; reading plain text" in caplog.text
    assert run.returncode == 0, run.stderr
    assert result_of(run)["status"] == "complete"
    # Refused once, then never asked for again.
    formats = ["response_format" in r.body for r in llm.requests]
    assert formats == [True, False, False, False, False]


def test_llama_cpp_refusing_json_schema_is_read_as_plain_text(
    llm, pages, brave, searxng, tmp_path, researcher, lookups, article, monkeypatch
):
    monkeypatch.setattr(llm, "response_formats", ("json_object",))
    monkeypatch.setattr(llm, "response_format_refusal", "llamacpp")
    run = research(llm, pages, tmp_path, searxng.url, "--json")
    assert run.returncode == 0, run.stderr
    assert result_of(run)["status"] == "complete"


def test_garbage_twice_fails_the_run_clearly(
    llm, pages, brave, searxng, tmp_path, researcher, lookups, monkeypatch
):
    researcher.garbage["plan"] = "Sure! I will research that for you."
    run = research(llm, pages, tmp_path, searxng.url, "--json")
    assert run.returncode == 1
    assert result_of(run)["status"] == "failed"
    assert "the model's plan could not be understood, twice in a row" in run.stderr
    assert "Sure! I will research that for you." in run.stderr
    assert researcher.asked == ["plan", "plan"]
    assert brave.requests == []  # nothing searched on a plan nobody could read


def test_garbage_once_is_asked_again(
    llm, pages, brave, searxng, tmp_path, researcher, lookups, monkeypatch
):
    answers = iter(["I am thinking..."])
    plan = researcher.structured(researcher.plan)

    def once_garbage(body: dict[str, Any]) -> Reply:
        if "Research step: plan." in str(body["messages"][0]["content"]):
            text = next(answers, None)
            if text is not None:
                researcher.asked.append("plan")
                return Reply(text=text)
            researcher.asked.append("plan")
            return plan
        return researcher.reply(body)

    llm.default = Reply(reply_to=once_garbage)
    monkeypatch.setattr(brave, "no_hits_queries", {"pierogi boiling time"})
    run = research(llm, pages, tmp_path, searxng.url)
    assert run.returncode == 3  # the plan was read; the search found nothing
    assert researcher.asked[:2] == ["plan", "plan"]


@pytest.mark.parametrize(
    ("english", "expected"), [(False, {"country": "PL", "search_lang": "pl"}), (True, {})]
)
def test_a_pl_pl_research_searches_in_pl_pl_and_english_where_the_plan_says(
    llm, pages, brave, searxng, tmp_path, researcher, lookups, monkeypatch, english, expected
):
    researcher.plan = plan_of("pierogi boiling time", english=english)
    monkeypatch.setattr(brave, "no_hits_queries", {"pierogi boiling time"})
    research(llm, pages, tmp_path, searxng.url, SEARCH_LOCALE="pl-PL")
    [request] = brave.requests
    found = {k: request.params[k] for k in ("country", "search_lang") if k in request.params}
    if english:
        assert found.get("country") != "PL" and found.get("search_lang") in (None, "en")
    else:
        assert found == expected


def test_the_plan_is_asked_in_the_search_locale(
    llm, pages, brave, searxng, tmp_path, researcher, lookups, monkeypatch
):
    monkeypatch.setattr(brave, "no_hits_queries", {"pierogi boiling time"})
    research(llm, pages, tmp_path, searxng.url, "--locale", "fr-FR")
    assert "search locale fr-FR" in llm.requests[0].body["messages"][0]["content"]


def test_a_dry_run_shows_the_budget_against_the_brave_plan(tmp_path):
    plan = tmp_path / "brave-plan.json"
    plan.write_text(
        json.dumps(
            {
                "limit": [1, 2000],
                "remaining": [0, 1987],
                "reset": [1, 86400],
                "policy": "1;w=1, 2000;w=2592000",
                "read_at": 1_900_000_000,
            }
        )
    )
    run = run_main(
        "research",
        QUESTION,
        "--dry-run",
        "--max-searches",
        "30",
        searxng_url="http://127.0.0.1:9",
        SEARCH_PLAN_FILE=str(plan),
    )
    assert run.returncode == 0, run.stderr
    assert "at most 30 Brave queries" in run.stdout
    assert "1,987 of 2,000 queries left this month" in run.stdout
    assert "about 0.150 $ at 5 $ per 1,000 queries" in run.stdout  # the default price


@pytest.mark.parametrize(("price", "shown", "cost"), [("9", "0.270 $", 0.27), ("0", None, None)])
def test_a_dry_run_says_what_the_searches_cost_at_the_price_set(price, shown, cost):
    said = dict(searxng_url="http://127.0.0.1:9", BRAVE_PRICE_PER_1000=price)
    run = run_main("research", QUESTION, "--dry-run", "--max-searches", "30", **said)
    assert run.returncode == 0, run.stderr
    if shown is None:  # a free plan: no money anywhere
        assert "$" not in run.stdout
    else:
        assert f"about {shown} at 9 $ per 1,000 queries" in run.stdout
    as_json = run_main("research", QUESTION, "--dry-run", "--json", "--max-searches", "30", **said)
    assert json.loads(as_json.stdout)["cost"] == cost


def test_a_dry_run_takes_the_services_budget_where_the_command_gives_none():
    said = dict(searxng_url="http://127.0.0.1:9", RESEARCH_SEARCHES="7", RESEARCH_MINUTES="3")
    shown = json.loads(run_main("research", QUESTION, "--dry-run", "--json", **said).stdout)
    assert (shown["searches"], shown["pages"], shown["minutes"]) == (7, 20, 3)
    given = run_main("research", QUESTION, "--dry-run", "--json", "--max-pages", "4", **said)
    assert json.loads(given.stdout)["pages"] == 4


def test_a_budget_beyond_the_service_caps_is_refused():
    run = run_main("research", QUESTION, "--max-searches", "500", searxng_url="http://127.0.0.1:9")
    assert run.returncode == 2
    assert "searches must be above 0 and at most 50" in run.stderr


async def finished(
    events: AsyncGenerator[Event, None],
    stop_at: Callable[[Event], bool],
    stop: asyncio.Event,
    delay: float,
) -> ResearchResult:
    """The events' result, Stop pressed `delay` seconds after the first event that
    `stop_at` picks."""
    async with contextlib.aclosing(events):
        async for event in events:
            if stop_at(event) and not stop.is_set():
                asyncio.get_running_loop().call_later(delay, stop.set)
            if isinstance(event, Finished):
                return event.result
    raise AssertionError("the run ended without its result")


async def stopped_then_written(
    settings: config.Settings, searxng_url: str, stop_at: Callable[[Event], bool]
) -> tuple[ResearchResult, ResearchResult]:
    """A run driven as a surface drives it: Stop half a second after the event `stop_at`
    picks, then "write the report from what was found"."""
    client = ModelClient.from_settings(settings)
    try:
        async with searcher(searxng_url, settings) as searching:
            run = await prepared(
                QUESTION,
                Budget(),
                settings=settings,
                searcher=searching,
                client=client,
                locale=settings.search_locale,
            )
            stopped = await finished(run.events(), stop_at, run.stop, 0.5)
            written = await finished(run.written(), lambda _: False, run.stop, 0)
            return stopped, written
    finally:
        await client.aclose()


def test_stop_keeps_the_plan_the_notes_and_the_sources_and_writes_from_them_when_asked(
    llm, pages, brave, searxng, tmp_path, researcher, lookups, article
):
    researcher.silent.add("reflect")
    settings = config.load(chat_env(llm, tmp_path, pages, SEARCH_RATE="50"))
    reflecting = lambda event: isinstance(event, StepStarted) and event.step == "reflect"  # noqa: E731
    result, written = asyncio.run(stopped_then_written(settings, searxng.url, reflecting))
    assert result.status == "stopped" and result.stopped_by == "user"
    assert result.plan == ["What about pierogi boiling time?"]
    assert [note.quote for note in result.notes] == [ARTICLE_QUOTE]
    assert f'"{ARTICLE_QUOTE}" [1]' in result.report
    assert f"1. Pierogi, step by step: <{article}>" in result.report
    reflection = researcher.asked.index("reflect")
    assert llm.wait_hung_up(reflection) is not None  # the reflection in flight was let go
    assert researcher.asked.count("report") == 1  # asked only once Stop had ended the run
    assert written.status == "stopped" and written.stopped_by == "user"
    assert written.report.startswith("*The research was stopped before it was done;")
    assert "Pierogi are filled dumplings [1]. They boil for four minutes [1]." in written.report


def test_ctrl_c_stops_the_command_and_lets_the_model_go(llm, tmp_path, researcher):
    """In a process of its own, as a user presses Ctrl-C (here while the model plans:
    nothing is found yet, and that is what it says)."""
    researcher.silent.add("plan")
    env = {**chat_env(llm, tmp_path), "SEARXNG_URL": "http://127.0.0.1:9"}
    command = [sys.executable, "-m", "app", "research", QUESTION, "--json"]
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 60
    while not llm.requests and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 3, err
    assert json.loads(out)["stopped_by"] == "user"
    assert "The research was stopped before it was done" in err
    assert llm.wait_hung_up() is not None
