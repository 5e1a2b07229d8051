// The conversation view: the messages, the composer, and the turn as the page lives it
// (send, Stop, Regenerate, Edit, retry). The stream of a turn is followed by turn.js, the
// top bar (model, tools, totals, context bar) drawn by topbar.js.

import { ANSWER_SECONDS, api, text as fetchText } from "./api.js";
import { $, el, clear } from "./dom.js";
import { bindCitations } from "./citations.js";
import { compressionNotice } from "./compression.js";
import { draftOf, dropDraft, keepDraft } from "./drafts.js";
import { AnswerView, notice, userMessage } from "./message.js";
import { streams } from "./streams.js";
import { fillPicker, forgetToolRefusal, pickModel, renderHeader } from "./topbar.js";
import { reattach, runTurn } from "./turn.js";
import { researchBody, researchOf, wireSwitch } from "./research.js";
import { editInPlace, settle, showVersions, userTurns } from "./versions.js";

const EXAMPLES = {
  pl: ["Jak skonfigurować nginx jako reverse proxy?", "Jakie są nowości w Pythonie 3.13?", "Ile kosztuje bilet miesięczny w Krakowie?"],
  fr: ["Comment configurer nginx en reverse proxy ?", "Quelles sont les nouveautés de Python 3.13 ?", "Quel temps fera-t-il à Lyon ce week-end ?"],
  de: ["Wie richte ich nginx als Reverse Proxy ein?", "Was ist neu in Python 3.13?", "Wann fährt der letzte Zug von Berlin nach Hamburg?"],
  es: ["¿Cómo configuro nginx como proxy inverso?", "¿Qué hay de nuevo en Python 3.13?", "¿Qué tiempo hará en Madrid este fin de semana?"],
  en: ["How do I set up nginx as a reverse proxy?", "What is new in Python 3.13?", "What are this week's top science stories?"],
};

const FOLLOW_SLACK = 48; // px from the bottom that still counts as "at the bottom"

export class ConversationView {
  /**
   * hooks: {created(id), changed(), turnEnded(ended), openStatus(), openSettings()} from
   * main.js.
   */
  constructor(config, hooks) {
    this.config = config;
    this.hooks = hooks;
    this.conversation = null;
    this.following = true;
    this.messages = $("#messages");
    this.input = $("#composer-input");
    this.sendButton = $("#send");
    this.stopButton = $("#stop");
    this.hint = $("#composer-hint");
    this.picker = $("#model-picker");
    this.jump = $("#jump-latest");
    this.bind();
    fillPicker(this);
    bindCitations(this.messages);
    this.placeholder();
  }

  /** A phone's one-line box shows the short placeholder whole. */
  placeholder() {
    const narrow = window.matchMedia("(max-width: 720px)");
    const set = () => {
      const research = $("#research-switch").getAttribute("aria-pressed") === "true";
      if (research) this.input.placeholder = narrow.matches ? "Research…" : "A question to research… (Enter shows the plan)";
      else this.input.placeholder = narrow.matches ? "Message…" : "Message… (Enter sends, Shift+Enter for a new line)";
    };
    narrow.addEventListener("change", set);
    $("#research-switch").addEventListener("click", set);
    set();
    this.placeholderFollows = set;
  }

  /** The switch is for one send: a research costs up to a dozen searches, so the next
   * message is not one unless asked again (a reload shows it off too). */
  researchSwitchOff() {
    $("#research-switch").setAttribute("aria-pressed", "false");
    this.placeholderFollows();
  }

