// One turn as the page lives it: the answer streams in, each event drawn as it comes, until
// the done or error event, Stop, or a failure of the page's own connection; then the
// ConversationView (conversation.js) settles the page (afterTurn).

import { ApiError, ConnectionLost, streamTurn } from "./api.js";
import { $ } from "./dom.js";
import { compressionNotice } from "./compression.js";
import { keepDraft } from "./drafts.js";
import { AnswerView, notice } from "./message.js";
import { streams } from "./streams.js";
import { learnToolRefusal, renderContextBar, renderTotals } from "./topbar.js";

/** One SSE turn. `bubble`/`message`: the user's message when this turn sent one. */
export async function runTurn(view, path, body, { bubble, message }) {
  const controller = new AbortController();
  const answer = new AnswerView();
  answer.model = body.model;
  const id = view.conversation.id;
  view.messages.append(answer.node);
  streams.start(id, { controller, answer });
  view.setStreaming();
  view.following = true;
  view.scrollDown();
  let ended = null;
  try {
    let first = true;
    for await (const event of streamTurn(path, body, controller.signal)) {
      if (first) view.hooks.changed(); // the message is in: the list shows the conversation
      first = false;
      ended = apply(view, event, answer, id) || ended;
      // After the answer's own frame has rendered the new text (frames run in order).
      if (view.following && view.shows(id)) requestAnimationFrame(() => view.following && view.shows(id) && view.scrollDown());
    }
    if (controller.signal.aborted) {
      answer.interrupt();
      ended = "interrupted";
    } else if (!ended) {
      throw new ConnectionLost("the stream ended before the answer did");
    }
  } catch (error) {
    if (error.name === "AbortError" || controller.signal.aborted) {
      answer.interrupt();
      ended = "interrupted";
    } else {
      ended = "failed";
      if (view.shows(id)) failLocally(view, error, answer, { bubble, message });
      else if (error instanceof ApiError && message !== undefined) keepDraft(id, message);
      else answer.showError({ kind: "connection", message: error.message }, {});
    }
  } finally {
    streams.end(id, view.shows(id) && !$("#view-chat").hidden);
    view.setStreaming();
  }
  await view.afterTurn(answer, ended, id);
}

/** Apply one event to the answer; returns "done" or "error" when the turn ended. */
function apply(view, event, answer, id) {
  switch (event.type) {
    case "delta":
      answer.appendText(event.text);
      return null;
    case "reasoning":
      answer.addReasoning(event.text);
      return null;
    case "retry":
      answer.replaceStreamed(event.text, event.reasoning);
      return null;
    case "search":
    case "fetch":
      answer.addActivity(event);
      return null;
    case "search_wait":
      answer.waitForRate(event);
      return null;
    case "warning":
      answer.addWarning(event.message);
      if (event.tools_refused) learnToolRefusal(view, event.tools_refused);
      return null;
    case "compression":
      answer.node.before(compressionNotice(event));
      return null;
    case "error":
      view.turnError = event;
      answer.showError(event, view.errorActions(event));
      if (event.restore !== null && event.restore !== undefined) {
        answer.node.classList.add("given-back");
        if (view.shows(id)) restoreDraft(view, event, answer);
        else keepDraft(id, event.restore, event);
      }
      return "error";
    case "done":
      answer.finish(event);
      if (view.shows(id)) {
        view.conversation.totals = event.totals;
        view.conversation.budget = event.budget;
      }
      if (view.shows(id)) {
        renderTotals(view);
        renderContextBar(view, event.budget);
      }
      return "done";
    default:
      return null;
  }
}

/** The message left the conversation on the server: its bubble goes, its text returns to
 * the box, kept there with its failure across a reload (drafts.js). */
function restoreDraft(view, event, answer) {
  const bubble = answer.node.previousElementSibling;
  if (bubble && bubble.classList.contains("user")) bubble.remove();
  if (!view.input.value.trim()) {
    view.input.value = event.restore;
    keepDraft(view.draftId, event.restore, event);
    view.grow();
  }
  view.input.focus();
}

/** A failure of our own service or of the page's connection to it (no error event). */
function failLocally(view, error, answer, { bubble, message }) {
  if (error instanceof ApiError && message !== undefined) {
    // Refused before the turn started (409, 400...): nothing was kept, the text returns.
    bubble?.remove();
    answer.node.remove();
    view.input.value = message;
    keepDraft(view.draftId, message);
    view.grow();
    view.messages.append(notice(`Not sent: ${error.message}`, "warning"));
    return;
  }
  const kind = error instanceof ConnectionLost ? "connection" : "internal";
  answer.showError({ kind, message: error.message }, {
    // Whether the service kept the message is known only by asking it.
    retry: async () => {
      await view.reload();
      view.render();
      const messages = view.conversation.messages;
      const lastUser = messages.filter((m) => m.role === "user").pop();
      if (messages.length && messages[messages.length - 1].role === "user") await view.regenerate();
      else if (message !== undefined && (!lastUser || lastUser.content !== message)) {
        view.input.value = message;
        await view.submit();
      }
    },
  });
}
