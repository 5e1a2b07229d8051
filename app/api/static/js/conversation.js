// The conversation view: header (model, tools, totals, context bar), the messages, the
// composer, and the turn as the page lives it (send, stream, Stop, Regenerate, Edit, retry).

import { api, ApiError, ConnectionLost, streamTurn, text as fetchText } from "./api.js";
import { $, el, clear } from "./dom.js";
import * as format from "./format.js";
import { bindCitations } from "./citations.js";
import { compressionNotice } from "./compression.js";
import { AnswerView, notice, userMessage } from "./message.js";
import { streams } from "./streams.js";
import { editInPlace, settle, showVersions } from "./versions.js";

const EXAMPLES = {
  pl: ["Jak skonfigurować nginx jako reverse proxy?", "Jakie są nowości w Pythonie 3.13?", "Ile kosztuje bilet miesięczny w Krakowie?"],
  fr: ["Comment configurer nginx en reverse proxy ?", "Quelles sont les nouveautés de Python 3.13 ?", "Quel temps fera-t-il à Lyon ce week-end ?"],
  de: ["Wie richte ich nginx als Reverse Proxy ein?", "Was ist neu in Python 3.13?", "Wann fährt der letzte Zug von Berlin nach Hamburg?"],
  es: ["¿Cómo configuro nginx como proxy inverso?", "¿Qué hay de nuevo en Python 3.13?", "¿Qué tiempo hará en Madrid este fin de semana?"],
  en: ["How do I set up nginx as a reverse proxy?", "What is new in Python 3.13?", "What are this week's top science stories?"],
};

const CONTEXT_PARTS = [
  ["persona", "persona and date"],
  ["memory", "memory"],
  ["summary", "summary"],
  ["tools", "tool note and declarations"],
  ["history", "history"],
  ["kept_sources", "earlier answers' sources (kept)"],
];
const FOLLOW_SLACK = 48; // px from the bottom that still counts as "at the bottom"

export class ConversationView {
  /**
   * hooks: {created(id), changed(), openStatus(), openSettings()} from main.js.
   */
  constructor(config, hooks) {
    this.config = config;
    this.hooks = hooks;
    this.conversation = null;
    this.drafts = new Map(); // conversation id ("" for a new one) -> the text left in its box
    this.following = true;
    this.messages = $("#messages");
    this.input = $("#composer-input");
    this.sendButton = $("#send");
    this.stopButton = $("#stop");
    this.picker = $("#model-picker");
    this.jump = $("#jump-latest");
    this.bind();
    this.fillPicker();
    bindCitations(this.messages);
    this.placeholder();
  }

  /** A phone's one-line box shows the short placeholder whole. */
  placeholder() {
    const narrow = window.matchMedia("(max-width: 720px)");
    const set = () => (this.input.placeholder = narrow.matches ? "Message…" : "Message… (Enter sends, Shift+Enter for a new line)");
    narrow.addEventListener("change", set);
    set();
  }

  bind() {
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
    this.input.addEventListener("input", () => this.grow());
    this.stopButton.addEventListener("click", () => this.stop());
    this.picker.addEventListener("change", () => this.pickModel());
    $("#forget-tool-refusal").addEventListener("click", () => this.forgetToolRefusal());
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
    const conversation = await api(`/api/conversations/${encodeURIComponent(id)}`);
    this.switchDraft(id);
    this.conversation = conversation;
    this.render();
    streams.seen(id);
  }

  draft() {
    this.switchDraft("");
    this.conversation = null;
    this.render();
    this.input.focus();
  }

  /** Each conversation keeps the text left in its box: it does not follow you elsewhere. */
  switchDraft(to) {
    const from = this.conversation ? this.conversation.id : "";
    if (from === to) return;
    if (this.input.value.trim()) this.drafts.set(from, this.input.value);
    else this.drafts.delete(from);
    this.input.value = this.drafts.get(to) || "";
    this.drafts.delete(to);
    this.grow();
  }

  async reload() {
    if (!this.conversation) return;
    this.conversation = await api(`/api/conversations/${encodeURIComponent(this.conversation.id)}`);
  }

