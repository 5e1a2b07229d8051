// The Settings dialog: this conversation's settings, the global ones (models, memory), and
// in household mode the person's account (account.js).
// Each field carries the API's help (what a change costs); a refused value keeps the field
// open with the server's message under it.

import { renderAccount } from "./account.js";
import { api } from "./api.js";
import { BOUNDS, keepPlanPause, keepResearchBudget, planPause, researchBudget } from "./research.js";
import { $, el, clear } from "./dom.js";
import { COMMON_LOCALES } from "./lab.js";
import { exportSection, renderPeople } from "./people.js";

const FIELDS = [
  ["system_prompt", "System prompt", "textarea"],
  ["context_budget", "Context budget (tokens)", "number"],
  ["web_search", "Web search", "checkbox"],
  ["search_max_uses", "Searches per answer", "number"],
  ["web_fetch", "Read pages", "checkbox"],
  ["fetch_max_uses", "Pages per answer", "number"],
  ["search_locale", "Search locale", "text"],
  ["search_engines", "Search engines", "text"],
  ["tool_note", "Tool note", "textarea"],
  ["compress_prompt", "Compression prompt", "textarea"],
];
const GLOBAL_HELP = {
  models: "Model ids you add appear in the picker under “Added by you”. Nothing is downloaded: the model server must serve the id.",
  searchCache: "A search made again within SEARCH_CACHE_TTL (a Regenerate, the same question elsewhere, the lab) is answered from chat.db and spends no Brave query; the trail says “from cache”. Emptied, every search asks Brave again. In a household, only your own searches are emptied.",
  memory: "memory.md: durable facts every conversation sees (one “- fact” per line). Compression adds facts here; every line costs tokens in each request.",
};

