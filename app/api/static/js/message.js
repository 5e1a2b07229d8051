// One message on screen: the user's bubble, or an answer with its activity trail, sources
// (drawn by sources.js), stats and, when it failed, an error card with the action that
// recovers.

import { el, clear } from "./dom.js";
import * as format from "./format.js";
import { renderMarkdown, splitStable } from "./markdown.js";
import { sourceList } from "./sources.js";

let answerCount = 0;
let searchPrice = 0; // BRAVE_PRICE_PER_1000 from /api/config; 0 shows no money

export function priceSearches(dollarsPer1000) {
  searchPrice = dollarsPer1000 || 0;
}

const LONG_LINES = 14; // a message of more lines than this shows its start, and "Show more"
const LONG_CHARS = 1400;

export function userMessage(text) {
  const bubble = el("div", { className: "bubble" }, bubbleParts(text));
  const actions = el("div", { className: "message-actions" });
  if (text.split("\n").length > LONG_LINES || text.length > LONG_CHARS) {
    bubble.classList.add("collapsed");
    const toggle = el("button", { type: "button", className: "quiet show-more", text: "Show more", "aria-expanded": "false" });
    toggle.addEventListener("click", () => {
      const open = bubble.classList.toggle("collapsed") === false;
      toggle.textContent = open ? "Show less" : "Show more";
      toggle.setAttribute("aria-expanded", String(open));
    });
    actions.append(toggle);
  }
  return el("div", { className: "message user" }, bubble, actions.childNodes.length ? actions : null);
}

/** The message as typed, its ``` fenced blocks in a monospace font: text nodes only, so
 * the bubble's text stays exactly the message (Edit reads it back). */
