// The Status panel: is everything connected? The doctor's checks, each with its fix in plain
// words. The page-load overview uses the free checks only; tool calling (a tiny request to
// the model server) runs when the panel opens; the Brave key's check runs one real search,
// a query of the user's Brave plan, so only on its own button.
import { api, ApiError } from "./api.js";
import { el, clear } from "./dom.js";

const PARTS = [
  ["searxng", "SearXNG", "Our own search server: the model's searches go through it."],
  ["engine", "Search engine", "The Brave Search API, which SearXNG asks for results: its plan (the rate, the month's queries left) and any engine SearXNG suspended, with until when."],
  ["model", "Model server", "The OpenAI-compatible server that runs the model."],
];
const STATE_LABEL = { ok: "ok", warning: "warning", fail: "failed", pending: "checking" };
const STATE_ICON = { ok: "✓", warning: "!", fail: "✕", pending: "…" };
const RANK = { ok: 0, warning: 1, fail: 2 };
/** Without these the chat cannot work at all: the page opens the Status view by itself. */
const BLOCKING = ["searxng_reachable", "model_reachable"];

let view = null; // the mounted panel: {root, groups, summary, again, error, braveList, braveButton}
let generation = 0; // a newer run makes an older one's answers stale
let braveCheck = null; // the last Brave key result, kept until the page reloads: each costs a query

/** {parts: {searxng, engine, model}, blocking, checks}: each part's worst state ("unknown"
 * when nothing of it could be checked), blocking when SearXNG or the model server is
 * unreachable. */
export function summarize(checks) {
  const parts = {};
  for (const [part] of PARTS) {
    const states = checks.filter((c) => c.part === part).map((c) => c.state);
    parts[part] = states.length ? states.reduce((a, b) => (RANK[b] > RANK[a] ? b : a)) : "unknown";
  }
  const blocking = checks.some((c) => BLOCKING.includes(c.id) && c.state === "fail");
  return { parts, blocking, checks };
}

/** The free checks (no search, nothing generated), for the page load and the sidebar dots. */
export async function overview() {
  try {
    const { checks } = await api("/api/status?quick=1");
    return summarize(checks);
  } catch (error) {
    const parts = Object.fromEntries(PARTS.map(([part]) => [part, "unknown"]));
    return { parts, blocking: false, checks: [], error: error.message };
  }
}

/** Render the panel into `root` and run the checks; each call re-runs them. */
export function mountStatus(root) {
  clear(root);
  const again = el("button", { type: "button", className: "primary", text: "Check again", on: { click: () => run() } });
  const summary = el("p", { className: "status-summary", role: "status", "aria-live": "polite" });
  const error = el("p", { className: "status-error", role: "alert", hidden: true });
  const braveList = el("ul", { className: "status-list status-brave-result" });
  const braveButton = el("button", { type: "button", className: "status-brave-button", text: "Check the Brave key", on: { click: checkBrave } });
  const groups = {};
  const sections = PARTS.map(([part, title, about]) => {
    const headingId = `status-part-${part}`;
    groups[part] = el("ul", { className: "status-list" });
    return el(
      "section",
      { className: "status-group", dataset: { part }, "aria-labelledby": headingId },
      el("h2", { id: headingId, text: title }),
      el("p", { className: "status-about", text: about }),
      groups[part],
      part === "engine" ? braveBox(braveList, braveButton) : null,
    );
  });
  view = { root, groups, summary, again, error, braveList, braveButton };
  root.append(
    el(
      "div",
      { className: "status-panel" },
      el(
        "header",
        { className: "status-head" },
        el("h1", { text: "Status: is everything connected?" }),
        el("p", {
          className: "status-intro",
          text:
            "Each part this service needs, checked now. A row that is not OK says how to fix it: " +
            "fix it, then press Check again. These checks send no search; the tool check asks " +
            "the model for a tiny answer, up to 8 tokens generated.",
        }),
      ),
      el("div", { className: "status-actions" }, again, summary),
      error,
      ...sections,
    ),
  );
  renderBrave();
  run();
}