export class SettingsDialog {
  /** hooks: {conversation() -> current or null, saved(conversation), modelsChanged(models)} */
  constructor(config, hooks) {
    this.config = config;
    this.hooks = hooks;
    this.dialog = $("#settings-dialog");
    this.learnSession();
    this.dialog.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && this.dialog.querySelector(".help-text:not([hidden])")) {
        event.preventDefault(); // Escape closes the open tip first, then the dialog
        event.stopPropagation();
        closeTips(this.dialog);
      }
    });
  }

  open(tab = "conversation") {
    this.tab = tab;
    this.render();
    if (!this.dialog.open) this.dialog.showModal();
    // On the tab shown: the dialog's first control is the other tab, and a tab chosen with
    // Enter is drawn anew, which left the focus nowhere.
    this.dialog.querySelector('[role="tab"][aria-selected="true"]').focus();
  }

  close() {
    this.dialog.close();
  }

  /** Household mode adds Account, and People for an admin: asked once, from the session.
   * An open dialog gains the tabs at once; its body (a field being typed in) is left be. */
  learnSession() {
    this.household = false;
    this.admin = false;
    this.password = false;
    if (!this.config.auth) return;
    api("/api/session").then((session) => {
      this.household = Boolean(session.household);
      this.admin = Boolean(session.admin);
      this.password = Boolean(session.password);
      const tabs = this.dialog.open && this.dialog.querySelector(".tabs");
      if (tabs) tabs.replaceChildren(...this.tabButtons());
    }, () => {});
  }

  tabButtons() {
    const names = [["conversation", "This conversation"], ["global", "Global"]];
    if (this.household) names.push(["account", "Account"]);
    if (this.admin) names.push(["people", "People"]);
    return names.map(([name, label]) => this.tabButton(name, label));
  }

  tabButton(name, label) {
    return el("button", { type: "button", role: "tab", "aria-selected": String(this.tab === name), text: label, on: { click: () => this.open(name) } });
  }

  render() {
    const tabs = el("div", { className: "tabs", role: "tablist" }, ...this.tabButtons());
    const head = el("div", { className: "settings-head" }, el("h2", { text: "Settings" }), tabs, el("button", { type: "button", className: "icon", "aria-label": "Close settings", text: "×", on: { click: () => this.close() } }));
    const body = el("div", { className: "settings-body", role: "tabpanel" });
    clear(this.dialog).append(head, body);
    if (this.tab === "global") this.renderGlobal(body);
    else if (this.tab === "people" && this.admin) renderPeople(body);
    else if (this.tab === "account" && this.household) renderAccount(body, { password: this.password });
    else this.renderConversation(body);
  }

  // ---- this conversation -----------------------------------------------------------------

  renderConversation(body) {
    const conversation = this.hooks.conversation();
    const current = conversation ? conversation.settings : this.config.defaults;
    const form = el("form", { className: "conversation-settings", novalidate: true });
    this.inputs = {};
    form.append(el("p", { className: "field-help", text: conversation ? `For “${conversation.title}”.` : "For the next conversation you start (saving creates it)." }));
    form.append(this.presetField());
    const row = [];
    for (const [name, label, kind] of FIELDS) {
      const field = this.field(name, label, kind, current[name]);
      if (["search_max_uses", "fetch_max_uses", "web_search", "web_fetch"].includes(name)) row.push(field);
      else {
        if (row.length) form.append(el("div", { className: "field-row" }, row.splice(0)));
        form.append(field);
      }
    }
    this.formError = el("p", { className: "field-error", role: "alert" });
    this.savedNote = el("span", { className: "saved", role: "status" });
    // Cancel until saved; then nothing is left to cancel: Close.
    this.closeButton = el("button", { type: "button", className: "quiet", text: "Cancel", on: { click: () => this.close() } });
    form.addEventListener("input", () => (this.closeButton.textContent = "Cancel"));
    const foot = el("div", { className: "settings-foot" }, el("button", { type: "submit", className: "primary", text: "Save" }), this.closeButton, this.savedNote);
    form.append(this.formError, foot);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.saveConversation(current);
    });
    body.append(form);
  }

  presetField() {
    const select = el("select", { id: "setting-preset", "aria-label": "Preset" }, el("option", { value: "", text: "Apply a preset…" }));
    for (const name of Object.keys(this.config.presets)) select.append(el("option", { value: name, text: name }));
    select.addEventListener("change", () => {
      if (select.value) this.inputs.system_prompt.value = this.config.presets[select.value];
      select.value = "";
    });
    return el("div", { className: "field" }, el("label", { className: "field-label", for: "setting-preset", text: "Presets" }), select);
  }

  field(name, label, kind, value) {
    const id = `setting-${name}`;
    let input;
    if (kind === "textarea") input = el("textarea", { id, rows: name === "system_prompt" ? 5 : 4 });
    else input = el("input", { id, type: kind, ...(kind === "number" ? { min: "0", step: "1" } : {}) });
    // The locale: picked from the lab's list, or typed (any locale SearXNG knows).
    if (name === "search_locale") input.setAttribute("list", "setting-locale-list");
    if (kind === "checkbox") input.checked = Boolean(value);
    else input.value = value ?? "";
    input.dataset.kind = kind;
    this.inputs[name] = input;
    const error = el("p", { className: "field-error", id: `${id}-error`, role: "alert" });
    input.setAttribute("aria-describedby", `${id}-error`);
    const list = name === "search_locale" ? el("datalist", { id: "setting-locale-list" }, COMMON_LOCALES.map((value) => el("option", { value }))) : null;
    return el("div", { className: "field", dataset: { name } }, el("div", { className: "field-label" }, el("label", { for: id, text: label }), helpTip(this.config.help[name] || "")), input, list, error);
  }

  read(name) {
    const input = this.inputs[name];
    if (input.dataset.kind === "checkbox") return input.checked;
    if (input.dataset.kind === "number") return input.value.trim() === "" ? null : Number(input.value);
    return input.value;
  }

  async saveConversation(current) {
    this.clearErrors();
    const changed = {};
    for (const [name] of FIELDS) {
      const value = this.read(name);
      if (value !== current[name]) changed[name] = value;
    }
    const conversation = this.hooks.conversation();
    try {
      const saved = conversation
        ? await api(`/api/conversations/${conversation.id}`, { method: "PATCH", body: { settings: changed } })
        : await api("/api/conversations", { method: "POST", body: { settings: changed } });
      this.hooks.saved(saved);
      this.render();
      this.closeButton.textContent = "Close";
      this.savedNote.textContent = Object.keys(changed).length ? `Saved ${Object.keys(changed).length} change${Object.keys(changed).length === 1 ? "" : "s"}.` : "Nothing changed.";
    } catch (error) {
      this.showRefusal(error.message, Object.keys(changed));
    }
  }

  /** The server names the refused setting in its message: show it under that field. */
  showRefusal(message, names) {
    const name = names.find((n) => message.includes(n)) || FIELDS.map(([n]) => n).find((n) => message.includes(n));
    const field = name && this.dialog.querySelector(`.field[data-name="${name}"]`);
    if (!field) {
      this.formError.textContent = message;
      return;
    }
    field.classList.add("refused");
    field.querySelector(".field-error").textContent = plainRefusal(message, name);
    this.inputs[name].focus();
  }

  clearErrors() {
    this.formError.textContent = "";
    this.savedNote.textContent = "";
    for (const field of this.dialog.querySelectorAll(".field.refused")) {
      field.classList.remove("refused");
      field.querySelector(".field-error").textContent = "";
    }
  }

  // ---- global ----------------------------------------------------------------------------

  async renderGlobal(body) {
    const models = this.modelsSection();
    const memory = el("div", { className: "field" });
    body.append(models, memory, this.searchCacheSection(), researchSection(), exportSection());
    // Read-only until memory.md is read: what a person types first would be replaced by the
    // file, and saving after a failed read would empty it.
    const text = el("textarea", { id: "memory-text", rows: 10, spellcheck: "false", readOnly: true, placeholder: "Reading memory.md…" });
    const error = el("p", { className: "field-error", role: "alert" });
    const saved = el("span", { className: "saved", role: "status" });
    const save = el("button", { type: "button", className: "primary", id: "save-memory", text: "Save memory", disabled: true, on: { click: () => this.saveMemory(text, error, saved) } });
    memory.append(
      el("div", { className: "field-label" }, el("label", { for: "memory-text", text: "Memory (memory.md)" }), helpTip(GLOBAL_HELP.memory)),
      text,
      error,
      el("div", { className: "settings-foot" }, save, saved),
    );
    try {
      text.value = (await api("/api/memory")).text;
      text.readOnly = save.disabled = false;
      text.placeholder = "";
    } catch (failure) {
      text.placeholder = "";
      error.textContent = `Could not read memory.md: ${failure.message}`;
    }
  }

  modelsSection() {
    const section = el("div", { className: "field models" });
    const list = el("ul", { className: "model-list", id: "added-models" });
    const error = el("p", { className: "field-error", role: "alert" });
    const input = el("input", { type: "text", id: "new-model", placeholder: "model id, e.g. qwen3:8b", "aria-label": "Model id to add" });
    const save = async (models) => {
      error.textContent = "";
      try {
        const result = await api("/api/models", { method: "PUT", body: { models } });
        this.config.models.added = result.models;
        this.hooks.modelsChanged(result.models);
        draw();
      } catch (failure) {
        error.textContent = failure.message;
      }
    };
    const draw = () => {
      clear(list);
      for (const model of this.config.models.added) {
        list.append(el("li", {}, el("span", { text: model }), el("button", { type: "button", className: "quiet", "aria-label": `Remove ${model}`, text: "Remove", on: { click: () => save(this.config.models.added.filter((m) => m !== model)) } })));
      }
      if (!this.config.models.added.length) list.append(el("li", { className: "conversation-empty", text: "None added." }));
    };
    const form = el("form", { className: "inline-form" }, input, el("button", { type: "submit", text: "Add" }));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      if (input.value.trim()) save([...this.config.models.added, input.value.trim()]).then(() => (input.value = ""));
    });
    draw();
    const configured = this.config.models.configured.length ? `Configured (MODELS): ${this.config.models.configured.join(", ")}.` : "";
    section.append(el("div", { className: "field-label" }, el("span", { text: "Models" }), helpTip(GLOBAL_HELP.models)), el("p", { className: "field-help", text: configured }), list, form, error);
    return section;
  }

  /** The search cache (SEARCH_CACHE_TTL): emptied, the next searches ask Brave again. */
  searchCacheSection() {
    const done = el("span", { className: "saved", role: "status" });
    const error = el("p", { className: "field-error", role: "alert" });
    const empty = async () => {
      done.textContent = error.textContent = "";
      try {
        const { emptied } = await api("/api/search-cache", { method: "DELETE" });
        done.textContent = `Emptied: ${emptied} search${emptied === 1 ? "" : "es"} removed.`;
      } catch (failure) {
        error.textContent = failure.message;
      }
    };
    return el(
      "div",
      { className: "field" },
      el("div", { className: "field-label" }, el("span", { text: "Search cache" }), helpTip(GLOBAL_HELP.searchCache)),
      el("div", { className: "settings-foot" }, el("button", { type: "button", id: "empty-search-cache", text: "Empty the search cache", on: { click: empty } }), done),
      error,
    );
  }

  async saveMemory(text, error, saved) {
    error.textContent = "";
    saved.textContent = "";
    try {
      await api("/api/memory", { method: "PUT", body: { text: text.value } });
      saved.textContent = "Memory saved.";
    } catch (failure) {
      error.textContent = failure.message;
    }
  }
}