function bubbleParts(text) {
  const parts = [];
  const fence = /^ {0,3}(`{3,}|~{3,})[^\n]*\n[\s\S]*?(?:^ {0,3}\1[ \t]*$|(?![\s\S]))/gm;
  let at = 0;
  for (const match of text.matchAll(fence)) {
    if (match.index > at) parts.push(document.createTextNode(text.slice(at, match.index)));
    parts.push(el("code", { className: "bubble-code", text: match[0] }));
    at = match.index + match[0].length;
  }
  if (at < text.length) parts.push(document.createTextNode(text.slice(at)));
  return parts;
}

export function notice(text, kind = "") {
  return el("div", { className: `notice ${kind}`.trim(), role: "status", text });
}

/**
 * An answer, live or stored. Live: feed it events (text, reasoning, activity, warnings),
 * then finish(), interrupt() or fail(). Stored: AnswerView.stored(message).
 */
export class AnswerView {
  constructor() {
    this.id = `a${++answerCount}`;
    this.text = "";
    this.reasoning = "";
    this.activity = [];
    this.waiting = null; // a search waiting for the plan's rate, until its step comes
    this.warnings = [];
    this.sources = [];
    this.renderedStable = -1;
    this.frame = 0;
    this.live = true;
    this.research = false; // a research run: the trail is its log
    this.renumbers = true; // until the service's numbering comes with the done event
    this.trail = el("details", { className: "trail live" });
    this.trailSummary = el("summary", {}, el("span", { className: "trail-summary-text", text: "Working…" }));
    this.timeline = el("ol", { className: "timeline" });
    this.trail.append(this.trailSummary, this.timeline);
    this.trail.hidden = true;
    this.stable = el("div", { className: "stable" });
    this.tail = el("p", { className: "streaming-tail" });
    this.caret = el("span", { className: "caret", "aria-hidden": "true" });
    this.status = el("div", { className: "answer-status" });
    this.body = el("div", { className: "answer", "aria-live": "polite", "aria-busy": "true" }, this.stable, this.tail, this.status);
    this.sourcesBox = el("div", { className: "sources-box" });
    this.stats = el("div", { className: "answer-stats" });
    this.errorBox = el("div", { className: "error-box" });
    this.node = el("div", { className: "message assistant", id: this.id }, this.trail, this.body, this.errorBox, this.sourcesBox, this.stats);
    this.tail.append(this.caret);
  }

  static stored(message) {
    const view = new AnswerView();
    view.text = message.content || "";
    view.reasoning = message.reasoning || "";
    view.activity = message.activity || [];
    view.warnings = message.warnings || [];
    view.sources = message.sources || [];
    view.timing = message.timing || {};
    view.model = message.model;
    view.research = Boolean(message.research);
    view.spent = message.research?.spent;
    view.at = message.created;
    view.live = false;
    view.renumbers = false; // stored numbered as it cites its sources
    view.render();
    view.renderTrail();
    view.showEnd(message.status, message.usage, message.truncated);
    if (message.error) view.showError(message.error, {});
    return view;
  }

  appendText(text) {
    this.text += text;
    this.scheduleRender();
  }

  addReasoning(text) {
    if (!this.reasoning) this.thinkingStarted = performance.now();
    this.reasoning += text;
    this.thinkingEnded = performance.now();
    this.renderTrail();
  }

  /** The service discarded an attempt it runs again: only what it keeps stays shown. */
  replaceStreamed(text, reasoning) {
    this.text = text;
    this.reasoning = reasoning;
    this.renderedStable = -1;
    this.scheduleRender();
    this.renderTrail();
  }

  addActivity(event) {
    this.waiting = null;
    this.activity.push(event);
    this.renderTrail();
  }

  /** A search waits for the plan's rate: said while it waits, until its step comes. */
  waitForRate(event) {
    this.waiting = event;
    this.renderTrail();
  }

  addWarning(message) {
    this.warnings.push(message);
    this.renderTrail();
  }

  scheduleRender() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.render();
    });
  }

  /** Markdown for the stable prefix only, re-rendered when it grows; the tail as text. */
  render() {
    const { stable, tail } = this.live ? splitStable(this.text) : { stable: this.text, tail: "" };
    if (stable.length !== this.renderedStable) {
      this.stable.replaceChildren(renderMarkdown(stable, { citationHref: (n) => this.citationHref(n), citationLabel: (n) => this.shownNumber(n) }));
      this.renderedStable = stable.length;
    }
    const tailText = this.tail.firstChild === this.caret ? null : this.tail.firstChild;
    if (tailText) tailText.textContent = tail;
    else this.tail.insertBefore(document.createTextNode(tail), this.caret);
    this.tail.hidden = !this.live && !tail;
    this.caret.hidden = !this.live;
  }

  citationHref(n) {
    return n >= 1 && n <= Math.max(this.sources.length, this.citableCount()) ? `#${this.id}-source-${n}` : null;
  }

  /**
   * The numbers this answer shows: from 1, the sources it cites in the order it first cites
   * them, then the others. The service numbers the stored answer so (app/numbering.py); live,
   * `n` is the number the model was given (one per turn's sources) and the page renumbers
   * the same way, so the numbers do not change when the answer ends.
   */
  shownNumber(n) {
    if (!this.renumbers) return n;
    const order = this.citedOrder();
    const at = order.indexOf(n);
    if (at >= 0) return at + 1;
    const rest = [];
    for (let k = 1; k <= this.numberCount(); k++) if (!order.includes(k)) rest.push(k);
    return order.length + rest.indexOf(n) + 1;
  }

  citedOrder() {
    const count = this.numberCount();
    if (this.orderFor === this.text && this.orderCount === count) return this.order;
    const order = [];
    for (const match of withoutCode(this.text).matchAll(/\[(\d{1,3}(?:[ \t]*,[ \t]*\d{1,3})*)\]/g)) {
      for (const n of match[1].split(",").map(Number)) if (n >= 1 && n <= count && !order.includes(n)) order.push(n);
    }
    this.orderFor = this.text;
    this.orderCount = count;
    this.order = order;
    return order;
  }

  /** How many numbers the model could cite: its sources once known, else the trail's. */
  numberCount() {
    return this.sources.length || this.citableCount();
  }

  /** The whole answer as Markdown, numbered as shown, with the sources it cites. */
  markdown() {
    const text = this.text.replace(/\[(\d{1,3}(?:[ \t]*,[ \t]*\d{1,3})*)\]/g, (whole, list) =>
      this.citationHref(Number(list.split(",")[0])) ? `[${list.split(",").map((n) => this.shownNumber(Number(n))).join(", ")}]` : whole,
    );
    const cited = this.citedOrder().filter((n) => this.sources[n - 1]);
    if (!cited.length) return text;
    const lines = cited.map((n) => `${this.shownNumber(n)}. [${this.sources[n - 1].title || this.sources[n - 1].url}](${this.sources[n - 1].url})`);
    return `${text.trimEnd()}\n\nSources:\n${lines.join("\n")}\n`;
  }

  /** While streaming, the sources are not known yet, but each search result and page read is. */
  citableCount() {
    return this.activity.reduce((count, step) => count + (step.results ? step.results.length : 0) + (step.type === "fetch" ? 1 : 0), 0);
  }

  renderTrail() {
    const searches = this.activity.filter((a) => a.type === "search");
    const reads = this.activity.filter((a) => a.type === "fetch" && !a.error);
    const parts = [];
    const thought = this.thinkingSeconds();
    const stillThinking = this.live && !this.text && !this.activity.length;
    if (this.research) parts.push(researched(this.reasoning));
    else if (this.reasoning) parts.push(stillThinking ? `Thinking… ${format.seconds(thought)}` : `Thought ${format.seconds(thought)}`);
    if (searches.length) {
      const languages = [...new Set(searches.map((s) => s.language).filter(Boolean))];
      parts.push(`Searched ${searches.length}×${languages.length ? ` (${languages.join(", ")})` : ""}`);
    }
    if (reads.length) parts.push(`Read ${reads.length} page${reads.length === 1 ? "" : "s"}`);
    const failures = this.activity.filter((a) => a.error).length + this.looseWarnings().length;
    if (failures) parts.push(`${failures} warning${failures === 1 ? "" : "s"}`);
    const waiting = this.live ? this.waiting : null;
    this.trail.hidden = parts.length === 0 && !waiting;
    this.trailSummary.firstChild.textContent = parts.join(" · ") || "Working…";
    clear(this.timeline);
    if (this.reasoning) {
      this.timeline.append(
        el("li", {}, el("span", { className: "step-title", text: this.research ? "The research, step by step" : thought ? `Thought for ${format.seconds(thought)}` : this.live ? "Thinking…" : "Thought" }), el("div", { className: "thinking-text", text: this.reasoning })),
      );
    }
    for (const step of this.activity) this.timeline.append(trailStep(step));
    if (waiting) {
      const note = ` · waiting ${waiting.seconds.toFixed(1)} s for the search plan's rate`;
      this.timeline.append(el("li", { className: "waiting" }, el("span", { className: "step-title", text: `Searching “${waiting.query}”` }), note));
    }
    for (const warning of this.looseWarnings()) this.timeline.append(el("li", { className: "warning", text: `⚠ ${warning}` }));
  }

  /** Warnings that are not already a failed step of the trail (a tool failure is both). */
  looseWarnings() {
    return this.warnings.filter((warning) => !this.activity.some((a) => a.error === warning));
  }

  thinkingSeconds() {
    if (this.timing && this.timing.thinking_seconds) return this.timing.thinking_seconds;
    return this.thinkingStarted ? (this.thinkingEnded - this.thinkingStarted) / 1000 : 0;
  }

  /** The turn ended with a done event. */
  finish(done) {
    this.live = false;
    if (typeof done.text === "string") {
      this.text = done.text; // as stored: numbered as it cites, which is what was shown
      this.renumbers = false;
    }
    this.sources = done.sources || [];
    this.timing = done.timing || {};
    this.spent = done.research?.spent;
    this.at = done.at;
    this.renderedStable = -1; // the numbering may change with the sources known
    this.render();
    this.renderTrail();
    this.showEnd(done.status, done.usage, done.truncated);
  }

  /** Stop: what came stays, marked. */
  interrupt() {
    this.live = false;
    this.sources = this.sourcesFromActivity();
    this.at = new Date().toISOString();
    this.render();
    this.renderTrail();
    this.showEnd("interrupted", null, false);
  }

  sourcesFromActivity() {
    const sources = [];
    for (const step of this.activity) {
      for (const result of step.results || []) if (!sources.some((s) => s.url === result.url)) sources.push({ ...result, read: false });
      if (step.type === "fetch" && !step.error) {
        const known = sources.find((s) => s.url === step.url);
        if (known) known.read = true;
        else sources.push({ url: step.url, title: step.title, domain: step.domain, read: true });
      }
    }
    return sources;
  }

  showEnd(status, usage, truncated) {
    this.live = false;
    this.trail.classList.remove("live");
    this.body.setAttribute("aria-busy", "false");
    this.caret.hidden = true;
    this.tail.hidden = true;
    this.body.classList.toggle("interrupted", status === "interrupted");
    clear(this.status);
    if (status === "interrupted") this.status.append(el("span", { className: "badge interrupted", text: "interrupted" }));
    if (truncated) this.status.append(el("span", { className: "badge warn", text: "cut at the reply limit" }));
    if (!this.text && !this.activity.length && !this.reasoning) this.body.hidden = true;
    this.renderSources();
    this.renderStats(usage);
  }

  renderSources() {
    clear(this.sourcesBox);
    if (this.sources.length) this.sourcesBox.append(sourceList(this.sources, (n) => this.shownNumber(n), this.id, (n) => this.citedOrder().includes(n)));
  }

  renderStats(usage) {
    clear(this.stats);
    const searches = this.activity.filter((a) => a.type === "search").length;
    const pages = this.activity.filter((a) => a.type === "fetch" && !a.error).length;
    const items = [];
    if (usage && usage.reported) {
      const cached = usage.cached_tokens ? ` (${format.tokens(usage.cached_tokens)} cached)` : "";
      items.push(`in ${format.tokens(usage.prompt_tokens)}${cached}`, `out ${format.tokens(usage.completion_tokens)}`);
      // Tokens a second mean nothing for a research's many steps: its figures are what it spent.
      const writing = this.timing && this.timing.writing_seconds;
      if (!this.research && writing > 0.05 && usage.completion_tokens) items.push(`${Math.round(usage.completion_tokens / writing)} tok/s`);
    } else if (usage) {
      items.push("usage not reported");
    }
    if (this.spent) {
      items.push(...spentItems(this.spent));
    } else {
      // Only a search that reached the engine is paid for: not one the cache or the answer's
      // earlier call gave, nor one that failed (Brave bills successful requests only). Each
      // costs the Brave queries it spent (two with both of our engines); one stored before
      // searches said so, one.
      const paid = this.activity.filter((a) => a.type === "search" && a.cached_age === undefined && !a.repeated && !a.error);
      const sent = paid.reduce((sum, a) => sum + (a.queries ?? 1), 0);
      if (searches) items.push(searchCount(searches, sent));
      if (pages) items.push(`${pages} page${pages === 1 ? "" : "s"}`);
    }
    // A cost only when the server gave one: local servers never do, and saying so under
    // every answer says nothing.
    if (usage && usage.cost !== null && usage.cost !== undefined) items.push(format.cost(usage.cost));
    const meta = answerMeta(this.model, this.at);
    if (meta) this.stats.append(meta);
    for (const item of items) this.stats.append(el("span", { text: item }));
    this.stats.append(el("span", { className: "spacer" }));
    if (this.text) this.stats.append(copyButton(() => this.markdown()));
  }

  /** Put an action (Regenerate) at the end of the stats line; null removes it. */
  setAction(button) {
    for (const old of this.stats.querySelectorAll(".answer-action")) old.remove();
    if (button) this.stats.append(button);
  }

  /**
   * The error card: the kind in words, what happened to the message, one action.
   * actions: {retry, editAndResend, openStatus}, each a function (absent ones not shown).
   */
  showError(error, actions) {
    this.live = false;
    this.render(); // the text still in the streaming tail stays, rendered whole
    this.trail.classList.remove("live");
    this.body.setAttribute("aria-busy", "false");
    this.caret.hidden = true;
    this.tail.hidden = true;
    if (this.text) this.body.classList.add("interrupted");
    else if (!this.activity.length && !this.reasoning) this.body.hidden = true;
    clear(this.errorBox);
    this.errorBox.append(errorCard(error, actions, Boolean(this.text)));
    this.renderTrail();
  }
}

