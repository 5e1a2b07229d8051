// The conversation's top bar: its title, the model picker (with the models whose server
// refused the web tools), the tools pill, the totals and the context bar. Functions of the
// ConversationView (conversation.js), which holds the conversation they show.

import { api } from "./api.js";
import { $, el, clear } from "./dom.js";
import * as format from "./format.js";

const CONTEXT_PARTS = [
  ["persona", "persona and date"],
  ["memory", "memory"],
  ["summary", "summary"],
  ["tools", "tool note and declarations"],
  ["history", "history"],
  ["kept_sources", "earlier answers' sources (kept)"],
];

export function renderHeader(view) {
  const settings = view.settings;
  if (view.conversation) selectModel(view, settings.model || view.config.default_model);
  const pill = $("#tools-pill");
  const search = settings.web_search && settings.search_max_uses > 0;
  const read = settings.web_fetch && settings.fetch_max_uses > 0;
  pill.textContent = search || read ? `web: ${[search ? `search ${settings.search_max_uses}` : "", read ? `read ${settings.fetch_max_uses}` : ""].filter(Boolean).join(" / ")}` : "web: off";
  pill.classList.toggle("off", !(search || read));
  pill.title = `Web tools per answer; the search locale is ${settings.search_locale}. Change them in Settings.`;
  renderToolRefusal(view);
  renderTotals(view);
  // A conversation whose first message failed has an estimate but nothing measured, and
  // nothing to export (nor is it listed).
  const answered = view.conversation && view.conversation.messages.some((m) => m.role === "assistant");
  renderContextBar(view, answered ? view.conversation.budget : null);
  $("#export-conversation").disabled = !view.conversation || !view.conversation.messages.length;
  renderTitle(view);
}

export function renderTitle(view) {
  const title = view.conversation ? view.conversation.title : "New conversation";
  $("#conversation-title").textContent = title;
  $("#conversation-title").title = title;
}

export function renderTotals(view) {
  const box = $("#totals");
  const parts = totalsParts(view);
  box.textContent = parts.join(" · ");
  box.title = "Show the details";
  clear($("#totals-details")).append(...parts.map((part) => el("span", { text: part })));
}