// The API's validation words, as a person would say them.
const PLAIN = [
  [/^Input should be less than or equal to (\d+)$/, (n) => `At most ${Number(n).toLocaleString("en")}.`],
  [/^Input should be greater than or equal to (\d+)$/, (n) => `At least ${Number(n).toLocaleString("en")}.`],
  [/^Input should be less than (\d+)$/, (n) => `Less than ${Number(n).toLocaleString("en")}.`],
  [/^Input should be greater than (\d+)$/, (n) => `More than ${Number(n).toLocaleString("en")}.`],
  [/^Input should be a valid integer.*$/, () => "A whole number, please."],
  [/^Input should be a valid number.*$/, () => "A number, please."],
  [/^String should have at most (\d+) characters?$/, (n) => `At most ${Number(n).toLocaleString("en")} characters.`],
  [/^String should have at least (\d+) characters?$/, (n) => `At least ${n} character${n === "1" ? "" : "s"}.`],
];

/** A research's plan pause and budget: kept in this browser, sent with each research
 * (research.js); a bound left empty is the service's default. */
function researchSection() {
  const pause = el("input", { type: "number", id: "research-pause", min: "0", max: "3600", step: "1", value: String(planPause()) });
  const kept = researchBudget();
  const bounds = Object.entries(BOUNDS).map(([name, cap]) => [name, cap, el("input", { type: "number", id: `research-${name}`, min: "1", max: String(cap), step: "1", placeholder: "default", value: kept[name] === undefined ? "" : String(kept[name]), "aria-label": `Research ${name} at most` })]);
  const saved = el("span", { className: "saved", role: "status" });
  const save = () => {
    const seconds = Number(pause.value);
    if (pause.value.trim() === "" || !(seconds >= 0 && seconds <= 3600)) {
      saved.textContent = "The pause: 0 to 3600 seconds";
      return;
    }
    const budget = {};
    for (const [name, cap, input] of bounds) {
      if (input.value.trim() === "") continue;
      const value = Number(input.value);
      if (!(value > 0 && value <= cap)) {
        saved.textContent = `${name}: 1 to ${cap}, or empty for the default`;
        return;
      }
      budget[name] = value;
    }
    keepPlanPause(seconds);
    keepResearchBudget(budget);
    saved.textContent = "Saved";
  };
  return el(
    "div",
    { className: "field" },
    el("div", { className: "field-label" }, el("label", { for: "research-pause", text: "Research: the plan starts by itself after (seconds)" }), helpTip("The plan of a research is shown before any search, to edit or remove its sub-questions. Without Start it starts by itself after this many seconds; 0 waits for Start, up to the service's RESEARCH_PLAN_WAIT_SECONDS (30 minutes unless set), then ends with nothing searched.")),
    pause,
    el("div", { className: "field-label" }, el("span", { text: "Research budget: searches, pages, minutes at most" }), helpTip("Each research stops at the first bound reached and writes its report from what it found. Empty: the service's default (RESEARCH_SEARCHES, RESEARCH_PAGES, RESEARCH_MINUTES).")),
    el("div", { className: "research-bounds" }, ...bounds.map(([name, , input]) => el("label", { className: "research-bound" }, el("span", { text: name }), input))),
    el("div", { className: "settings-foot" }, el("button", { type: "button", className: "primary", id: "save-research-pause", text: "Save", on: { click: save } }), saved),
  );
}

