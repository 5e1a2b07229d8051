"""The page's Status panel: the doctor's checks over HTTP, each with its fix in plain words.

``GET /api/status?quick=1``: the free checks (no search, nothing generated), for the
page-load overview. ``GET /api/status``: those and tool calling (the model answers a tiny
request). Both include the Brave plan (its rate, the month's queries left, the queries this service
sent) and the engines SearXNG suspended, read without a search. ``POST /api/status/brave``:
the Brave key alone; it runs one real search, which
spends one query of the user's Brave plan, so only on the user's request.
Every answer is ``{"checks": [{id, part, name, state, detail, fix}]}``; a failing part is a
failed check, never an HTTP error.
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from typing_extensions import TypedDict

from app.api.access import state_person
from app.api.bodies import REFUSALS
from app.api.deps import ServicesDep
from app.chat.services import Services
from app.doctor.check import Check, first_failure
from app.doctor.model import (
    key_refused_check,
    model_quick_checks,
    remembered_refusal_check,
    tool_check,
)
from app.doctor.searxng import brave_key_check, plan_check, searxng_free_checks, suspension_checks
from app.store.search_shares import ShareLimits
from app.store.users import User

router = APIRouter(prefix="/api/status", responses=REFUSALS)


class Checked(TypedDict):
    """Every answer of the Status panel: each check as `Check.as_dict` gives it."""

    checks: list[dict[str, str]]


def answer(checks: list[Check]) -> Checked:
    return {"checks": [check.as_dict() for check in checks]}


async def model_checks(state: Services, *, tools: bool) -> list[Check]:
    checks = await model_quick_checks(state.model, state.settings, state.served.reread_window)
    if refused := key_refused_check(state.model.key_refused):
        return [*checks, refused]  # what a tiny request would meet too: not sent again
    if tools and first_failure(checks) is None:
        model = state.settings.default_model
        tool_calling = await tool_check(state.model, model)
        storage = state.storage
        refusal = await storage.tool_refusal(model)
        checks.append(tool_calling)
        if remembered := remembered_refusal_check(refusal, tool_calling):
            checks.append(remembered)
    return checks


@router.get("")
async def status(request: Request, services: ServicesDep, quick: bool = False) -> Checked:
    """Every check but the Brave key's; `quick`: without tool calling (nothing generated).
    In household mode also the asker's share of the plan, and for an admin everyone's."""
    searxng, model = await asyncio.gather(
        searxng_free_checks(services.searxng.url), model_checks(services, tools=not quick)
    )
    plan = await search_plan_checks(services) if first_failure(searxng) is None else []
    shares = await share_checks(services, state_person(request.scope))
    return answer([*searxng, *plan, *shares, *model])


async def share_checks(services: Services, asker: User | None) -> list[Check]:
    """The asker's use and limits; an admin's, each person's use too (names and counts
    only). Nothing outside household mode, or for the access token alone."""
    if asker is None:
        return []
    shares = await services.storage.search_shares(ShareLimits.default(services.settings))
    own = next((share for share in shares if share.name == asker.name), None)
    if own is None:
        return []
    spent = [
        limit is not None and used >= limit
        for used, limit in ((own.today, own.limits.daily), (own.month, own.limits.monthly))
    ]
    checks = [
        Check(
            "search-share",
            "engine",
            "Your searches",
            "warning" if any(spent) else "ok",
            own.described(),
            "ask an admin of the household for a larger share" if any(spent) else "",
        )
    ]
    if asker.admin:
        each = "; ".join(f"{s.name}: today {s.today}, this month {s.month}" for s in shares)
        checks.append(
            Check(
                "search-shares", "engine", "Each person's searches", "ok", f"{each} Brave queries"
            )
        )
    return checks


async def search_plan_checks(services: Services) -> list[Check]:
    """The Brave plan and the engines seen suspended: read, no search sent."""
    plan = await asyncio.to_thread(services.plan.read)
    spent = await services.storage.searches_spent()
    suspended = suspension_checks(services.searxng.suspensions.current())
    settings = services.settings
    return [
        plan_check(plan, spent, settings.search_rate, settings.brave_price_per_1000),
        *suspended,
    ]


@router.post("/brave")
async def brave(services: ServicesDep) -> Checked:
    """The Brave key: one real search, one query of the user's Brave plan."""
    check = await brave_key_check(
        services.searxng.url, plan=services.plan, searcher=services.searcher
    )
    return answer([check])
