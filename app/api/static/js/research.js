// Research on the page (docs/research.md, "The page"): the switch beside Send and the
// "/research " prefix, the plan card shown before any search (its sub-questions editable and
// removable, Start, the pause after which it starts by itself), and the live progress line
// (the step, searches and pages against the budget, the time). The run is a turn of the
// conversation: its events come on the turn's stream (turn.js), and its report is the answer.

import { api } from "./api.js";
import { $, el } from "./dom.js";
import { dollars } from "./format.js";
import { keyOf } from "./kept.js";

const PAUSE_KEY = "research-plan-seconds";
const BUDGET_KEY = "research-budget";
/** The bounds a research may set, with the service's caps (app/config.py RESEARCH_CAPS). */
export const BOUNDS = { searches: 50, pages: 60, minutes: 60 };
export const DEFAULT_PAUSE = 10;
const PREFIX = /^\/research\s+/i;

/** Seconds a plan waits for Start before it starts by itself (0: it waits for Start). */
export function planPause() {
  const kept = Number(localStorage.getItem(keyOf(PAUSE_KEY)));
  return localStorage.getItem(keyOf(PAUSE_KEY)) === null || !Number.isFinite(kept) || kept < 0 ? DEFAULT_PAUSE : kept;
}

export function keepPlanPause(seconds) {
  localStorage.setItem(keyOf(PAUSE_KEY), String(seconds));
}

/** The message and, for a research, the body's `research` (the switch is on, or the
 * message starts with "/research "). */
export function researchOf(message) {
  const switched = $("#research-switch")?.getAttribute("aria-pressed") === "true";
  if (!switched && !PREFIX.test(message)) return { message, research: undefined };
  return { message: message.replace(PREFIX, ""), research: researchBody() };
}

/** The body's `research`: the pause, and the bounds this browser set (the others are the
 * service's defaults). */
export function researchBody() {
  return { plan_seconds: planPause(), ...researchBudget() };
}

/** The budget kept in this browser: only the bounds set, each within its cap. */
export function researchBudget() {
  let kept = {};
  try {
    kept = JSON.parse(localStorage.getItem(keyOf(BUDGET_KEY)) || "{}") || {};
  } catch {
    kept = {};
  }
  return Object.fromEntries(Object.entries(BOUNDS).filter(([name, cap]) => Number.isFinite(kept[name]) && kept[name] > 0 && kept[name] <= cap).map(([name]) => [name, kept[name]]));
}

export function keepResearchBudget(budget) {
  localStorage.setItem(keyOf(BUDGET_KEY), JSON.stringify(budget));
}

export function wireSwitch() {
  const button = $("#research-switch");
  button.addEventListener("click", () => {
    const on = button.getAttribute("aria-pressed") !== "true";
    button.setAttribute("aria-pressed", String(on)); // the box's placeholder follows (conversation.js)
  });
}

/** The plan card and the progress line of one research answer. */
export class ResearchView {
  constructor(conversationId) {
    this.conversationId = conversationId;
    this.card = null;
    this.timer = 0;
    this.ticker = 0;
    this.progress = el("div", { className: "research-progress", role: "status" });
    this.progress.hidden = true;
  }

  /** A `research_plan` event: the card to edit and start, or (started) its end. */
  plan(event, before) {
    if (event.started) {
      this.dropCard();
      return;
    }
    this.dropCard();
    this.card = planCard(event, this.last, (questions) => this.start(questions));
    before.before(this.card);
    if (event.starts_in) this.countdown(event.starts_in);
  }

  countdown(seconds) {
    const note = this.card.querySelector(".plan-countdown");
    const until = performance.now() + seconds * 1000;
    const tick = () => {
      const left = Math.max(0, Math.ceil((until - performance.now()) / 1000));
      note.textContent = `starts by itself in ${left} s`;
    };
    tick();
    this.timer = setInterval(tick, 250);
    // Editing stops the pause here; the service's own pause still runs, so Start says so.
    this.card.addEventListener("input", () => this.stopCountdown(note), { once: true });
  }

  stopCountdown(note) {
    clearInterval(this.timer);
    note.textContent = "edited: press Start before it starts by itself";
  }