function braveBox(list, button) {
  return el(
    "div",
    { className: "status-brave" },
    list,
    el(
      "div",
      { className: "status-brave-action" },
      button,
      el("p", {
        className: "status-brave-note",
        text: "Runs one real search through SearXNG: it spends one query of your Brave plan.",
      }),
    ),
  );
}

async function run() {
  const mine = ++generation;
  const current = view;
  current.again.disabled = true;
  current.error.hidden = true;
  current.summary.textContent = "Checking…";
  try {
    // The free checks first, shown at once; then all of them, tool calling included, which
    // waits for the model's tiny answer.
    const quick = await api("/api/status?quick=1");
    if (mine !== generation) return;
    const toolsPending = !quick.checks.some((c) => c.part === "model" && c.state === "fail");
    render(quick.checks, toolsPending);
    const full = await api("/api/status");
    if (mine !== generation) return;
    render(full.checks, false);
    current.summary.textContent = verdict(full.checks);
    current.root.dispatchEvent(new CustomEvent("status:checked", { bubbles: true, detail: summarize(full.checks) }));
  } catch (error) {
    if (mine !== generation) return;
    showError(current, error);
    current.summary.textContent = "";
  } finally {
    if (mine === generation) current.again.disabled = false;
  }
}

function render(checks, toolsPending) {
  for (const [part] of PARTS) {
    const rows = checks.filter((c) => c.part === part).map(row);
    if (part === "model" && toolsPending) {
      rows.push(
        row({
          id: "model_tools",
          name: "tool calling accepted",
          state: "pending",
          detail: "sending a tiny request to the model server…",
          fix: "",
        }),
      );
    }
    if (!rows.length) {
      const reason = part === "engine" ? "not checked: SearXNG did not answer" : "not checked";
      rows.push(el("li", { className: "status-row status-none", text: reason }));
    }
    view.groups[part].replaceChildren(...rows);
  }
}

function row(check) {
  const state = STATE_LABEL[check.state] ? check.state : "fail";
  return el(
    "li",
    { className: `status-row state-${state}`, tabindex: "0", dataset: { check: check.id, state } },
    el("span", { className: "status-icon", role: "img", "aria-label": STATE_LABEL[state], title: STATE_LABEL[state], text: STATE_ICON[state] }),
    el(
      "div",
      { className: "status-body" },
      el("div", { className: "status-name", text: check.name }),
      check.detail ? el("div", { className: "status-detail", text: check.detail }) : null,
      state !== "ok" && check.fix ? el("p", { className: "status-fix" }, el("strong", { text: "Fix: " }), check.fix) : null,
    ),
  );
}

function verdict(checks) {
  const failed = checks.filter((c) => c.state === "fail").length;
  const warned = checks.filter((c) => c.state === "warning").length;
  const time = new Date().toLocaleTimeString();
  if (!failed && !warned) return `Everything answers (checked at ${time}).`;
  const names = checks.filter((c) => c.state !== "ok").map((c) => c.name);
  const counts = [failed && `${failed} failed`, warned && `${warned} with a warning`].filter(Boolean);
  return `${counts.join(", ")}: ${names.join("; ")}. The fix is in each row below (checked at ${time}).`;
}

function showError(current, error) {
  const what = error instanceof ApiError ? `the service answered ${error.status}: ${error.message}` : error.message;
  current.error.textContent = `Could not run the checks (${what}).`;
  current.error.hidden = false;
}

function renderBrave() {
  view.braveList.replaceChildren(...(braveCheck ? [row(braveCheck)] : []));
}

async function checkBrave() {
  const current = view;
  const button = current.braveButton;
  button.disabled = true;
  button.textContent = "Checking the Brave key…";
  current.error.hidden = true;
  try {
    const { checks } = await api("/api/status/brave", { method: "POST" });
    braveCheck = checks[0];
    renderBrave();
  } catch (error) {
    showError(current, error);
  } finally {
    button.disabled = false;
    button.textContent = "Check the Brave key";
  }
}
