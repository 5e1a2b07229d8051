"""The page's research as the service runs it (docs/research.md, "The page"): a turn of the
conversation on the detached turns, its plan shown before any search and started by the
user's edit or by itself after a pause, its progress as events, the report as the answer
with its sources; Stop keeps what was found; a killed service leaves the run interrupted
with its notes. On the real SearXNG over the fake Brave, the loopback page server and the
fake model scripted as a researcher."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.chat_client import Numbered, follow, get_conversation, new_conversation, numbered
from tests.conftest import ChatService, chat_env, two_replicas
from tests.research_model import (
    ARTICLE_QUOTE,
    QUESTION,
    article,
    article_first,
    plan_of,
    research_service,
    researcher,
    scripted_on,
    service,
)
from tests.serving import serve

__all__ = ["researcher", "article", "service"]  # fixtures, imported to be used here


def chat_path(conversation_id: str) -> str:
    return f"/api/conversations/{conversation_id}/chat"


def until_plan(client: httpx.Client, conversation_id: str, body: dict[str, Any]) -> Numbered:
    """POST a research and read its events up to its plan, then leave (it waits on)."""
    path = chat_path(conversation_id)
    with client.stream("POST", path, json={"message": QUESTION, **body}) as response:
        assert response.status_code == 200, response.read()
        return numbered(response, until=lambda event: event["type"] == "research_plan")


def of_type(events: Numbered, kind: str) -> list[dict[str, Any]]:
    return [event for _, event in events if event["type"] == kind]


def reasoning(events: Numbered) -> str:
    return "".join(event["text"] for event in of_type(events, "reasoning"))


@pytest.mark.socket  # the client leaves its stream at the plan
def test_the_plan_waits_for_start_and_runs_as_the_user_edited_it(service, researcher, article):
    researcher.plan = plan_of("pierogi boiling time", "pierogi fillings", "pierogi history")
    conversation_id = new_conversation(service)
    with service.client() as client:
        seen = until_plan(client, conversation_id, {"research": {"plan_seconds": 0}})
    plan = seen[-1][1]
    assert plan["questions"] == [
        "What about pierogi boiling time?",
        "What about pierogi fillings?",
        "What about pierogi history?",
    ]
    assert (plan["started"], plan["starts_in"]) == (False, None)
    time.sleep(0.5)
    assert researcher.asked == ["plan"]  # no search before Start
    edited = ["What about pierogi boiling time?", "frozen pierogi"]  # one rewritten, one gone
    started = service.http.post(
        f"/api/conversations/{conversation_id}/research/plan", json={"questions": edited}
    )
    assert started.status_code == 200 and started.json() == {"started": True}

    rest = follow(service, conversation_id, last_event_id=seen[-1][0])
    running = of_type(rest, "research_plan")[0]
    assert running == {
        **running,
        "type": "research_plan",
        "questions": edited,
        "started": True,
        "starts_in": None,
    }
    lines = reasoning(rest)
    assert "Searched 'pierogi boiling time'" in lines and "Searched 'frozen pierogi'" in lines
    assert "pierogi fillings" not in lines and "pierogi history" not in lines
    assert f'"{ARTICLE_QUOTE}"' in lines  # the notes are kept with the answer
    progress = of_type(rest, "research")
    assert {p["step"] for p in progress} >= {"search", "read", "reflect", "report"}
    assert progress[-1]["searches"] == 2 and progress[-1]["max_searches"] == 12
    assert progress[-1]["pages"] >= 1 and progress[-1]["max_pages"] == 20

    done = rest[-1][1]
    assert done["type"] == "done" and done["status"] == "complete"
    assert done["text"].startswith("Pierogi are filled dumplings [1].")
    assert [s["url"] for s in done["sources"]][:1] == [article]
    stored = get_conversation(service, conversation_id)["messages"]
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert stored[0]["content"] == QUESTION
    assert stored[1]["content"] == done["text"] and stored[1]["sources"] == done["sources"]
    again = service.http.post(
        f"/api/conversations/{conversation_id}/research/plan", json={"questions": edited}
    )
    assert again.status_code == 409  # no plan waits any more


@pytest.fixture
def replicas(llm, pages, searxng, brave, tmp_path, database_url) -> Iterator[list[ChatService]]:
    """Two research services on one database (SQLite's file, or one PostgreSQL)."""
    env = chat_env(llm, tmp_path, pages, SEARCH_RATE="50", DATABASE_URL=database_url)
    with two_replicas(env, searxng.url) as started:
        yield started


@pytest.mark.socket  # the client leaves its stream at the plan
def test_start_with_an_edited_plan_on_the_other_replica_runs_the_edited_questions_only(
    replicas, researcher, article
):
    first, second = replicas
    researcher.plan = plan_of("pierogi boiling time", "pierogi fillings", "pierogi history")
    conversation_id = new_conversation(first)
    with first.client() as client:
        seen = until_plan(client, conversation_id, {"research": {"plan_seconds": 0}})
    assert seen[-1][1]["started"] is False
    edited = ["What about pierogi boiling time?", "frozen pierogi"]
    path = f"/api/conversations/{conversation_id}/research/plan"
    started = second.http.post(path, json={"questions": edited})
    assert started.status_code == 200 and started.json() == {"started": True}
    twice = first.http.post(path, json={"questions": ["pierogi history"]})
    assert twice.status_code == 409  # one Start per plan, whichever replica it reaches

    rest = follow(second, conversation_id, last_event_id=seen[-1][0])
    assert of_type(rest, "research_plan")[0]["questions"] == edited
    lines = reasoning(rest)
    searched = [line for line in lines.splitlines() if line.startswith("Searched ")]
    assert [line.split("'")[1] for line in searched] == ["pierogi boiling time", "frozen pierogi"]
    assert rest[-1][1]["type"] == "done" and rest[-1][1]["status"] == "complete"
    for replica in replicas:  # no plan waits any more
        late = replica.http.post(path, json={"questions": edited})
        assert late.status_code == 409
        assert "no research plan is waiting for Start" in late.json()["detail"]


def test_a_plan_nobody_touches_starts_by_itself_after_the_pause(service, researcher, article):
    conversation_id = new_conversation(service)
    body = {"message": QUESTION, "research": {"plan_seconds": 0.5}}
    with service.http.stream("POST", chat_path(conversation_id), json=body) as response:
        events = numbered(response)
    plans = of_type(events, "research_plan")
    assert [(p["started"], p["starts_in"]) for p in plans] == [(False, 0.5), (True, None)]
    assert events[-1][1]["type"] == "done" and events[-1][1]["status"] == "complete"
    assert researcher.asked == ["plan", "notes", "reflect", "report"]


def running(service: ChatService, conversation_id: str) -> bool:
    listed = service.http.get("/api/conversations").json()
    return any(c["running"] for c in listed if c["id"] == conversation_id)


@pytest.mark.socket  # the client leaves its stream at the plan
def test_a_plan_left_waiting_for_start_ends_unsearched_after_the_services_wait_keeping_it(
    request, llm, pages, searxng, brave, tmp_path, researcher, article
):
    """A pause of 0 waits for Start, but not forever: after RESEARCH_PLAN_WAIT_SECONDS the
    run ends with nothing searched (nothing spent without the user's Start), its plan kept
    in the answer, the conversation free; Regenerate researches again."""
    wait = {"RESEARCH_PLAN_WAIT_SECONDS": "1"}
    with research_service(request, llm, pages, searxng.url, tmp_path, **wait) as service:
        conversation_id = new_conversation(service)
        with service.client() as client:
            seen = until_plan(client, conversation_id, {"research": {"plan_seconds": 0}})
        given_up = time.monotonic() + 15
        while running(service, conversation_id):
            assert time.monotonic() < given_up, "the plan still waits for Start"
            time.sleep(0.1)
        events = seen + follow(service, conversation_id, last_event_id=seen[-1][0])
        plans = of_type(events, "research_plan")
        assert [(p["started"], p["starts_in"]) for p in plans] == [(False, None)]
        done = events[-1][1]
        assert done["type"] == "done" and done["status"] == "interrupted", done
        assert done["text"] == (
            "The plan waited 1 s for Start; nothing was searched.\n\n"
            "The plan:\n\n- What about pierogi boiling time?"
        )
        assert researcher.asked == ["plan"]  # no search, no page, no note
        assert of_type(events, "research")[-1]["searches"] == 0
        stored = get_conversation(service, conversation_id)["messages"][-1]
        assert (stored["status"], stored["content"]) == ("interrupted", done["text"])
        start = f"/api/conversations/{conversation_id}/research/plan"
        late = service.http.post(start, json={"questions": ["What about pierogi?"]})
        assert late.status_code == 409

        path = f"/api/conversations/{conversation_id}/regenerate"
        again = {"research": {"plan_seconds": 0.1}}
        with service.http.stream("POST", path, json=again) as response:
            assert numbered(response)[-1][1]["status"] == "complete"
        assert researcher.asked == ["plan", "plan", "notes", "reflect", "report"]


def test_the_budget_is_the_runs_own_else_the_services_and_the_plan_says_what_it_may_cost(
    request, llm, pages, fresh_searxng, brave, tmp_path, researcher, article
):
    settings = {
        "RESEARCH_SEARCHES": "1",
        "RESEARCH_MINUTES": "5",
        "BRAVE_PRICE_PER_1000": "9",
        "SEARCH_PLAN_FILE": str(fresh_searxng.plan_file),
    }
    url = fresh_searxng.url
    with research_service(request, llm, pages, url, tmp_path, **settings) as service:
        asked = {}
        for budget in ({}, {"searches": 3, "pages": 2}):
            conversation_id = new_conversation(service)
            body = {"message": QUESTION, "research": {"plan_seconds": 0.1, **budget}}
            with service.http.stream("POST", chat_path(conversation_id), json=body) as response:
                events = numbered(response)
            last = of_type(events, "research")[-1]
            plan = of_type(events, "research_plan")[0]
            asked[str(budget)] = (
                last["max_searches"],
                last["max_pages"],
                last["max_seconds"],
                plan["max_cost"],
                plan["queries_left"],
            )
        # Before any search the plan is not known; then it is, less the one query spent.
        left = brave.monthly_quota - 1
        assert asked == {
            "{}": (1, 20, 300, pytest.approx(0.009), None),
            "{'searches': 3, 'pages': 2}": (3, 2, 300, pytest.approx(0.027), left),
        }
        over = {"message": QUESTION, "research": {"searches": 51}}
        refused = service.http.post(chat_path(new_conversation(service)), json=over)
        assert refused.status_code == 422 and "searches" in refused.text


@pytest.mark.socket  # the client leaves its stream at the plan
def test_stop_keeps_what_was_found_then_the_report_is_written_from_it_and_regenerate_adds_a_version(
    service, researcher, article
):
    researcher.slow = {"reflect": 30}  # the stop comes while the run reflects
    conversation_id = new_conversation(service)
    with service.client() as client:
        seen = until_plan(client, conversation_id, {"research": {"plan_seconds": 0.1}})
        started = time.monotonic()
        while "reflect" not in researcher.asked:
            assert time.monotonic() - started < 20, researcher.asked
            time.sleep(0.05)
        stopped = client.post(f"/api/conversations/{conversation_id}/stop")
        assert stopped.json() == {"stopped": True}
    rest = follow(service, conversation_id, last_event_id=seen[-1][0])
    done = rest[-1][1]
    assert done["type"] == "done" and done["status"] == "interrupted"
    assert ARTICLE_QUOTE in done["text"] and article in done["text"]
    assert [s["url"] for s in done["sources"]][:1] == [article]
    assert "report" not in researcher.asked

    researcher.slow = {}
    path = f"/api/conversations/{conversation_id}/research/write"
    with service.http.stream("POST", path, json={}) as response:
        written = numbered(response)
    report = written[-1][1]
    assert report["type"] == "done" and report["status"] == "complete", report
    assert "stopped before it was done" in report["text"].split("\n")[0]
    assert "Pierogi are filled dumplings [1]." in report["text"]
    assert [s["url"] for s in report["sources"]] == [article]
    assert researcher.asked.count("report") == 1 and researcher.asked.count("plan") == 1
    again = service.http.post(path, json={})
    assert again.status_code == 409  # the last answer is now a report

    path = f"/api/conversations/{conversation_id}/regenerate"
    with service.http.stream("POST", path, json={"research": {"plan_seconds": 0.1}}) as response:
        regenerated = numbered(response)
    assert regenerated[-1][1]["status"] == "complete"
    assert researcher.asked.count("plan") == 2
    stored = get_conversation(service, conversation_id)["messages"]
    assert stored[-1]["content"].startswith("Pierogi are filled dumplings [1].")
    assert stored[0]["versions"] == {"index": 3, "count": 3}
    for index, text in ((1, done["text"]), (2, report["text"])):
        shown = service.http.put(
            f"/api/conversations/{conversation_id}/turns/0/version", json={"index": index}
        )
        assert shown.json()["messages"][-1]["content"] == text


def test_the_export_carries_the_report_with_its_sources(service, researcher, article):
    conversation_id = new_conversation(service)
    body = {"message": QUESTION, "research": {"plan_seconds": 0.1}}
    with service.http.stream("POST", chat_path(conversation_id), json=body) as response:
        assert numbered(response)[-1][1]["status"] == "complete"
    exported = service.http.get(f"/api/conversations/{conversation_id}/export").text
    assert "Pierogi are filled dumplings [1]." in exported
    assert f"Sources:\n\n1. [Pierogi, step by step]({article})" in exported


def test_a_service_killed_mid_research_leaves_it_interrupted_with_its_notes(
    llm, monkeypatch, brave, pages, searxng, tmp_path
):
    researcher = scripted_on(llm, monkeypatch)
    article_first(brave, pages, monkeypatch)
    researcher.silent = {"reflect"}  # the run waits there when the service dies
    env = {**chat_env(llm, tmp_path, pages, SEARCH_RATE="50"), "SEARXNG_URL": searxng.url}
    env["FETCH_TIMEOUT"] = "2"  # the results other than the page server's go nowhere
    with serve(env, ending=signal.SIGKILL) as doomed:
        with httpx.Client(base_url=doomed.url, timeout=30) as client:
            conversation_id = client.post("/api/conversations", json={}).json()["id"]
            body = {"message": QUESTION, "research": {"plan_seconds": 0.1}}
            with client.stream("POST", chat_path(conversation_id), json=body) as response:
                numbered(response, until=lambda event: event.get("step") == "reflect")
            kept = time.monotonic() + 10
            while ARTICLE_QUOTE not in client.get(f"/api/conversations/{conversation_id}").text:
                assert time.monotonic() < kept, "no checkpoint of the notes"
                time.sleep(0.05)
        doomed.stop(signal.SIGKILL)
    with serve(env, ending=signal.SIGKILL) as restarted:
        with httpx.Client(base_url=restarted.url, timeout=30) as client:
            last = client.get(f"/api/conversations/{conversation_id}").json()["messages"][-1]
            assert last["role"] == "assistant" and last["status"] == "interrupted"
            assert ARTICLE_QUOTE in last["reasoning"]
            assert "Searched 'pierogi boiling time'" in last["reasoning"]
            with client.stream("GET", f"/api/conversations/{conversation_id}/events") as response:
                assert numbered(response)[-1][1] == {"type": "stopped"}  # its replica is gone
            researcher.silent = set()
            path = f"/api/conversations/{conversation_id}/regenerate"
            with client.stream("POST", path, json={"research": {"plan_seconds": 0}}) as response:
                plan = numbered(response, until=lambda event: event["type"] == "research_plan")
            assert plan[-1][1]["questions"] == ["What about pierogi boiling time?"]


def test_a_research_the_model_cannot_plan_ends_as_an_error_card_saying_why(service, researcher):
    researcher.garbage = {"plan": "Sure! Here are some thoughts about pierogi."}
    conversation_id = new_conversation(service)
    body = {"message": QUESTION, "research": {"plan_seconds": 0}}
    with service.http.stream("POST", chat_path(conversation_id), json=body) as response:
        events = numbered(response)
    error = events[-1][1]
    assert error["type"] == "error" and error["kind"] == "upstream", error
    assert "the research failed" in error["message"] and "plan" in error["message"]
    assert of_type(events, "research_plan") == []
