"""A conversation's turns: send a message, regenerate the last answer, edit one of the
user's messages (each answered as Server-Sent Events, the turn's events from the first),
follow the running turn from any replica (its events after a given id), stop it, show
another version of a turn, take the last message back. A turn runs on the service, not on
the connection that started it (app/chat/runs.py): a client that leaves stops nothing."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Response
from fastapi import Path as PathParam
from typing_extensions import TypedDict

from app.api.bodies import (
    AS_STORED,
    REFUSALS,
    Edit,
    OpenApiResponses,
    Regenerate,
    Research,
    ResearchStart,
    UserMessage,
    VersionChoice,
    errors,
)
from app.api.choices import chosen_model
from app.api.deps import ConversationId, ServicesDep, StorageDep, Whose
from app.api.research_turn import PlanGate, research_turn
from app.api.sse import EventStream
from app.chat.services import Services
from app.chat.turn import run_turn
from app.research.budget import Budget
from app.research.events import Found
from app.store.errors import Conflict
from app.store.rows import Conversation, EditAt
from app.store.storage import Lease, TurnInput

router = APIRouter(prefix="/api/conversations/{conversation_id}", responses=REFUSALS)

SSE_RESPONSE: OpenApiResponses = {
    200: {
        "description": "Server-Sent Events: data: {type, ...} frames",
        "content": {"text/event-stream": {"schema": {"type": "string"}}},
    }
}
STREAMED = {**SSE_RESPONSE, **errors(404, 409, 413, 415, 422)}
MAX_ID = 2**62


class Rewound(TypedDict):
    """The user's message taken back, for the input box."""

    message: str


class Stopped(TypedDict):
    stopped: bool
    """A turn was running and is told to stop: on this replica, it has ended and its
    outcome is written; on another, it ends within a tick (app/chat/runs.py)."""


class Started(TypedDict):
    started: bool
    """The plan was waiting, and runs as given."""


def stream_turn(
    services: Services,
    lease: Lease,
    start: TurnInput,
    model: str,
    research: Research | None = None,
    found: Found | None = None,
) -> Response:
    """SSE for one turn from its first event. The turn runs as a task of the service and
    holds the conversation's lease until it ends: the outcome's write releases it (in the
    same transaction), and the task's end does should the write fail (only its owner can
    release it, so a late release frees nothing another turn holds). A research turn is
    stopped through its gate, and ends itself with what it found."""
    if research is None:
        run = services.runs.start(lease, run_turn(services, lease, start, model))
    else:
        longest = services.settings.research_plan_wait
        gate = PlanGate(research.plan_seconds, longest, services.storage, lease)
        asked = (research.searches, research.pages, research.minutes)
        budget = Budget.asked(services.settings.research, *asked)
        turn = research_turn(services, lease, start, model, gate, budget, found)
        run = services.runs.start(lease, turn, gate)
    return EventStream(run.feed.follow(0))


@router.post("/chat", responses=STREAMED)
async def chat(
    conversation_id: ConversationId, body: UserMessage, services: ServicesDep, person: Whose
) -> Response:
    model = await chosen_model(services, conversation_id, body.model, person)
    await services.pending.settle(conversation_id)
    lease, start = await services.storage.begin_turn(conversation_id, body.message, model)
    return stream_turn(services, lease, start, model, body.research)


@router.post("/regenerate", responses=STREAMED)
async def regenerate(
    conversation_id: ConversationId,
    services: ServicesDep,
    person: Whose,
    body: Regenerate | None = None,
) -> Response:
    model = await chosen_model(services, conversation_id, body.model if body else None, person)
    await services.pending.settle(conversation_id)
    lease, start = await services.storage.begin_turn(conversation_id, None, model)
    return stream_turn(services, lease, start, model, body.research if body else None)