  async start(questions) {
    const error = this.card.querySelector(".field-error");
    try {
      await api(`/api/conversations/${encodeURIComponent(this.conversationId)}/research/plan`, { method: "POST", body: { questions } });
    } catch (failure) {
      error.textContent = `Not started: ${failure.message}`;
    }
  }

  dropCard() {
    clearInterval(this.timer);
    this.card?.remove();
    this.card = null;
  }

  /** A `research` event: the step line and the counters; the time goes on between steps. */
  step(event) {
    if (event.step) this.current = event;
    this.last = event;
    this.since = performance.now();
    this.drawProgress();
    this.progress.hidden = event.step === "done";
    if (!this.ticker && !this.progress.hidden) this.ticker = setInterval(() => this.drawProgress(), 1000);
  }

  drawProgress() {
    const event = this.last;
    const seconds = event.seconds + (performance.now() - this.since) / 1000;
    const counts = `searches ${event.searches}/${event.max_searches} · pages ${event.pages}/${event.max_pages} · ${clock(seconds)}`;
    this.progress.replaceChildren(el("span", { className: "research-step", text: stepLine(this.current || event) }), el("span", { className: "research-counts", text: counts }));
  }

  end() {
    this.dropCard();
    clearInterval(this.ticker);
    this.progress.hidden = true;
  }
}

function planCard(event, budget, start) {
  const list = el("ol", { className: "plan-questions" });
  const row = (question) => {
    const input = el("input", { type: "text", value: question, "aria-label": "Sub-question", maxlength: "500" });
    const remove = el("button", { type: "button", className: "icon quiet", "aria-label": "Remove this sub-question", title: "Remove", text: "×" });
    const item = el("li", {}, input, remove);
    remove.addEventListener("click", () => {
      if (list.children.length > 1) item.remove();
    });
    return item;
  };
  list.append(...event.questions.map(row));
  const questions = () => [...list.querySelectorAll("input")].map((i) => i.value.trim()).filter(Boolean);
  const startButton = el("button", { type: "button", className: "primary plan-start", text: "Start", on: { click: () => start(questions()) } });
  const waits = event.starts_in ? "" : "waits for Start";
  return el(
    "section",
    { className: "plan-card", "aria-label": "Research plan" },
    el("div", { className: "plan-head" }, el("strong", { text: "Research plan" }), el("span", { className: "plan-countdown", text: waits })),
    list,
    budget ? el("p", { className: "plan-note plan-budget", text: budgetLine(event, budget) }) : null,
    el("p", { className: "field-error", role: "alert" }),
    el("div", { className: "plan-foot" }, startButton, el("span", { className: "plan-note", text: "Edit or remove sub-questions, then Start. Stop cancels." })),
  );
}

/** What the budget may spend: its bounds, the searches in money where a price is set, and
 * the Brave plan's queries left this month where its last answer stated them. */
function budgetLine(event, budget) {
  const money = event.max_cost === null || event.max_cost === undefined ? "" : `, about ${dollars(event.max_cost)} at most`;
  const left = event.queries_left === null || event.queries_left === undefined ? "" : `; ${event.queries_left.toLocaleString("en")} Brave queries left this month`;
  // Each search may send Brave more than one query (two with both of our engines on).
  const queries = event.max_queries && event.max_queries !== budget.max_searches ? ` (${event.max_queries.toLocaleString("en")} Brave queries)` : "";
  return `Up to ${budget.max_searches} searches${queries}${money}${left}, ${budget.max_pages} pages, ${Math.round(budget.max_seconds / 60)} minutes.`;
}

const STEPS = { plan: "Planning", search: "Searching", read: "Reading", reflect: "Reflecting on the notes", report: "Writing the report", done: "Done" };

function stepLine(event) {
  const what = STEPS[event.step] || "Working";
  if (!event.about) return what;
  if (event.step === "read") {
    try {
      return `${what} ${new URL(event.about).hostname}`;
    } catch {
      return `${what} ${event.about}`;
    }
  }
  return `${what} “${event.about}”`;
}

function clock(seconds) {
  const whole = Math.round(seconds);
  return `${Math.floor(whole / 60)}:${String(whole % 60).padStart(2, "0")}`;
}
