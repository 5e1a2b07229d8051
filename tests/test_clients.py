"""Clients nobody here wrote, configured as docs/clients.md says, against /v1: `llm`,
litellm, LangChain's ChatOpenAI, pydantic-ai and the OpenAI Agents SDK. Each answers, and
its user sees the citations: in the annotations the client keeps, or, for the clients
that drop them, in the text (SOURCES_IN_TEXT). And the service's defaults for clients
that cannot send our body fields: SOURCES_IN_TEXT and SEARCH_ACTIVITY_IN_REASONING.

Every client but the SDK's own opens connections of its own: those tests need the
service on a socket."""

from __future__ import annotations

import os
import re

import pytest

from tests.conftest import chat_env, service_for
from tests.openai_clients import client_of, search_then_fetch

# litellm reads its price list from the web when imported unless told to keep its own.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

QUESTION = "How does asyncio work? Start from {article}"
ANSWER = re.compile(r"Asyncio runs coroutines on an event loop \[\d+\]\.")


@pytest.fixture
def listing(request, llm, pages, searxng, brave, tmp_path):
    """A service whose /v1 answers list their cited sources in the text, and tell no
    activity as reasoning: the settings docs/clients.md gives for these clients."""
    llm.clear()
    env = chat_env(llm, tmp_path, pages, SOURCES_IN_TEXT="1", SEARCH_ACTIVITY_IN_REASONING="0")
    with service_for(request, env, searxng.url) as service:
        yield service


def listed_in_text(text: str, article: str) -> bool:
    """The answer, then its cited sources as Markdown links (sources_in_text)."""
    return bool(ANSWER.match(text)) and "\n\nSources:\n- [" in text and f"]({article})" in text


def ask(chat, **fields):
    """The official SDK's answer to the question, with no field of ours unless given."""
    return client_of(chat).chat.completions.create(
        model="fake-model",
        messages=[{"role": "user", "content": QUESTION.format(article=fields.pop("article"))}],
        extra_body=fields or None,
    )


def test_sources_in_text_is_the_default_a_request_can_still_turn_off(listing, llm, brave, pages):
    article = f"{pages.url}/article"
    search_then_fetch(llm, article)
    assert listed_in_text(ask(listing, article=article).choices[0].message.content, article)
    search_then_fetch(llm, article)
    plain = ask(listing, article=article, sources_in_text=False).choices[0].message.content
    assert ANSWER.fullmatch(plain)


def test_search_activity_in_reasoning_off_tells_none_unless_asked(listing, llm, brave, pages):
    article = f"{pages.url}/article"
    search_then_fetch(llm, article)
    quiet = ask(listing, article=article).choices[0].message
    assert "reasoning_content" not in (quiet.model_extra or {})
    search_then_fetch(llm, article)
    told = ask(listing, article=article, search_activity=True).choices[0].message
    # (A line saying the search waited for the plan's rate may come first, on a busy machine.)
    assert "Searched 'python asyncio'" in told.model_extra["reasoning_content"]


def test_a_switch_that_is_neither_on_nor_off_is_refused(llm, tmp_path):
    from app import config

    env = chat_env(llm, tmp_path, SOURCES_IN_TEXT="yes please")
    with pytest.raises(config.ConfigError, match="SOURCES_IN_TEXT must be 1 .* or 0"):
        config.load(env)


@pytest.mark.socket  # llm opens connections of its own
def test_llm_prints_the_answer_and_its_sources(listing, llm, brave, pages, tmp_path, monkeypatch):
    from click.testing import CliRunner
    from llm.cli import cli

    article = f"{pages.url}/article"
    search_then_fetch(llm, article)
    home = tmp_path / "llm"
    home.mkdir()
    (home / "extra-openai-models.yaml").write_text(
        "- model_id: private-search\n"
        "  model_name: fake-model\n"
        f"  api_base: {listing.url}/v1\n"
        "  supports_tools: true\n"
    )
    monkeypatch.setenv("LLM_USER_PATH", str(home))
    printed = CliRunner().invoke(cli, ["-m", "private-search", QUESTION.format(article=article)])
    assert printed.exit_code == 0, printed.output
    assert listed_in_text(printed.output, article)
    assert llm.requests[0].path == "/v1/chat/completions" and llm.requests[0].body["stream"]