/** The conversation's figures, those that are zero left out. */
function totalsParts(view) {
  const totals = view.conversation && view.conversation.totals;
  // The first answer, still coming, has reported nothing yet: neither "No turns yet" nor
  // "not reported" before it ends.
  if (!totals && view.streaming) return ["First answer coming: its usage when it ends"];
  const turns = view.conversation ? view.conversation.messages.filter((m) => m.role === "assistant").length : 0;
  if (!turns && !(totals && totals.turns_unreported)) return ["No turns yet"];
  const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`;
  if (!totals) return [plural(turns, "turn", "turns"), "usage not reported"];
  const parts = [];
  if (totals.prompt_tokens) {
    const cached = totals.cached_tokens ? ` (${format.percent(totals.cached_tokens, totals.prompt_tokens)}% cached)` : "";
    parts.push(`in ${format.tokens(totals.prompt_tokens)}${cached}`);
  }
  if (totals.completion_tokens) parts.push(`out ${format.tokens(totals.completion_tokens)}`);
  if (totals.searches) parts.push(plural(totals.searches, "search", "searches"));
  if (totals.fetches) parts.push(plural(totals.fetches, "page", "pages"));
  if (totals.requests_with_cost) {
    const unreported = totals.requests_unreported_cost ? ` (${plural(totals.requests_unreported_cost, "request", "requests")} without a cost)` : "";
    parts.push(`${format.cost(totals.cost)}${unreported}`);
  }
  if (turns) parts.push(plural(turns, "turn", "turns"));
  if (totals.turns_unreported) parts.push(`${plural(totals.turns_unreported, "answer", "answers")} without token counts`);
  return parts;
}

/**
 * The stacked bar: the measured prompt split by the estimated share of each part, then
 * this turn's tool results (in the largest request of the turn, not kept afterwards).
 */
export function renderContextBar(view, budget) {
  const bar = clear($("#context-bar"));
  bar.className = "context-bar";
  const limit = budget ? budget.limit : view.settings.context_budget;
  const parts = (budget && budget.parts) || {};
  const estimated = Object.values(parts).reduce((a, b) => a + b, 0);
  const used = budget ? budget.used ?? estimated : 0;
  const results = budget && budget.peak && budget.used ? Math.max(0, budget.peak - budget.used) : 0;
  const share = limit ? (used + results) / limit : 0;
  if (share > 0.95) bar.classList.add("danger");
  else if (share > 0.8) bar.classList.add("warn");
  const scaled = (tokens) => (estimated ? Math.round((tokens / estimated) * used) : 0);
  const pieces = [...CONTEXT_PARTS.map(([name, label]) => [name, label, scaled(parts[name] || 0)]), ["results", "this turn's tool results (not kept)", results]];
  const track = el("div", { className: "context-track", tabindex: "0", role: "img", "aria-label": `Context: ${format.tokens(used + results)} of ${format.tokens(limit)} tokens` });
  const legend = el("div", { className: "context-legend" });
  for (const [name, label, tokens] of pieces) {
    if (!tokens) continue;
    const piece = el("div", { className: `context-part ${name}`, title: `${label}: ~${format.tokens(tokens)} tokens` });
    piece.style.width = `${Math.min(100, (tokens * 100) / limit)}%`;
    track.append(piece);
    legend.append(el("span", {}, el("span", { className: `legend-swatch context-part ${name}` }), `${label} ~${format.tokens(tokens)}`));
  }
  const label = el("div", { className: "context-label" });
  if (budget) {
    const measured = budget.used !== null && budget.used !== undefined;
    label.append(
      el("span", { className: "context-share", text: `context ${format.percent(used + results, limit)}% of ${format.tokens(limit)}` }),
      el("span", { text: measured ? `${used.toLocaleString()} tokens measured by the server${results ? `, ${results.toLocaleString()} more for this turn's tool results` : ""}` : `~${format.tokens(used)} estimated (the server reported no usage)` }),
    );
    // Ollama's default window says more than "capped": the prompt is cut silently, and
    // only the Ollama server's settings can raise it.
    if (budget.window_note) {
      label.append(el("span", { className: "window-note warning", role: "note", text: budget.window_note }));
    } else if (budget.window && budget.window < view.settings.context_budget) {
      label.append(el("span", { className: "window-note", text: `the server serves ${format.tokens(budget.window)} tokens: budget capped` }));
    }
  } else {
    label.append(el("span", { text: `context budget ${format.tokens(limit)} tokens · measured after the first answer` }));
  }
  bar.append(track, label, legend);
}

export function fillPicker(view) {
  clear(view.picker);
  const groups = [
    ["Configured", view.config.models.configured],
    ["Listed by the server", view.config.models.server],
    ["Added by you", view.config.models.added],
  ];
  for (const [label, models] of groups) {
    const unique = models.filter((m, i) => models.indexOf(m) === i);
    if (!unique.length) continue;
    view.picker.append(el("optgroup", { label }, unique.map((m) => el("option", { value: m, text: modelLabel(view, m) }))));
  }
  if (!view.picker.options.length) view.picker.append(el("option", { value: "", text: "no model: set MODELS or add one in Settings" }));
  selectModel(view, view.config.default_model);
}

function selectModel(view, model) {
  if (model && ![...view.picker.options].some((o) => o.value === model)) {
    view.picker.append(el("option", { value: model, text: modelLabel(view, model) }));
  }
  if (model) view.picker.value = model;
}

// ---- models whose server refused the web tools ------------------------------------------

function toolRefusal(view, model) {
  return view.config.tool_refusals.find((refusal) => refusal.model === model) || null;
}

function modelLabel(view, model) {
  return toolRefusal(view, model) ? `${model} · no tools` : model;
}

/** The picker's labels and the header's mark, after a refusal was learnt or forgotten. */
function renderToolRefusal(view) {
  for (const option of view.picker.options) if (option.value) option.textContent = modelLabel(view, option.value);
  const refusal = toolRefusal(view, view.picker.value);
  const mark = $("#no-tools");
  mark.hidden = $("#forget-tool-refusal").hidden = !refusal;
  $("#tools-pill").hidden = Boolean(refusal); // the conversation's tool settings do not apply
  if (refusal) mark.title = `This model's server refused the web tools on ${format.day(refusal.at)}: ${refusal.reason}. Its answers are written without searching until you try the tools again.`;
}

export function learnToolRefusal(view, refusal) {
  view.config.tool_refusals = [...view.config.tool_refusals.filter((r) => r.model !== refusal.model), refusal];
  renderToolRefusal(view);
}

export async function forgetToolRefusal(view) {
  const model = view.picker.value;
  try {
    await api(`/api/models/tool-refusals/${encodeURIComponent(model)}`, { method: "DELETE" });
  } catch (error) {
    // 404: already forgotten (another tab); anything else is worth saying.
    if (error.status !== 404) {
      view.flash(`The refusal was not forgotten: ${error.message}`);
      return;
    }
  }
  view.config.tool_refusals = view.config.tool_refusals.filter((r) => r.model !== model);
  renderToolRefusal(view);
}

export async function pickModel(view) {
  renderToolRefusal(view);
  if (!view.conversation) return;
  try {
    view.conversation = await api(`/api/conversations/${view.conversation.id}`, { method: "PATCH", body: { settings: { model: view.picker.value } } });
  } catch (error) {
    view.flash(`The model was not saved: ${error.message}`);
  }
}