const KIND_TITLES = {
  auth: "The model server refused the key",
  rate_limit: "The model server asks to slow down",
  content_filter: "The model server's filter blocked this",
  context_overflow: "The conversation no longer fits the model's window",
  network: "The model server could not be reached",
  upstream: "The model server failed",
  tools_unsupported: "This model does not take the web tools",
  internal: "Something failed in the chat service",
  connection: "Lost the connection to the chat service",
  database: "The database stopped answering",
};

function errorCard(error, actions, hasText) {
  const kind = error.kind || "upstream";
  const card = el("div", { className: "error-card", role: "alert", dataset: { kind } });
  const cut = kind === "network" && hasText && CUT_SHORT.test(error.message || "");
  card.append(el("h3", { text: cut ? "The model server closed the answer before it ended" : KIND_TITLES[kind] || "The answer failed" }));
  const fate = error.restore
    ? "Your message is back in the box below."
    : hasText
      ? "The text that came is kept above, marked."
      : "";
  const advice = {
    auth: "Set LLM_API_KEY (in .env) to a key the model server accepts, then restart the service.",
    content_filter: "Sending the same text again would fail the same way: edit it first.",
    // The service has already folded what it could and tried again before saying this.
    context_overflow: "Earlier messages were already folded into a summary as far as they can be, and it still does not fit: shorten the message, turn the web tools off for it, or start a new conversation. Retry sends it the same way again.",
    rate_limit: "",
    // The service keeps the answer and writes it once the database is back (app/chat/pending.py).
    database: "It is saved once the database answers again; until then the service refuses new messages.",
  }[kind];
  card.append(el("p", {}, [fate, advice].filter(Boolean).join(" ")));
  // The server's own words, kept for whoever diagnoses it, but out of the way.
  if (error.message) card.append(el("details", { className: "detail" }, el("summary", { text: "details" }), el("p", { text: error.message })));
  const row = el("div", { className: "actions" });
  if (kind === "auth" && actions.openStatus) {
    row.append(el("button", { type: "button", className: "primary", text: "Open status", on: { click: actions.openStatus } }));
  } else if (kind === "content_filter" && actions.editAndResend) {
    row.append(el("button", { type: "button", className: "primary", text: "Edit & resend", on: { click: actions.editAndResend } }));
  } else if (actions.retry && kind !== "database") {
    const retry = el("button", { type: "button", className: "primary retry", text: "Retry", on: { click: actions.retry } });
    row.append(retry);
    if (kind === "rate_limit" && error.retry_after) countdown(retry, row, error.retry_after);
  }
  if (row.childNodes.length) card.append(row);
  return card;
}

