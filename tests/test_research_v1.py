"""/v1 with `"research"`: a research run (docs/research.md) through the official `openai`
SDK, on the real SearXNG over the fake Brave, the loopback page server and the fake model
scripted as a researcher."""

from __future__ import annotations

import time

import openai
import pytest

from tests.conftest import ChatService
from tests.research_model import (
    QUESTION,
    article,
    plan_of,
    research_service,
    researcher,
    service,
)

__all__ = ["researcher", "article", "service"]  # fixtures, imported to be used here

ASKED = [{"role": "user", "content": QUESTION}]


def client_of(service: ChatService) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=f"{service.url}/v1", api_key="unused", max_retries=0, http_client=service.client()
    )


def test_a_streamed_research_tells_its_progress_as_reasoning_and_answers_with_the_report(
    service, researcher, article
):
    stream = client_of(service).chat.completions.create(
        model="fake-model", messages=ASKED, stream=True, extra_body={"research": True}
    )
    reasoning, content, annotations = "", "", []
    for chunk in stream:
        delta = chunk.choices[0].delta
        reasoning += (delta.model_extra or {}).get("reasoning_content") or ""
        content += delta.content or ""
        annotations += (delta.model_extra or {}).get("annotations") or []
    assert "Plan:\n- What about pierogi boiling time?" in reasoning
    assert "Searched 'pierogi boiling time'" in reasoning
    assert "Read 'Pierogi, step by step'" in reasoning
    assert content.startswith("Pierogi are filled dumplings [1]. They boil for four minutes [1].")
    assert f"1. Pierogi, step by step: <{article}>" in content
    assert len(annotations) == 2
    for cited in annotations:
        assert cited["type"] == "url_citation" and cited["url_citation"]["url"] == article
        span = cited["url_citation"]
        assert content[span["start_index"] : span["end_index"]] == "[1]"
    assert researcher.asked == ["plan", "notes", "reflect", "report"]


def test_a_research_not_streamed_within_the_budget_it_asks_for(service, researcher, article):
    researcher.plan = plan_of("pierogi boiling time", "pierogi fillings")
    answer = client_of(service).chat.completions.create(
        model="fake-model", messages=ASKED, extra_body={"research": {"searches": 1}}
    )
    message = answer.choices[0].message
    assert message.content.startswith("*The research stopped at its 1 searches")
    assert "Pierogi are filled dumplings [1]." in message.content
    assert [a.url_citation.url for a in message.annotations] == [article, article]
    assert "Searched 'pierogi boiling time'" in message.model_extra["reasoning_content"]
    assert "Searched 'pierogi fillings'" not in message.model_extra["reasoning_content"]
    assert answer.usage.prompt_tokens > 0


def test_a_research_that_asks_no_budget_runs_within_the_services(
    request, llm, pages, searxng, tmp_path, researcher, article
):
    researcher.plan = plan_of("pierogi boiling time", "pierogi fillings")
    env = {"RESEARCH_SEARCHES": "1"}
    with research_service(request, llm, pages, searxng.url, tmp_path, **env) as service:
        answer = client_of(service).chat.completions.create(
            model="fake-model", messages=ASKED, extra_body={"research": {"pages": 5}}
        )
    assert answer.choices[0].message.content.startswith("*The research stopped at its 1 searches")


def test_a_research_that_finds_nothing_says_what_it_tried(service, researcher, article):
    researcher.quotes = []
    answer = client_of(service).chat.completions.create(
        model="fake-model", messages=ASKED, extra_body={"research": True}
    )
    text = answer.choices[0].message.content
    assert text.startswith("nothing found") and "searched: 'pierogi boiling time'" in text
    assert answer.choices[0].message.annotations == []
    assert "report" not in researcher.asked  # no report from the model's memory


@pytest.mark.parametrize(
    "research",
    ["yes", {"searches": 0}, {"pages": 61}, {"minutes": -1}, {"queries": 3}],
)
def test_a_bad_research_field_is_an_openai_error_naming_it(service, llm, research):
    body = {"model": "fake-model", "messages": ASKED, "research": research}
    refused = service.http.post("/v1/chat/completions", json=body)
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"].startswith("research")
    assert llm.requests == []


def test_a_research_without_a_question_is_refused(service, llm):
    body = {"model": "fake-model", "messages": [{"role": "system", "content": "Be brief."}]}
    refused = service.http.post("/v1/chat/completions", json={**body, "research": True})
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["param"] == "messages"
    assert llm.requests == []


@pytest.mark.socket  # the hang-up is the client's socket closing
def test_a_client_hang_up_stops_the_research(service, llm, researcher, article):
    researcher.silent.add("plan")  # a model server slow to plan
    stream = client_of(service).chat.completions.create(
        model="fake-model", messages=ASKED, stream=True, extra_body={"research": True}
    )
    for chunk in stream:
        if (chunk.choices[0].delta.model_extra or {}).get("reasoning_content"):
            break
    deadline = time.monotonic() + 5
    while not llm.requests and time.monotonic() < deadline:  # the plan asked for
        time.sleep(0.02)
    stream.close()
    assert llm.wait_hung_up(timeout=5) is not None  # the plan's request was let go
    assert researcher.asked == ["plan"]