  bind() {
    wireSwitch();
    $("#composer").addEventListener("submit", (event) => {
      event.preventDefault();
      this.submit();
    });
    this.input.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        this.submit();
      }
    });
    this.input.addEventListener("input", () => {
      this.grow();
      keepDraft(this.draftId, this.input.value);
    });
    this.stopButton.addEventListener("click", () => this.stop());
    this.picker.addEventListener("change", () => pickModel(this));
    $("#forget-tool-refusal").addEventListener("click", () => forgetToolRefusal(this));
    this.messages.addEventListener("scroll", () => {
      this.following = this.atBottom();
      this.jump.hidden = this.following;
    });
    this.jump.addEventListener("click", () => {
      this.following = true;
      this.scrollDown();
    });
    $("#export-conversation").addEventListener("click", () => this.exportMarkdown());
    $("#totals").addEventListener("click", () => {
      const box = $("#totals");
      box.classList.toggle("clipped", box.scrollWidth > box.clientWidth); // then the figures repeat whole
      const open = $(".topbar").classList.toggle("expanded");
      $("#totals").setAttribute("aria-expanded", String(open));
    });
    $("#conversation-settings").addEventListener("click", () => this.hooks.openSettings("conversation"));
  }

  get streaming() {
    return Boolean(this.currentStream()) || Boolean(this.starting);
  }

  /** The stream of the conversation shown, if it is answering. */
  currentStream() {
    return streams.get(this.conversation && this.conversation.id);
  }

  shows(id) {
    return Boolean(this.conversation) && this.conversation.id === id;
  }

  /** Settings in force: the conversation's, or the defaults for a conversation not yet made. */
  get settings() {
    return this.conversation ? this.conversation.settings : { ...this.config.defaults, model: this.picker.value || this.config.defaults.model };
  }

  // ---- opening and rendering -------------------------------------------------------------

  async open(id) {
    if (this.conversation && this.conversation.id === id && this.messages.childNodes.length) {
      streams.seen(id); // back from the lab or Status to an answer that came meanwhile
      return;
    }
    const conversation = await api(`/api/conversations/${encodeURIComponent(id)}`, { timeout: ANSWER_SECONDS });
    this.switchDraft(id);
    this.conversation = conversation;
    this.render();
    streams.seen(id);
    // Its turn runs on the service with no stream of this page on it (a reload, another
    // tab): follow it from its first event, the answer so far then the rest.
    if (streams.unfollowed(id)) reattach(this);
  }

  draft() {
    this.switchDraft("");
    this.conversation = null;
    this.render();
    this.input.focus();
  }

  /** The key of the box's draft (drafts.js): the conversation shown, "" for a new one. */
  get draftId() {
    return this.conversation ? this.conversation.id : "";
  }

  /** Each conversation keeps the text left in its box: it does not follow you elsewhere. */
  switchDraft(to) {
    if (this.draftId !== to) keepDraft(this.draftId, this.input.value);
    else if (this.input.value) return; // the box holds this conversation's text already
    this.input.value = draftOf(to)?.text || "";
    this.grow();
  }

  /** A message given back by a failed turn, in the box since: its card, as it was. */
  givenBackCard() {
    const failure = this.conversation && draftOf(this.conversation.id)?.failure;
    if (!failure || this.currentStream()) return false;
    const card = new AnswerView();
    card.showError(failure, this.errorActions(failure));
    card.node.classList.add("given-back");
    this.messages.append(card.node);
    return true;
  }

  async reload() {
    if (!this.conversation) return;
    this.conversation = await api(`/api/conversations/${encodeURIComponent(this.conversation.id)}`);
  }

  render() {
    clear(this.messages);
    renderHeader(this);
    this.setStreaming();
    const live = this.currentStream();
    let messages = this.conversation ? this.conversation.messages : [];
    // A turn streaming here: its answer is the live one, not the stored checkpoint.
    if (live) messages = messages.slice(0, messages.map((m) => m.role).lastIndexOf("user") + 1);
    if (!messages.length) {
      if (!this.givenBackCard()) this.messages.append(this.emptyState());
      return;
    }
    const folded = this.conversation.summarized || 0;
    messages.forEach((message, index) => {
      if (index === folded && folded > 0) {
        this.messages.append(notice(`${folded} earlier message${folded === 1 ? "" : "s"} folded into a summary (the model sees the summary, not these).`));
      }
      if (message.role === "user") {
        this.messages.append(userMessage(message.content));
      } else if (message.role === "assistant") {
        for (const record of message.compressions || []) this.messages.append(compressionNotice(record, { stored: true }));
        const view = AnswerView.stored(message);
        // The last failure keeps its way out after a reload, as it had when it happened.
        if (message.error && index === messages.length - 1) view.showError(message.error, this.errorActions({ ...message.error, restore: null }));
        this.messages.append(view.node);
        this.lastAnswer = view;
      }
    });
    if (live) this.messages.append(live.answer.node);
    else if (messages[messages.length - 1].role === "assistant") this.offerRegenerate(this.lastAnswer);
    else this.messages.append(this.unansweredNotice());
    this.givenBackCard();
    showVersions(this);
    if (!live) this.addEditButtons();
    this.following = true;
    this.scrollDown();
  }

  unansweredNotice() {
    const box = notice("This message has no answer yet. ");
    box.append(el("button", { type: "button", className: "quiet", text: "Answer it", on: { click: () => this.regenerate() } }));
    return box;
  }

  emptyState() {
    const language = (this.settings.search_locale || "en").split("-")[0];
    const examples = EXAMPLES[language] || EXAMPLES.en;
    return el(
      "div",
      { className: "empty" },
      el("h2", { text: "Ask anything; the answer can search the web" }),
      el(
        "p",
        {},
        "Searches go through your own SearXNG, in ",
        // One word: "pl-PL" broken at its hyphen on a phone read as two.
        el("span", { className: "nowrap", text: this.settings.search_locale === "all" ? "any language" : this.settings.search_locale }),
        ". Only the search terms leave your machine.",
      ),
      el(
        "div",
        { className: "examples" },
        examples.map((example) =>
          el("button", { type: "button", className: "example", text: example, on: { click: () => { this.input.value = example; this.submit(); } } }),
        ),
      ),
    );
  }

  // ---- the turn --------------------------------------------------------------------------

  async submit() {
    const { message, research } = researchOf(this.input.value);
    const typedIn = this.draftId;
    if (this.streaming && message.trim()) {
      // Said, not silently ignored: one answer at a time in a conversation.
      this.hint.textContent = "An answer is still coming: send this once it ends, or press Stop (Esc). Your text stays here.";
      this.hint.hidden = false;
      return;
    }
    if (this.streaming || !message.trim()) return;
    if (!this.conversation) {
      this.starting = true; // no second send while the conversation is being made
      try {
        this.conversation = await api("/api/conversations", { method: "POST", body: { settings: { model: this.picker.value } } });
      } catch (error) {
        this.flash(`Could not start a conversation: ${error.message}`);
        return;
      } finally {
        this.starting = false;
      }
      this.messages.replaceChildren();
      this.hooks.created(this.conversation.id);
    }
    if (research) this.researchSwitchOff();
    this.input.value = "";
    dropDraft(typedIn); // "" when a new conversation's text became this one's message
    dropDraft(this.conversation.id);
    this.grow();
    this.removeEditButtons();
    this.dropGivenBack();
    const bubble = userMessage(message);
    this.messages.querySelector(".empty")?.remove();
    this.messages.append(bubble);
    await runTurn(this, `/api/conversations/${this.conversation.id}/chat`, { message, model: this.picker.value, research }, { bubble, message });
  }

  /** A new version of the last answer; `write`: the report of a stopped research, written
   * from what it had found. */
  async regenerate({ write = false } = {}) {
    if (this.streaming || !this.conversation) return;
    this.dropGivenBack();
    const messages = this.conversation.messages;
    // The answers after the last user message go; a new one takes their place.
    let node = this.messages.lastElementChild;
    while (node && !node.classList.contains("user")) {
      const previous = node.previousElementSibling;
      node.remove();
      node = previous;
    }
    if (!messages.length) return;
    const last = messages[messages.length - 1];
    const base = `/api/conversations/${this.conversation.id}`;
    if (write) {
      await runTurn(this, `${base}/research/write`, { model: this.picker.value }, {});
      return;
    }
    // A research's report is researched again (the earlier one stays as a version).
    const research = last.role === "assistant" && last.research ? researchBody() : undefined;
    await runTurn(this, `${base}/regenerate`, { model: this.picker.value, research }, {});
  }

  /** The last message of yours, in its own bubble: nothing changes on the server until Save. */
  editLast() {
    const turns = userTurns(this);
    const last = turns && turns[turns.length - 1];
    if (last) editInPlace(this, last.bubble, last.position);
  }

  /** Stop is a request of its own: the stream then ends with the turn's "stopped". */
  async stop() {
    const stream = this.currentStream();
    if (!stream || stream.stopping) return;
    stream.stopping = true;
    try {
      await api(`/api/conversations/${encodeURIComponent(this.conversation.id)}/stop`, { method: "POST" });
    } catch {
      stream.controller.abort(); // the service is out of reach: at least this page stops
    }
  }

  /** Error cards of turns whose message came back to the box: sent again, they go. */
  dropGivenBack() {
    for (const node of this.messages.querySelectorAll(".message.assistant.given-back")) node.remove();
  }

  errorActions(error) {
    const retry = () => (error.restore ? this.submit() : this.regenerate());
    return {
      retry,
      editAndResend: () => (error.restore ? this.input.focus() : this.editLast()),
      openStatus: () => this.hooks.openStatus(),
    };
  }

  /** After runTurn (turn.js): the page as the service now has the conversation. */
  async afterTurn(answer, ended, id) {
    this.hooks.changed();
    this.hooks.turnEnded(ended);
    if (!this.shows(id)) {
      // Its conversation is not on screen: opening it reads what the service kept.
      document.body.dataset.turnsEnded = String(Number(document.body.dataset.turnsEnded || 0) + 1);
      return;
    }
    try {
      await this.reload();
    } catch {
      // the service is gone; the error card already says so
    }
    renderHeader(this);
    settle(this, answer, ended);
    this.addEditButtons();
    if (ended === "done" || ended === "interrupted") {
      this.lastAnswer = answer;
      this.offerRegenerate(answer);
      if (this.following) this.scrollDown(); // the answer's last line grew
    }
    // A count scripts and tests can wait on: this turn is over and the page settled.
    document.body.dataset.turnsEnded = String(Number(document.body.dataset.turnsEnded || 0) + 1);
  }

  offerRegenerate(answer) {
    if (!answer) return;
    for (const old of this.messages.querySelectorAll(".regenerate")) old.remove();
    answer.setAction(el("button", { type: "button", className: "quiet answer-action regenerate", text: "Regenerate", on: { click: () => this.regenerate() } }));
    const messages = this.conversation?.messages || [];
    const last = messages[messages.length - 1];
    if (last && last.role === "assistant" && last.research?.found) {
      const write = el("button", { type: "button", className: "answer-action regenerate write-found", text: "Write the report from what was found", on: { click: () => this.regenerate({ write: true }) } });
      answer.stats.prepend(write);
    }
  }

  removeEditButtons() {
    for (const button of this.messages.querySelectorAll(".edit, .regenerate")) button.remove();
  }

  /** Edit on each message of yours the model still reads (not folded into the summary):
   * Save sends the new text in its place, and that turn with every later one becomes a
   * version of it. */
  addEditButtons() {
    const folded = this.conversation ? this.conversation.summarized || 0 : 0;
    for (const { bubble, position } of userTurns(this) || []) {
      if (position < folded || bubble.querySelector(".edit")) continue;
      let actions = bubble.querySelector(".message-actions");
      if (!actions) bubble.append((actions = el("div", { className: "message-actions" })));
      const label = `Edit your message: ${bubble.querySelector(".bubble").textContent.slice(0, 60)}`;
      actions.append(el("button", { type: "button", className: "quiet edit", text: "Edit", "aria-label": label, on: { click: () => editInPlace(this, bubble, position) } }));
    }
  }

  /** Send or Stop, for the conversation shown. */
  setStreaming() {
    const on = this.streaming;
    this.sendButton.hidden = on;
    this.stopButton.hidden = !on;
    if (!on) this.hint.hidden = true;
    if (!on && document.activeElement === document.body) this.input.focus();
  }

  flash(text) {
    this.messages.append(notice(text, "warning"));
    this.scrollDown();
  }

  // ---- small things ----------------------------------------------------------------------

  grow() {
    this.input.style.height = "auto";
    this.input.style.height = `${Math.min(this.input.scrollHeight + 2, window.innerHeight / 3)}px`;
  }

  atBottom() {
    const m = this.messages;
    return m.scrollHeight - m.scrollTop - m.clientHeight < FOLLOW_SLACK;
  }

  scrollDown() {
    this.messages.scrollTop = this.messages.scrollHeight;
    this.jump.hidden = true;
  }

  async exportMarkdown() {
    if (!this.conversation) return;
    const body = await fetchText(`/api/conversations/${this.conversation.id}/export`);
    const url = URL.createObjectURL(new Blob([body], { type: "text/markdown" }));
    const link = el("a", { href: url, download: fileName(this.conversation), hidden: true });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  }
}

/** The export's file name: the title's words, else the id. */
function fileName(conversation) {
  const words = conversation.title.match(/[\p{L}\p{N}]+/gu) || [];
  const stem = words.join("-").slice(0, 80).replace(/-+$/, "");
  return `${stem || `conversation-${conversation.id}`}.md`;
}