@router.post("/edit", responses=STREAMED)
async def edit_message(
    conversation_id: ConversationId, body: Edit, services: ServicesDep, person: Whose
) -> Response:
    """Send `message` in place of the user message at `position` (default: the last one):
    that question, its answer and every later turn stay as a version of its turn (GET
    shows them under `versions`), and the new message is answered as the last one."""
    model = await chosen_model(services, conversation_id, body.model, person)
    storage = services.storage
    at: EditAt = "last" if body.position is None else body.position
    await services.pending.settle(conversation_id)
    lease, start = await storage.begin_turn(conversation_id, body.message, model, edit=at)
    return stream_turn(services, lease, start, model, body.research)


@router.get("/events", responses={**SSE_RESPONSE, **errors(404, 422)})
async def turn_events(
    conversation_id: ConversationId,
    services: ServicesDep,
    after: Annotated[int, Query(ge=0, le=MAX_ID, description="the last event id seen")] = 0,
    last_event_id: Annotated[int, Header(ge=0, le=MAX_ID)] = 0,
) -> Response:
    """The conversation's turn as Server-Sent Events with `id:` lines: the events after
    Last-Event-ID or `after` (the later of the two: a reconnecting EventSource keeps its
    first URL and sends the last id it had), then the rest as they come, until its end.
    No turn running: the last turn's end at once (nothing when no turn ever ran)."""
    return EventStream(await services.runs.events(conversation_id, max(after, last_event_id)))


@router.post("/stop", responses=errors(404, 415, 422))
async def stop_turn(conversation_id: ConversationId, services: ServicesDep) -> Stopped:
    """Stop the conversation's running turn, whichever replica runs it: the model
    server's stream is closed, what came is kept, marked interrupted."""
    return {"stopped": await services.runs.stop(conversation_id)}


@router.post("/research/write", responses=STREAMED)
async def write_research(
    conversation_id: ConversationId,
    services: ServicesDep,
    person: Whose,
    body: Regenerate | None = None,
) -> Response:
    """After Stop: the report written from what the research had found (its plan, notes
    and pages), as a new version of the answer. 409 when the last answer is no stopped
    research with notes."""
    model = await chosen_model(services, conversation_id, body.model if body else None, person)
    found = found_in(await services.storage.load(conversation_id))
    await services.pending.settle(conversation_id)
    lease, start = await services.storage.begin_turn(conversation_id, None, model)
    return stream_turn(services, lease, start, model, Research(plan_seconds=0), found)


def found_in(conversation: Conversation) -> Found:
    messages = conversation["messages"]
    last: dict[str, Any] = dict(messages[-1]) if messages else {}
    kept = (last.get("research") or {}).get("found") if last.get("role") == "assistant" else None
    if kept is None:
        raise Conflict("the last answer is no stopped research with something found")
    return Found.model_validate(kept)


@router.post("/research/plan", responses=errors(404, 409, 415, 422))
async def start_research(
    conversation_id: ConversationId, body: ResearchStart, services: ServicesDep
) -> Started:
    """Start the research waiting on its plan, with the plan as the user left it (its
    sub-questions kept, rewritten or left out), whichever replica runs it: through the
    database, which that replica reads every tick. 409 when no plan waits, or a Start came
    already."""
    if not await services.storage.start_plan(conversation_id, body.questions):
        raise Conflict("no research plan is waiting for Start in this conversation")
    return {"started": True}


@router.put(
    "/turns/{position}/version",
    response_model=AS_STORED,
    responses=errors(404, 409, 413, 415, 422),
)
async def switch_version(
    conversation_id: ConversationId,
    position: Annotated[int, PathParam(ge=0, le=10**9, description="its user message")],
    body: VersionChoice,
    storage: StorageDep,
) -> Conversation:
    """Show another version of a turn; what followed it comes with it. 409 while a turn
    streams in the conversation."""
    return await storage.switch_version(conversation_id, position, body.index)


@router.post("/rewind", responses=errors(404, 409, 415, 422))
async def rewind_last_message(conversation_id: ConversationId, storage: StorageDep) -> Rewound:
    return {"message": await storage.rewind(conversation_id)}