function countdown(button, row, seconds) {
  const label = el("span", { className: "countdown", "aria-live": "polite" });
  row.append(label);
  button.disabled = true;
  const end = performance.now() + seconds * 1000;
  const tick = () => {
    const left = Math.ceil((end - performance.now()) / 1000);
    if (left <= 0 || !button.isConnected) {
      button.disabled = false;
      label.textContent = "";
      return;
    }
    label.textContent = `retry in ${left} s`;
    setTimeout(tick, 250);
  };
  label.textContent = `retry in ${Math.ceil(seconds)} s`;
  setTimeout(tick, 250); // by then the card is on the page (a removed card stops the clock)
}

/** "3 searches, about 0.015 $": the money for the Brave `queries` they sent, where a price is set. */
function searchCount(searches, queries) {
  const money = searchPrice && queries ? `, about ${format.dollars((queries * searchPrice) / 1000)}` : "";
  return `${searches} search${searches === 1 ? "" : "es"}${money}`;
}

/** What a research run spent: its searches (the money for the Brave queries of those the
 * cache did not answer), the pages it read, its time. */
function spentItems(spent) {
  const minutes = spent.seconds < 60 ? format.seconds(spent.seconds) : `${(spent.seconds / 60).toFixed(1)} min`;
  return [searchCount(spent.searches, spent.queries), `${spent.pages} page${spent.pages === 1 ? "" : "s"} read`, minutes];
}

