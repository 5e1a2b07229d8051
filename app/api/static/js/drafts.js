// The text left in each conversation's message box, and the failure that gave it back,
// kept in this browser's storage: a reload, a closed tab or a switch to another
// conversation loses neither. A conversation not yet made is "". Sent, a draft goes.
// In household mode each person's are kept under their name (kept.js).

import { keyOf } from "./kept.js";

const fallback = new Map(); // when the browser keeps no storage (a private window's quota)

/** Signing out: this person's drafts leave the browser. */
export function forgetDrafts() {
  fallback.clear();
  try {
    const mine = keyOf("draft:");
    const keys = Array.from({ length: localStorage.length }, (_, index) => localStorage.key(index));
    for (const key of keys) if (key.startsWith(mine)) localStorage.removeItem(key);
  } catch {
    // no storage: nothing was kept
  }
}

function read(id) {
  try {
    const raw = localStorage.getItem(keyOf(`draft:${id}`));
    return raw === null ? null : JSON.parse(raw);
  } catch {
    return fallback.get(id) || null;
  }
}

function write(id, value) {
  try {
    if (value) localStorage.setItem(keyOf(`draft:${id}`), JSON.stringify(value));
    else localStorage.removeItem(keyOf(`draft:${id}`));
  } catch {
    if (value) fallback.set(id, value);
    else fallback.delete(id);
  }
}

/** {text, failure}: the text of the box, and the error event whose message came back to
 * it (null when the text was only typed). */
export function draftOf(id) {
  const draft = read(id);
  return draft && typeof draft.text === "string" ? draft : null;
}

/** Keep `text` as the box's draft; `failure` when it came back from a failed turn. Typing
 * in a given-back text keeps its failure: the message is still not sent. */
export function keepDraft(id, text, failure = undefined) {
  if (!text.trim()) return write(id, null);
  const kept = failure === undefined ? (draftOf(id)?.failure ?? null) : failure;
  write(id, { text, failure: kept });
}

export function dropDraft(id) {
  write(id, null);
}