  render() {
    clear(this.messages);
    this.renderHeader();
    this.setStreaming();
    const live = this.currentStream();
    let messages = this.conversation ? this.conversation.messages : [];
    // A turn streaming here: its answer is the live one, not the stored checkpoint.
    if (live) messages = messages.slice(0, messages.map((m) => m.role).lastIndexOf("user") + 1);
    if (!messages.length) {
      this.messages.append(this.emptyState());
      return;
    }
    const folded = this.conversation.summarized || 0;
    const lastUser = messages.map((m) => m.role).lastIndexOf("user");
    messages.forEach((message, index) => {
      if (index === folded && folded > 0) {
        this.messages.append(notice(`${folded} earlier message${folded === 1 ? "" : "s"} folded into a summary (the model sees the summary, not these).`));
      }
      if (message.role === "user") {
        this.messages.append(userMessage(message.content, { onEdit: index === lastUser ? () => this.editLast() : null }));
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
    showVersions(this);
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
      el("p", { text: `Searches go through your own SearXNG, in ${this.settings.search_locale === "all" ? "any language" : this.settings.search_locale}. Only the search terms leave your machine.` }),
      el(
        "div",
        { className: "examples" },
        examples.map((example) =>
          el("button", { type: "button", className: "example", text: example, on: { click: () => { this.input.value = example; this.submit(); } } }),
        ),
      ),
    );
  }

  renderHeader() {
    const settings = this.settings;
    if (this.conversation) this.selectModel(settings.model || this.config.default_model);
    const pill = $("#tools-pill");
    const search = settings.web_search && settings.search_max_uses > 0;
    const read = settings.web_fetch && settings.fetch_max_uses > 0;
    pill.textContent = search || read ? `web: ${[search ? `search ${settings.search_max_uses}` : "", read ? `read ${settings.fetch_max_uses}` : ""].filter(Boolean).join(" / ")}` : "web: off";
    pill.classList.toggle("off", !(search || read));
    pill.title = `Web tools per answer; the search locale is ${settings.search_locale}. Change them in Settings.`;
    this.renderToolRefusal();
    this.renderTotals();
    this.renderContextBar(this.conversation && this.conversation.budget);
    $("#export-conversation").disabled = !this.conversation;
    this.renderTitle();
  }

  renderTitle() {
    const title = this.conversation ? this.conversation.title : "New conversation";
    $("#conversation-title").textContent = title;
    $("#conversation-title").title = title;
  }

  renderTotals() {
    const box = $("#totals");
    const parts = this.totalsParts();
    box.textContent = parts.join(" · ");
    box.title = "Show the details";
    clear($("#totals-details")).append(...parts.map((part) => el("span", { text: part })));
  }

  /** The conversation's figures, those that are zero left out. */
  totalsParts() {
    const totals = this.conversation && this.conversation.totals;
    const turns = this.conversation ? this.conversation.messages.filter((m) => m.role === "assistant").length : 0;
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
      const unreported = totals.requests_unreported_cost ? ` +${totals.requests_unreported_cost} not reported` : "";
      parts.push(`${format.cost(totals.cost)}${unreported}`);
    }
    if (turns) parts.push(plural(turns, "turn", "turns"));
    if (totals.turns_unreported) parts.push(`+${plural(totals.turns_unreported, "attempt", "attempts")} with usage not reported`);
    return parts;
  }

  /**
   * The stacked bar: the measured prompt split by the estimated share of each part, then
   * this turn's tool results (in the largest request of the turn, not kept afterwards).
   */
  renderContextBar(budget) {
    const bar = clear($("#context-bar"));
    bar.className = "context-bar";
    const limit = budget ? budget.limit : this.settings.context_budget;
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
      } else if (budget.window && budget.window < this.settings.context_budget) {
        label.append(el("span", { className: "window-note", text: `the server serves ${format.tokens(budget.window)} tokens: budget capped` }));
      }
    } else {
      label.append(el("span", { text: `context budget ${format.tokens(limit)} tokens · measured after the first answer` }));
    }
    bar.append(track, label, legend);
  }

  fillPicker() {
    clear(this.picker);
    const groups = [
      ["Configured", this.config.models.configured],
      ["Listed by the server", this.config.models.server],
      ["Added by you", this.config.models.added],
    ];
    for (const [label, models] of groups) {
      const unique = models.filter((m, i) => models.indexOf(m) === i);
      if (!unique.length) continue;
      this.picker.append(el("optgroup", { label }, unique.map((m) => el("option", { value: m, text: this.modelLabel(m) }))));
    }
    if (!this.picker.options.length) this.picker.append(el("option", { value: "", text: "no model: set MODELS or add one in Settings" }));
    this.selectModel(this.config.default_model);
  }

  selectModel(model) {
    if (model && ![...this.picker.options].some((o) => o.value === model)) {
      this.picker.append(el("option", { value: model, text: this.modelLabel(model) }));
    }
    if (model) this.picker.value = model;
  }

  // ---- models whose server refused the web tools ------------------------------------------

  toolRefusal(model) {
    return this.config.tool_refusals.find((refusal) => refusal.model === model) || null;
  }

  modelLabel(model) {
    return this.toolRefusal(model) ? `${model} · no tools` : model;
  }

  /** The picker's labels and the header's mark, after a refusal was learnt or forgotten. */
  renderToolRefusal() {
    for (const option of this.picker.options) if (option.value) option.textContent = this.modelLabel(option.value);
    const refusal = this.toolRefusal(this.picker.value);
    const mark = $("#no-tools");
    mark.hidden = $("#forget-tool-refusal").hidden = !refusal;
    $("#tools-pill").hidden = Boolean(refusal); // the conversation's tool settings do not apply
    if (refusal) mark.title = `This model's server refused the web tools on ${format.day(refusal.at)}: ${refusal.reason}. Its answers are written without searching until you try the tools again.`;
  }

  learnToolRefusal(refusal) {
    this.config.tool_refusals = [...this.config.tool_refusals.filter((r) => r.model !== refusal.model), refusal];
    this.renderToolRefusal();
  }

  async forgetToolRefusal() {
    const model = this.picker.value;
    try {
      await api(`/api/models/tool-refusals/${encodeURIComponent(model)}`, { method: "DELETE" });
    } catch (error) {
      // 404: already forgotten (another tab); anything else is worth saying.
      if (error.status !== 404) {
        this.flash(`The refusal was not forgotten: ${error.message}`);
        return;
      }
    }
    this.config.tool_refusals = this.config.tool_refusals.filter((r) => r.model !== model);
    this.renderToolRefusal();
  }

  async pickModel() {
    this.renderToolRefusal();
    if (!this.conversation) return;
    try {
      this.conversation = await api(`/api/conversations/${this.conversation.id}`, { method: "PATCH", body: { settings: { model: this.picker.value } } });
    } catch (error) {
      this.flash(`The model was not saved: ${error.message}`);
    }
  }

  // ---- the turn --------------------------------------------------------------------------

  async submit() {
    const message = this.input.value;
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
      $("#export-conversation").disabled = false;
    }
    this.input.value = "";
    this.grow();
    this.removeEditButtons();
    this.dropGivenBack();
    const bubble = userMessage(message);
    this.messages.querySelector(".empty")?.remove();
    this.messages.append(bubble);
    await this.runTurn(`/api/conversations/${this.conversation.id}/chat`, { message, model: this.picker.value }, { bubble, message });
  }

  async regenerate() {
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
    await this.runTurn(`/api/conversations/${this.conversation.id}/regenerate`, { model: this.picker.value }, {});
  }

  /** In the message's own bubble: nothing changes on the server until Save. */
  editLast() {
    editInPlace(this);
  }

  stop() {
    const stream = this.currentStream();
    if (stream) stream.controller.abort();
  }

  /** Error cards of turns whose message came back to the box: sent again, they go. */
  dropGivenBack() {
    for (const node of this.messages.querySelectorAll(".message.assistant.given-back")) node.remove();
  }

  /** One SSE turn. `bubble`/`message`: the user's message when this turn sent one. */
  async runTurn(path, body, { bubble, message }) {
    const controller = new AbortController();
    const answer = new AnswerView();
    answer.model = body.model;
    const id = this.conversation.id;
    this.messages.append(answer.node);
    streams.start(id, { controller, answer });
    this.setStreaming();
    this.following = true;
    this.scrollDown();
    let ended = null;
    try {
      let first = true;
      for await (const event of streamTurn(path, body, controller.signal)) {
        if (first) this.hooks.changed(); // the message is in: the list shows the conversation
        first = false;
        ended = this.apply(event, answer, id) || ended;
        // After the answer's own frame has rendered the new text (frames run in order).
        if (this.following && this.shows(id)) requestAnimationFrame(() => this.following && this.shows(id) && this.scrollDown());
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
        if (this.shows(id)) this.failLocally(error, answer, { bubble, message });
        else if (error instanceof ApiError && message !== undefined) this.drafts.set(id, message);
        else answer.showError({ kind: "connection", message: error.message }, {});
      }
    } finally {
      streams.end(id, this.shows(id) && !$("#view-chat").hidden);
      this.setStreaming();
    }
    this.lastEvent = ended;
    await this.afterTurn(answer, ended, id);
  }

  /** Apply one event to the answer; returns "done" or "error" when the turn ended. */
  apply(event, answer, id) {
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
      case "warning":
        answer.addWarning(event.message);
        if (event.tools_refused) this.learnToolRefusal(event.tools_refused);
        return null;
      case "compression":
        answer.node.before(compressionNotice(event));
        return null;
      case "error":
        this.turnError = event;
        answer.showError(event, this.errorActions(event));
        if (event.restore !== null && event.restore !== undefined) {
          answer.node.classList.add("given-back");
          if (this.shows(id)) this.restoreDraft(event.restore, answer);
          else this.drafts.set(id, event.restore);
        }
        return "error";
      case "done":
        answer.finish(event);
        if (this.shows(id)) {
          this.conversation.totals = event.totals;
          this.conversation.budget = event.budget;
        }
        if (this.shows(id)) {
          this.renderTotals();
          this.renderContextBar(event.budget);
        }
        return "done";
      default:
        return null;
    }
  }

  errorActions(error) {
    const retry = () => (error.restore ? this.submit() : this.regenerate());
    return {
      retry,
      editAndResend: () => (error.restore ? this.input.focus() : this.editLast()),
      openStatus: () => this.hooks.openStatus(),
    };
  }

  /** The message left the conversation on the server: its bubble goes, its text returns. */
  restoreDraft(text, answer) {
    const bubble = answer.node.previousElementSibling;
    if (bubble && bubble.classList.contains("user")) bubble.remove();
    if (!this.input.value.trim()) {
      this.input.value = text;
      this.grow();
    }
    this.input.focus();
  }

  /** A failure of our own service or of the page's connection to it (no error event). */
  failLocally(error, answer, { bubble, message }) {
    if (error instanceof ApiError && message !== undefined) {
      // Refused before the turn started (409, 400...): nothing was kept, the text returns.
      bubble?.remove();
      answer.node.remove();
      this.input.value = message;
      this.grow();
      this.messages.append(notice(`Not sent: ${error.message}`, "warning"));
      return;
    }
    const kind = error instanceof ConnectionLost ? "connection" : "internal";
    answer.showError({ kind, message: error.message }, {
      // Whether the service kept the message is known only by asking it.
      retry: async () => {
        await this.reload();
        this.render();
        const messages = this.conversation.messages;
        const lastUser = messages.filter((m) => m.role === "user").pop();
        if (messages.length && messages[messages.length - 1].role === "user") await this.regenerate();
        else if (message !== undefined && (!lastUser || lastUser.content !== message)) {
          this.input.value = message;
          await this.submit();
        }
      },
    });
  }

  async afterTurn(answer, ended, id) {
    this.hooks.changed();
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
    this.renderHeader();
    settle(this, answer, ended);
    if (ended === "done" || ended === "interrupted") {
      this.lastAnswer = answer;
      this.offerRegenerate(answer);
      this.addEditButton();
      if (this.following) this.scrollDown(); // the answer's last line grew
    }
    // A count scripts and tests can wait on: this turn is over and the page settled.
    document.body.dataset.turnsEnded = String(Number(document.body.dataset.turnsEnded || 0) + 1);
  }

  offerRegenerate(answer) {
    if (!answer) return;
    for (const old of this.messages.querySelectorAll(".regenerate")) old.remove();
    answer.setAction(el("button", { type: "button", className: "quiet answer-action regenerate", text: "Regenerate", on: { click: () => this.regenerate() } }));
  }

  removeEditButtons() {
    for (const button of this.messages.querySelectorAll(".edit, .regenerate")) button.remove();
  }

  addEditButton() {
    const bubbles = this.messages.querySelectorAll(".message.user");
    const last = bubbles[bubbles.length - 1];
    if (!last || last.querySelector(".edit")) return;
    last.append(el("div", { className: "message-actions" }, el("button", { type: "button", className: "quiet edit", text: "Edit", on: { click: () => this.editLast() } })));
  }

  /** Send or Stop, for the conversation shown. */
  setStreaming() {
    const on = this.streaming;
    this.sendButton.hidden = on;
    this.stopButton.hidden = !on;
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