/** The server's message for one setting, without its field path, in plain words. */
function plainRefusal(message, name) {
  const own = message.split("; ").find((part) => part.includes(name)) || message;
  const text = own.replace(new RegExp(`^(settings\\.)?${name}: `), "");
  for (const [pattern, say] of PLAIN) {
    const match = text.match(pattern);
    if (match) return say(...match.slice(1));
  }
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/** Where a tip fits: under its button, moved left or above so it stays on screen. */
function placeTip(button, tip) {
  const margin = 8;
  const width = Math.min(280, window.innerWidth - 2 * margin);
  tip.style.width = `${width}px`;
  const at = button.getBoundingClientRect();
  tip.style.left = `${Math.max(margin, Math.min(at.left, window.innerWidth - width - margin))}px`;
  const below = at.bottom + 4;
  const height = tip.getBoundingClientRect().height;
  tip.style.top = `${below + height + margin > window.innerHeight ? Math.max(margin, at.top - height - 4) : below}px`;
}

/** A "?" that shows the help on hover or focus; a click pins it; Escape closes. */
export function helpTip(text) {
  if (!text) return null;
  const tip = el("span", { className: "help-text", role: "tooltip", text, hidden: true });
  const button = el("button", { type: "button", className: "help", "aria-label": `Help: ${text}`, text: "?" });
  const wrap = el("span", { className: "help-tip" }, button, tip);
  const show = (on) => {
    tip.hidden = !(on || tip.dataset.pinned);
    if (!tip.hidden) placeTip(button, tip);
  };
  button.addEventListener("mouseenter", () => show(true));
  button.addEventListener("mouseleave", () => show(false));
  button.addEventListener("focus", () => show(true));
  button.addEventListener("blur", () => show(false));
  button.addEventListener("click", () => {
    if (tip.dataset.pinned) delete tip.dataset.pinned;
    else tip.dataset.pinned = "yes";
    show(Boolean(tip.dataset.pinned));
  });
  return wrap;
}

function closeTips(root) {
  for (const tip of root.querySelectorAll(".help-text")) {
    delete tip.dataset.pinned;
    tip.hidden = true;
  }
}
