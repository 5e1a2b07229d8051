// Answer versions and Edit in place. A regenerated or edited turn keeps what it replaced
// on the server as a version ("‹ 2/3 ›" under the turn); Edit opens a message of yours in
// its own bubble, and nothing changes on the server until Save (which sends it in the old
// one's place, the old question, its answer and every later turn staying as a version).

import { api } from "./api.js";
import { el } from "./dom.js";
import { userMessage } from "./message.js";
import { runTurn } from "./turn.js";

/** The "‹ 2/3 ›" control of every turn that has versions, as the conversation says. */
export function showVersions(view) {
  for (const old of view.messages.querySelectorAll(".versions")) old.remove();
  const conversation = view.conversation;
  for (const { bubble, message, position } of userTurns(view) || []) {
    const mark = message.versions;
    if (!mark || mark.count < 2) continue;
    // Folded into the summary: the model sees the summary, so no version can be shown instead.
    const locked = position < (conversation.summarized || 0);
    const control = versionControl(mark, locked, (index) => switchVersion(view, position, index));
    const end = turnEnd(bubble);
    const stats = end.querySelector(".answer-stats");
    if (stats) stats.prepend(control);
    else end.append(control);
  }
}

/**
 * Each shown bubble of yours with its stored message and position in the log, or null
 * when the screen is not the stored log (a turn mid-way).
 */
export function userTurns(view) {
  if (!view.conversation) return null;
  const users = view.conversation.messages.map((message, position) => ({ message, position })).filter(({ message }) => message.role === "user");
  const bubbles = [...view.messages.querySelectorAll(".message.user:not([hidden])")];
  if (bubbles.length !== users.length) return null;
  return users.map((user, i) => ({ ...user, bubble: bubbles[i] }));
}

/**
 * After a turn: the versions as the service now has them. A turn that failed before any
 * output gave back the version it had replaced (an edit, a regenerate), which the screen
 * no longer shows: the conversation is drawn again, the error card kept under it.
 */
export function settle(view, answer, ended) {
  const error = ended === "error" ? view.turnError : null;
  const users = view.conversation ? view.conversation.messages.filter((m) => m.role === "user").length : 0;
  const shown = view.messages.querySelectorAll(".message.user:not([hidden])").length;
  if (error && error.restore !== null && error.restore !== undefined && users > shown) {
    view.render();
    view.dropGivenBack(); // the card kept for a reload: this turn's own takes its place
    view.messages.append(answer.node);
    view.scrollDown();
  } else {
    showVersions(view);
  }
}

function versionControl(mark, locked, pick) {
  const button = (label, text, index) =>
    el("button", { type: "button", className: "quiet", text, "aria-label": label, disabled: locked || index < 1 || index > mark.count, on: { click: () => pick(index) } });
  return el(
    "div",
    { className: "versions", role: "group", "aria-label": "Versions of this turn", title: locked ? "This turn is folded into the summary: its other versions can no longer be shown." : null },
    button("Previous version", "‹", mark.index - 1),
    el("span", { className: "version-count", text: `${mark.index}/${mark.count}` }),
    button("Next version", "›", mark.index + 1),
  );
}

/** The last node of the turn that starts with this user bubble (its last answer). */
function turnEnd(bubble) {
  let end = bubble;
  for (let node = bubble.nextElementSibling; node && !node.classList.contains("user"); node = node.nextElementSibling) {
    if (node.classList.contains("assistant")) end = node;
  }
  return end;
}

async function switchVersion(view, position, index) {
  if (view.streaming || !view.conversation) return;
  try {
    view.conversation = await api(`/api/conversations/${view.conversation.id}/turns/${position}/version`, { method: "PUT", body: { index } });
  } catch (error) {
    view.flash(`Could not show that version: ${error.message}`);
    return;
  }
  const scroll = view.messages.scrollTop;
  view.render();
  view.messages.scrollTop = scroll; // the reader stays where the control was
  view.hooks.changed();
}

/** Edit a message of yours in its bubble (`node`, at `position` in the log): Save sends
 * it, Cancel (or Escape) puts it back. */
export function editInPlace(view, node, position) {
  if (view.streaming || !view.conversation || node.querySelector(".edit-box")) return;
  const text = node.querySelector(".bubble").textContent;
  const field = el("textarea", { className: "edit-input", "aria-label": "Edit your message", rows: "3" });
  field.value = text;
  const save = el("button", { type: "submit", className: "primary", text: "Save" });
  const cancel = el("button", { type: "button", text: "Cancel" });
  const box = el("form", { className: "edit-box" }, field, el("div", { className: "actions" }, cancel, save));
  const shown = [...node.children];
  const close = () => {
    box.remove();
    for (const child of shown) child.hidden = false;
  };
  const cancelled = () => {
    close();
    node.querySelector(".edit")?.focus();
  };
  const changed = () => (save.disabled = !field.value.trim());
  field.addEventListener("input", changed);
  field.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      event.preventDefault();
      event.stopPropagation();
      cancelled();
    } else if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      box.requestSubmit();
    }
  });
  cancel.addEventListener("click", cancelled);
  box.addEventListener("submit", (event) => {
    event.preventDefault();
    if (!field.value.trim() || view.streaming) return;
    close();
    resend(view, node, position, field.value);
  });
  for (const child of shown) child.hidden = true;
  node.append(box);
  field.focus();
  field.setSelectionRange(field.value.length, field.value.length);
}

/**
 * Send the edited text in the old message's place. The old turn stays on the page, hidden,
 * until the service says whether it became a version (the new turn started) or is still
 * the one shown (the edit was refused, or filtered, which gives the old turn back).
 */
async function resend(view, node, position, text) {
  const before = versionCount(view.conversation, position);
  const parked = [node];
  for (let next = node.nextElementSibling; next; next = next.nextElementSibling) parked.push(next);
  for (const old of parked) old.hidden = true;
  const bubble = userMessage(text);
  view.messages.append(bubble);
  await runTurn(view, `/api/conversations/${view.conversation.id}/edit`, { message: text, model: view.picker.value, position }, { bubble, message: text });
  // The edited turn is the last one now, whichever it was.
  const replaced = versionCount(view.conversation, lastUserPosition(view.conversation)) > before;
  for (const old of parked) {
    if (replaced) old.remove();
    else old.hidden = false;
  }
  showVersions(view);
}

/** How many versions the turn at `position` has (1: none set aside). */
function versionCount(conversation, position) {
  const message = conversation.messages[position];
  return message && message.role === "user" && message.versions ? message.versions.count : 1;
}

function lastUserPosition(conversation) {
  return conversation.messages.map((m) => m.role).lastIndexOf("user");
}
