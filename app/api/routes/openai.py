"""/v1: the OpenAI-compatible chat endpoint that searches, for other clients (Open WebUI,
LibreChat, Continue, the OpenAI SDK; docs/openai.md), as Chat Completions and as the
Responses API (the Agents SDK, pydantic-ai). The answer is app.chat.completion's; this is
its HTTP: the body checked, the events shaped as OpenAI's, Stop as the hang-up."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine
from contextlib import aclosing
from typing import TypeVar

from fastapi import APIRouter, Request, Response
from typing_extensions import TypedDict

from app import jsoncodec
from app.api import openai_shapes as shapes
from app.api import responses_shapes
from app.api.answer_slots import AnswerSlots, Slot
from app.api.bodies import REFUSALS
from app.api.deps import Named, ServicesDep, named
from app.api.research_answer import question_of, research_answer
from app.api.sse import EventStream
from app.chat.completion import CompletionEvent, CompletionRequest, answer, request_locale
from app.chat.openai_wire import ChatMessage, FunctionTool
from app.chat.responses_input import function_tools, messages_of
from app.chat.services import Services
from app.errors import ServiceError
from app.model.failures import Failure, LLMError

logger = logging.getLogger(__name__)

router = APIRouter(prefix="/v1", responses=REFUSALS)

DONE = b"data: [DONE]\n\n"
Answered = TypeVar("Answered")
"""What an endpoint answers: a response object, or the stream's Response."""
INLINE_CHECK_BYTES = 64 * 1024
ANSWERED: dict[int | str, dict[str, object]] = {
    200: {
        "description": "a chat.completion, or with stream: Server-Sent Events of "
        "chat.completion.chunk objects ending with data: [DONE]",
        "content": {
            "application/json": {"schema": {"type": "object"}},
            "text/event-stream": {"schema": {"type": "string"}},
        },
    },
    **shapes.error_responses(400, 401, 404, 413, 415, 429, 502),
}
RESPONSES_ANSWERED: dict[int | str, dict[str, object]] = {
    **ANSWERED,
    200: {
        "description": "a response, or with stream: Server-Sent Events of the Responses "
        "API's events, from response.created to response.completed",
        "content": ANSWERED[200]["content"],
    },
}


class ModelObject(TypedDict):
    id: str
    object: str
    created: int
    owned_by: str


class OpenAIModelList(TypedDict):
    """GET /v1/models, as OpenAI's list of models."""

    object: str
    data: list[ModelObject]


