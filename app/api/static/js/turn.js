// One turn as the page lives it: the answer streams in, each event drawn as it comes, until
// the done, error or stopped event, or a failure of the page's own connection; then the
// ConversationView (conversation.js) settles the page (afterTurn). The turn runs on the
// service, not on this stream: a stream that breaks is taken up again after the last event
// it had (GET .../events?after=N), and a page opened on a running turn follows it too.

import { ApiError, ConnectionLost, streamTurn } from "./api.js";
import { $ } from "./dom.js";
import { compressionNotice } from "./compression.js";
import { keepDraft } from "./drafts.js";
import { AnswerView, notice } from "./message.js";
import { ResearchView } from "./research.js";
import { streams } from "./streams.js";
import { learnToolRefusal, renderContextBar, renderTotals } from "./topbar.js";

const RESUMES = 3; // a broken stream is taken up again this many times, a second apart
const RESUME_WAIT_MS = 1000;

/** One SSE turn. `bubble`/`message`: the user's message when this turn sent one. */
export async function runTurn(view, path, body, { bubble, message }) {
  const answer = new AnswerView();
  answer.model = body.model;
  answer.asked = { research: body.research !== undefined };
  view.messages.append(answer.node);
  await follow(view, answer, path, body, { bubble, message });
}

/** The shown conversation's turn, running with no stream of this page on it (after a
 * reload, or another tab's): from its first event, the answer so far and its trail, then
 * the rest as it comes. */
export async function reattach(view) {
  const id = view.conversation.id;
  const answer = new AnswerView();
  const last = view.conversation.messages[view.conversation.messages.length - 1];
  answer.model = last && last.role === "assistant" ? last.model : view.settings.model;
  await follow(view, answer, `/api/conversations/${encodeURIComponent(id)}/events?after=0`, null, {});
}

async function follow(view, answer, path, body, { bubble, message }) {
  const controller = new AbortController();
  const id = view.conversation.id;
  const reattached = body === null;
  streams.start(id, { controller, answer });
  if (reattached) view.render(); // the stored checkpoint gives way to the live answer
  view.setStreaming();
  if (view.shows(id)) renderTotals(view); // a first answer: said to be coming
  view.following = true;
  view.scrollDown();
  let ended = null;
  let events = 0;
  try {
    let last = 0;
    for (let resumes = 0; ; resumes++) {
      try {
        for await (const [eventId, event] of streamTurn(path, body, controller.signal)) {
          if (events++ === 0 && !reattached) view.hooks.changed(); // the message is in: the list shows the conversation
          if (eventId !== null) last = eventId;
          ended = apply(view, event, answer, id) || ended;
          // After the answer's own frame has rendered the new text (frames run in order).
          if (view.following && view.shows(id)) requestAnimationFrame(() => view.following && view.shows(id) && view.scrollDown());
        }
      } catch (error) {
        if (!(error instanceof ConnectionLost)) throw error;
      }
      if (ended || controller.signal.aborted || (reattached && !events)) break;
      if (!last || resumes >= RESUMES) throw new ConnectionLost("the stream ended before the answer did");
      await new Promise((resolve) => setTimeout(resolve, RESUME_WAIT_MS));
      [path, body] = [`/api/conversations/${encodeURIComponent(id)}/events?after=${last}`, null];
    }
    if (controller.signal.aborted) {
      answer.interrupt();
      ended = "interrupted";
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
  if (reattached && !events) {
    // Nothing was running after all: the page shows what the service kept.
    answer.node.remove();
    if (view.shows(id)) view.render();
    return;
  }
  answer.researching?.end();
  await view.afterTurn(answer, ended, id);
}

/** Apply one event to the answer; returns "done", "error" or "interrupted" when the turn ended. */
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
    case "research_plan":
      researchView(answer, id).plan(event, answer.body);
      return null;
    case "research":
      researchView(answer, id).step(event);
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
    case "stopped":
      answer.interrupt();
      return "interrupted";
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

/** The answer's plan card and progress line, made at its first research event. */
function researchView(answer, id) {
  if (!answer.researching) {
    answer.research = true; // its trail is the research's log
    answer.researching = new ResearchView(id);
    answer.body.before(answer.researching.progress);
  }
  return answer.researching;
}

/** The message left the conversation on the server: its bubble goes, its text returns to
 * the box, kept there with its failure across a reload (drafts.js). */
function restoreDraft(view, event, answer) {
  const bubble = answer.node.previousElementSibling;
  if (bubble && bubble.classList.contains("user")) bubble.remove();
  if (!view.input.value.trim()) {
    view.input.value = givenBack(answer, event.restore);
    keepDraft(view.draftId, view.input.value, event);
    view.grow();
  }
  view.input.focus();
}

/** A message's text as it returns to the box: a research's with its prefix, so that sent
 * again it is a research again (the switch went off when it was sent). */
function givenBack(answer, text) {
  return answer.asked?.research ? `/research ${text}` : text;
}

/** A failure of our own service or of the page's connection to it (no error event). */
function failLocally(view, error, answer, { bubble, message }) {
  if (error instanceof ApiError && message !== undefined) {
    // Refused before the turn started (409, 400...): nothing was kept, the text returns.
    bubble?.remove();
    answer.node.remove();
    view.input.value = givenBack(answer, message);
    keepDraft(view.draftId, view.input.value);
    view.grow();
    view.messages.append(notice(`Not sent: ${error.message}. Your text is in the box below.`, "warning"));
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
        view.input.value = givenBack(answer, message);
        await view.submit();
      }
    },
  });
}