/** A research's trail in one line: its searches and pages, counted from its log. */
function researched(log) {
  const searches = (log.match(/^Searched /gm) || []).length;
  const pages = (log.match(/^Read /gm) || []).length;
  return `Research: ${searches} search${searches === 1 ? "" : "es"} · ${pages} page${pages === 1 ? "" : "s"} read`;
}

function trailStep(step) {
  if (step.type === "search") {
    const results = step.results || [];
    const domains = [...new Set(results.map((r) => r.domain).filter(Boolean))];
    return el(
      "li",
      { className: step.error ? "failed" : "" },
      el("span", { className: "step-title", text: `Searched “${step.query}”` }),
      ` · ${step.language || "all"}`,
      // The model cannot call tools: the service searched before it answered.
      step.without_tools ? " · without tool calling" : "",
      step.error ? ` · ${step.error}` : ` · ${results.length} result${results.length === 1 ? "" : "s"}`,
      // Pages Brave's LLM Context read for the answer: no request reached their servers from here.
      step.read && step.read.length && !step.left_out ? ` · ${step.read.length} read through Brave, your address not shown` : "",
      step.repeated ? " · repeated" : "",
      step.waited ? ` · waited ${step.waited.toFixed(1)} s for the search plan's rate` : "",
      step.cached_age !== undefined ? ` · from cache, ${format.age(step.cached_age)}` : "",
      domains.length ? el("div", { className: "domains" }, domains.map((d) => el("span", { className: "domain-chip", text: d }))) : null,
    );
  }
  if (step.type === "fetch") {
    let host = step.domain;
    try {
      host = host || new URL(step.url).hostname;
    } catch {
      host = step.url;
    }
    const details = step.error
      ? [` · ${step.error}`]
      : [` · ${host}`, step.chars ? ` · ${format.bytes(step.chars)}` : "", step.seconds ? ` · ${format.seconds(step.seconds)}` : ""];
    // Left out: fetched, but the model's window had no room for it (the error says so).
    const verb = step.refused ? "Refused to read" : step.left_out ? "Fetched" : step.error ? "Could not read" : "Read";
    // An address found in no search result and no message of yours: a page may have planted it.
    const flag = step.unsolicited
      ? el("span", { className: "badge warn unsolicited", title: "This address came from neither a search result nor your messages.", text: "not from a result or your message" })
      : null;
    return el("li", { className: step.error ? "failed" : "" }, el("span", { className: "step-title", text: `${verb} “${step.title || step.url}”` }), ...details, flag ? " " : "", flag);
  }
  return el("li", { className: "warning", text: `⚠ ${step.message || ""}` });
}