@pytest.mark.socket  # litellm opens connections of its own
def test_litellm_keeps_the_annotations_and_counts_no_reasoning(listing, llm, brave, pages):
    import litellm

    article = f"{pages.url}/article"
    search_then_fetch(llm, article)
    chunks = litellm.completion(
        model="openai/fake-model",
        api_base=f"{listing.url}/v1",
        api_key="unused",
        messages=[{"role": "user", "content": QUESTION.format(article=article)}],
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"sources_in_text": False},
    )
    answer = litellm.stream_chunk_builder(list(chunks))
    message = answer.choices[0].message
    assert ANSWER.fullmatch(message.content)
    (cited,) = message.annotations
    assert cited["url_citation"]["url"] == article
    # With the activity as reasoning_content, litellm reports every output token of a
    # streamed answer as a reasoning token (measured: 23 of 23, text_tokens 0).
    details = answer.usage.completion_tokens_details
    assert answer.usage.completion_tokens == 23
    assert details is None or not details.reasoning_tokens


@pytest.mark.socket  # LangChain's ChatOpenAI opens connections of its own
def test_langchain_shows_the_sources_in_the_text_streamed_or_not(listing, llm, brave, pages):
    from langchain_openai import ChatOpenAI

    article = f"{pages.url}/article"
    model = ChatOpenAI(model="fake-model", base_url=f"{listing.url}/v1", api_key="unused")
    search_then_fetch(llm, article)
    assert listed_in_text(model.invoke(QUESTION.format(article=article)).content, article)
    search_then_fetch(llm, article)
    streamed = "".join(chunk.content for chunk in model.stream(QUESTION.format(article=article)))
    assert listed_in_text(streamed, article)


@pytest.mark.socket  # pydantic-ai opens connections of its own
def test_pydantic_ai_keeps_the_citations_on_the_answer_s_text(chat, llm, brave, pages):
    from pydantic_ai import Agent
    from pydantic_ai.messages import TextPart
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    article = f"{pages.url}/article"
    search_then_fetch(llm, article)
    provider = OpenAIProvider(base_url=f"{chat.url}/v1", api_key="unused")
    agent = Agent(OpenAIChatModel("fake-model", provider=provider))
    result = agent.run_sync(QUESTION.format(article=article))
    assert ANSWER.fullmatch(result.output)
    (text,) = [p for p in result.all_messages()[-1].parts if isinstance(p, TextPart)]
    (citation,) = text.citations
    assert [source.url for source in citation.sources] == [article]


@pytest.mark.socket  # the Agents SDK opens connections of its own
def test_the_agents_sdk_s_answer_carries_the_citations(chat, llm, brave, pages):
    import openai
    from agents import Agent, RunConfig, Runner
    from agents.items import MessageOutputItem
    from agents.models.openai_provider import OpenAIProvider

    article = f"{pages.url}/article"
    search_then_fetch(llm, article)
    client = openai.AsyncOpenAI(base_url=f"{chat.url}/v1", api_key="unused")
    run = RunConfig(
        model="fake-model",
        model_provider=OpenAIProvider(openai_client=client),
        tracing_disabled=True,
    )
    result = Runner.run_sync(
        Agent(name="Assistant"), QUESTION.format(article=article), run_config=run
    )
    assert ANSWER.fullmatch(result.final_output)
    (said,) = [item for item in result.new_items if isinstance(item, MessageOutputItem)]
    (cited,) = said.raw_item.content[0].annotations
    assert cited.type == "url_citation" and cited.url == article
