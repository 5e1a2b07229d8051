// A compression's notice: how many messages went into the summary, and each fact it saved
// to memory.md with Keep and Undo. Memory sits in every conversation's system prompt, so
// what the summary model proposed is shown where it happened, kept by default, and one
// click takes it out again (Settings' memory editor shows the same file).

import { api } from "./api.js";
import { el } from "./dom.js";

const plural = (count, word) => `${count} ${word}${count === 1 ? "" : "s"}`;

/** The notice for a compression event (live) or a stored record of one (`stored`). */
export function compressionNotice(event, { stored = false } = {}) {
  const saved = event.facts_added || [];
  const refused = event.facts_refused || [];
  const facts = saved.length ? `, ${plural(saved.length, "fact")} saved to memory` : "";
  const box = el("div", { className: "notice compression", role: "status" });
  box.append(el("p", { text: `${plural(event.messages, "message")} folded into a summary${facts}.` }));
  if (saved.length) {
    const rows = saved.map(factRow);
    box.append(el("ul", { className: "facts" }, rows.map((row) => row.node)));
    // A stored notice may be older than an Undo or an edit in Settings: memory.md says.
    if (stored) syncWithMemory(rows);
  }
  if (refused.length) box.append(refusedList(refused));
  return box;
}

function refusedList(refused) {
  return el(
    "details",
    { className: "facts-refused" },
    el("summary", { text: `${plural(refused.length, "proposed fact")} not saved` }),
    el("ul", {}, refused.map((item) => el("li", {}, el("span", { className: "fact-text", text: item.fact }), ` — ${item.reason}`))),
  );
}

/** One saved fact: its text, Keep and Undo (one pressed: where it stands), what happened. */
function factRow(fact) {
  // Named with their fact: a screen reader meets many Keep and Undo buttons in a row.
  const keep = el("button", { type: "button", className: "quiet fact-keep", text: "Keep", "aria-label": `Keep in memory: ${fact}` });
  const undo = el("button", { type: "button", className: "quiet fact-undo", text: "Undo", "aria-label": `Remove from memory: ${fact}` });
  const state = el("span", { className: "fact-state", "aria-live": "polite" });
  const node = el("li", { className: "fact" }, el("span", { className: "fact-text", text: fact }), keep, undo, state);
  const row = {
    fact,
    node,
    show(kept, words) {
      node.dataset.state = kept ? "kept" : "undone";
      keep.setAttribute("aria-pressed", String(kept));
      undo.setAttribute("aria-pressed", String(!kept));
      keep.disabled = kept;
      undo.disabled = !kept;
      state.textContent = words;
    },
  };
  row.show(true, "in memory");
  const act = async (path, kept, words) => {
    keep.disabled = undo.disabled = true;
    try {
      await api(path, { method: "POST", body: { fact } });
      row.show(kept, words);
    } catch (error) {
      // Undo of a fact no longer there (edited in Settings) leaves it out all the same.
      if (!kept && error.status === 404) row.show(false, "no longer in memory");
      else row.show(!kept, `not changed: ${error.message}`);
    }
  };
  keep.addEventListener("click", () => act("/api/memory/facts", true, "in memory"));
  undo.addEventListener("click", () => act("/api/memory/facts/remove", false, "removed from memory"));
  return row;
}

async function syncWithMemory(rows) {
  let text;
  try {
    text = (await api("/api/memory")).text;
  } catch {
    return; // unreadable memory: the default state stands, and Settings says why
  }
  const lines = new Set(text.split("\n").map((line) => line.trim().replace(/^[-*\s]+/, "").trim()));
  for (const row of rows) if (!lines.has(row.fact)) row.show(false, "not in memory");
}