// A model server that died mid-answer: the stream broke, not the request.
const CUT_SHORT = /TransferEncodingError|RemoteProtocolError|ReadError|incomplete|ended the stream|lost the connection/i;

/** The text without its code (fenced blocks, inline spans): a `[n]` there cites nothing. */
function withoutCode(text) {
  const kept = [];
  let fence = "";
  for (const line of text.split("\n")) {
    const marker = /^ {0,3}(`{3,}|~{3,})/.exec(line);
    if (fence) {
      if (marker && marker[1][0] === fence[0] && marker[1].length >= fence.length) fence = "";
    } else if (marker) fence = marker[1];
    else kept.push(line.replace(/(`+).+?\1/g, ""));
  }
  return kept.join("\n");
}

/** Who wrote the answer and when: the time shown, the date and model on hover. */
function answerMeta(model, at) {
  const when = at ? new Date(at) : null;
  const valid = when && !Number.isNaN(when.getTime());
  if (!model && !valid) return null;
  const time = valid ? when.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }) : "";
  const full = [model, valid ? when.toLocaleString() : ""].filter(Boolean).join(" · ");
  return el("span", { className: "answer-meta", title: full }, model ? el("span", { className: "answer-model", text: model }) : null, time ? el("time", { datetime: when.toISOString(), text: time }) : null);
}

function copyButton(markdown) {
  const button = el("button", { type: "button", className: "quiet copy-answer", text: "Copy", title: "Copy the answer as Markdown" });
  button.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(markdown());
      button.textContent = "Copied";
    } catch {
      button.textContent = "Not copied";
    }
    setTimeout(() => (button.textContent = "Copy"), 1500);
  });
  return button;
}