class OpenAIError(ServiceError):
    """A request refused in OpenAI's shape, naming the field at fault."""

    def __init__(
        self, status: int, message: str, param: str | None = None, code: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.param = param
        self.code = code


UPSTREAM_STATUSES = {
    # What OpenAI answers for the same trouble: the prompt is the client's to shorten or
    # change, the rate limit its to wait out; anything else failed upstream (502).
    Failure.CONTEXT_OVERFLOW: (400, "context_length_exceeded"),
    Failure.CONTENT_FILTER: (400, "content_filter"),
    Failure.RATE_LIMIT: (429, "rate_limit_exceeded"),
}


def upstream_error(error: Exception) -> OpenAIError:
    """A failed answer in OpenAI's terms; an unexpected one (a bug of ours) logged with
    its traceback and said as ours."""
    if not isinstance(error, LLMError):
        logger.error("v1 answer failed unexpectedly", exc_info=error)
        return OpenAIError(500, f"the chat service failed: {error!r}", code="internal")
    status, code = UPSTREAM_STATUSES.get(error.kind, (502, error.kind.value))
    return OpenAIError(status, f"the model server failed: {error.message}", code=code)


@router.get("/models", responses=shapes.error_responses(401))
async def models(services: ServicesDep, asker: Named) -> OpenAIModelList:
    """The models the page offers: configured, listed by the server, added in Settings (by
    the person a personal token names, in household mode)."""
    listed = await services.model.models() or []
    added = await services.storage.models(asker.id if asker else None)
    ids = list(dict.fromkeys([*services.settings.models, *listed, *added]))
    return {
        "object": "list",
        "data": [
            {"id": m, "object": "model", "created": 0, "owned_by": "private-search-chat"}
            for m in ids
        ],
    }


@router.post("/chat/completions", response_model=None, responses=ANSWERED)
async def chat_completions(
    body: shapes.ChatCompletionBody, services: ServicesDep, http: Request
) -> Response | shapes.ChatCompletion:
    messages = [passed_on(m) for m in body.messages]
    request = await client_request(services, body, http, messages, list(body.tools or []))
    return await in_slot(http, lambda slot: respond(services, request, body, http, slot))


@router.post("/responses", response_model=None, responses=RESPONSES_ANSWERED)
async def responses(
    body: responses_shapes.ResponsesBody, services: ServicesDep, http: Request
) -> Response | responses_shapes.ResponseObject:
    """The Responses API over the same answer (docs/openai.md, "The Responses API")."""
    stateless(body)
    messages = messages_of(body.instructions, body.input)
    tools = function_tools(body.function_tools)
    request = await client_request(services, body, http, messages, tools)
    return await in_slot(http, lambda slot: respond_items(services, request, body, http, slot))


async def in_slot(http: Request, answering: Callable[[Slot], Awaitable[Answered]]) -> Answered:
    """The answer in a place among those running (AnswerSlots; none free: Busy, 429), which
    `answering` releases when the answer ends, or which is released here if it fails."""
    slots: AnswerSlots = http.app.state.answer_slots
    slot = slots.take(http.client.host if http.client else "unknown")
    try:
        return await answering(slot)
    except BaseException:
        await slot.release()
        raise


def stateless(body: responses_shapes.ResponsesBody) -> None:
    """A request for a response run in the background, to be fetched later, is refused:
    nothing is stored here (as of /v1/chat/completions; `previous_response_id` and
    `conversation` are refused by the body's own schema)."""
    if (body.model_extra or {}).get("background") is True:
        raise OpenAIError(
            400, "background is not supported: this service stores no responses", "background"
        )


async def respond(
    services: Services,
    request: CompletionRequest,
    body: shapes.ChatCompletionBody,
    http: Request,
    slot: Slot,
) -> Response | shapes.ChatCompletion:
    """The answer, whole or streamed; `slot` released when it ends (a stream's end)."""
    research = body.research
    if research and not question_of(request).strip():
        raise OpenAIError(400, "a research needs a question: a user message with text", "messages")
    events = research_answer(services, request, research) if research else answer(services, request)
    if not body.stream:
        if (collected := await whole(events, http, slot)) is None:
            return Response(status_code=499)  # no one left to read it
        return shapes.completion_object(request.model, collected)
    usage = bool(body.stream_options and body.stream_options.include_usage)
    chunks = shapes.Chunks(request.model, usage)
    first = await opened(events)
    return EventStream(streamed(events, first, chunks), closed=slot.release, end=DONE)


async def respond_items(
    services: Services,
    request: CompletionRequest,
    body: responses_shapes.ResponsesBody,
    http: Request,
    slot: Slot,
) -> Response | responses_shapes.ResponseObject:
    """The answer as a response object, or its stream of events (no [DONE]: the Responses
    API ends with response.completed); `slot` released when it ends."""
    events = answer(services, request)
    items = responses_shapes.ResponseStream(
        request.model, responses_shapes.echoed(body), body.stream
    )
    if not body.stream:
        if (collected := await whole(events, http, slot)) is None:
            return Response(status_code=499)  # no one left to read it
        return items.whole(collected)
    first = await opened(events)
    return EventStream(streamed_items(events, first, items), closed=slot.release, named=True)


async def opened(events: AsyncGenerator[CompletionEvent, None]) -> CompletionEvent:
    """The first event, awaited before the stream starts: a model server that fails before
    any output is answered with its status, not with a stream that starts and breaks."""
    try:
        return await anext(events)
    except BaseException as exc:
        await events.aclose()
        if isinstance(exc, Exception):
            raise upstream_error(exc) from None
        raise


async def whole(
    events: AsyncGenerator[CompletionEvent, None], http: Request, slot: Slot
) -> list[CompletionEvent] | None:
    """The answer not streamed, its slot released; None when the client hung up first."""
    collected = await unless_hung_up(collect(events), http)
    await slot.release()
    return collected


async def collect(events: AsyncGenerator[CompletionEvent, None]) -> list[CompletionEvent]:
    try:
        async with aclosing(events) as answered:
            return [event async for event in answered]
    except Exception as error:
        raise upstream_error(error) from None


async def unless_hung_up(
    work: Coroutine[None, None, list[CompletionEvent]], http: Request
) -> list[CompletionEvent] | None:
    """The whole answer, or None when the client hung up first: the answer is then
    cancelled, which closes the model server's request and ends the tool rounds, as Stop
    does to a stream (a response not streamed hears of the hang-up only by listening)."""
    answering = asyncio.create_task(work)
    listening = asyncio.create_task(hung_up(http))
    try:
        await asyncio.wait({answering, listening}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        listening.cancel()
        answering.cancel()  # when it is not done: the client left, or we are stopping
        await asyncio.gather(listening, answering, return_exceptions=True)
    return None if answering.cancelled() else answering.result()


async def hung_up(http: Request) -> None:
    """Returns when the client has gone: the ASGI server's http.disconnect, which comes
    once the body has been read (the access check replays it first)."""
    while (await http.receive())["type"] != "http.disconnect":
        pass


async def client_request(
    services: Services,
    body: shapes.OurFields,
    http: Request,
    messages: list[ChatMessage],
    tools: list[FunctionTool],
) -> CompletionRequest:
    """What either endpoint asks of the answer, its model and locale checked."""
    length = http.headers.get("content-length", "")
    size = int(length) if length.isdigit() else None
    model = body.model.strip()
    asker = await named(http)
    person = asker.id if asker else None  # their memory, cache, share and added models
    if not await services.served.offers(model, person):
        raise OpenAIError(
            404,
            f"The model {model[:80]!r} does not exist: GET /v1/models lists them",
            "model",
            code="model_not_found",
        )
    small = size is not None and size <= INLINE_CHECK_BYTES
    if not (encodable(body) if small else await asyncio.to_thread(encodable, body)):
        raise OpenAIError(400, "the request holds a lone surrogate, which is not valid Unicode")
    try:
        locale = request_locale(body.country, body.search_language, services.settings.search_locale)
    except ServiceError as exc:
        where = "search_language" if body.search_language else body.location_param
        raise OpenAIError(400, str(exc), where) from None
    settings = services.settings
    activity, in_text = body.search_activity, body.sources_in_text
    return CompletionRequest(
        model=model,
        messages=messages,
        params=body.passed_on(),
        client_tools=tools,
        locale=locale,
        web_search=body.web_search,
        activity=settings.search_activity_in_reasoning if activity is None else activity,
        sources_in_text=settings.sources_in_text if in_text is None else in_text,
        person=person,
    )


def encodable(body: shapes.OurFields) -> bool:
    """Whether the body can go to the model server as JSON: JSON's "\\ud800" decodes to a
    lone surrogate, which no UTF-8 encoder takes (a body of megabytes is milliseconds of
    encoding: checked in a thread beyond INLINE_CHECK_BYTES)."""
    try:
        jsoncodec.dumps(body.model_dump(exclude_unset=True))
    except TypeError:
        return False
    return True


def passed_on(message: ChatMessage) -> ChatMessage:
    """A message as the client sent it (its fields of no type of ours included); OpenAI's
    newer `developer` role as `system`, the only one local servers' chat templates know."""
    return {**message, "role": "system"} if message["role"] == "developer" else message


async def streamed(
    events: AsyncGenerator[CompletionEvent, None], first: CompletionEvent, chunks: shapes.Chunks
) -> AsyncGenerator[shapes.ChatCompletionChunk | shapes.OpenAIErrorBody, None]:
    """The chunks of the answer; a failure after the stream began is an error chunk, as
    OpenAI sends one (the SDK raises it)."""
    async with aclosing(events) as answered:
        yield chunks.first()
        for chunk in chunks.of(first):
            yield chunk
        try:
            async for event in answered:
                for chunk in chunks.of(event):
                    yield chunk
        except Exception as error:  # an error chunk, as OpenAI sends one mid-stream
            failed = upstream_error(error)
            yield shapes.error_body(failed.status, str(failed), code=failed.code)


async def streamed_items(
    events: AsyncGenerator[CompletionEvent, None],
    first: CompletionEvent,
    items: responses_shapes.ResponseStream,
) -> AsyncGenerator[responses_shapes.StreamEvent, None]:
    """The Responses API's events of the answer; a failure after the stream began is its
    error event, then response.failed."""
    async with aclosing(events) as answered:
        for event in [*items.started(), *items.of(first)]:
            yield event
        try:
            async for told in answered:
                for event in items.of(told):
                    yield event
        except Exception as error:
            failed = upstream_error(error)
            code = "rate_limit_exceeded" if failed.status == 429 else "server_error"
            for event in items.failed(code, str(failed)):
                yield event
