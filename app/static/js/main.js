// The page's shell: the sidebar (conversations, search, rename, delete), the views
// (#/c/<id>, #/lab, #/status), keyboard shortcuts and the token form.

import { api, auth, ConnectionLost } from "./api.js";
import { ConversationView } from "./conversation.js";
import { $, el, clear } from "./dom.js";
import { dayGroup } from "./format.js";
import { mountLab } from "./lab.js";
import { SettingsDialog } from "./settings.js";
import { mountStatus, overview } from "./status.js";

const state = { config: null, view: null, conversations: [], query: "", labMounted: false };

async function start() {
  auth.onMissing = askToken;
  $("#login-form").onsubmit = signIn;
  try {
    state.config = await api("/api/config");
  } catch (error) {
    if (error.status === 401) return; // the token form is open; start() runs again after it
    document.body.replaceChildren(el("p", { className: "notice warning", text: `The chat service did not answer: ${error.message}` }));
    return;
  }
  state.view = new ConversationView(state.config, {
    created: (id) => {
      history.replaceState(null, "", `#/c/${id}`);
      refreshList();
    },
    changed: () => refreshList(),
    openStatus: () => (location.hash = "#/status"),
    openSettings: (tab) => state.settings.open(tab),
  });
  state.settings = new SettingsDialog(state.config, {
    conversation: () => state.view.conversation,
    saved: (conversation) => {
      if (conversation) {
        state.view.conversation = conversation;
        if (location.hash !== `#/c/${conversation.id}`) history.replaceState(null, "", `#/c/${conversation.id}`);
        state.view.render();
        refreshList();
      }
    },
    modelsChanged: (models) => {
      state.config.models.added = models;
      state.view.fillPicker();
      state.view.renderHeader();
    },
  });
  bindShell();
  $("#sign-out").hidden = !state.config.auth;
  $("#sign-out").addEventListener("click", signOut);
  await refreshList();
  await route();
  document.body.dataset.ready = "yes"; // for tests and scripts: the page is wired up
  checkStatus();
}

function bindShell() {
  window.addEventListener("hashchange", route);
  $("#new-conversation").addEventListener("click", newConversation);
  $("#open-settings").addEventListener("click", () => state.settings.open("global"));
  let timer = 0;
  $("#chat-search").addEventListener("input", (event) => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      state.query = event.target.value.trim();
      refreshList();
    }, 200);
  });
  $("#open-sidebar").addEventListener("click", () => drawer(true));
  $("#close-sidebar").addEventListener("click", () => drawer(false));
  $("#scrim").addEventListener("click", () => drawer(false));
  document.addEventListener("keydown", shortcut);
  $("#view-status").addEventListener("status:checked", (event) => showDots(event.detail));
}

function shortcut(event) {
  const mod = event.ctrlKey || event.metaKey;
  if (event.key === "Escape") {
    if (state.view.streaming) {
      event.preventDefault();
      state.view.stop();
    } else if (document.querySelector(".app.drawer-open")) drawer(false);
  } else if (mod && !event.shiftKey && event.key.toLowerCase() === "k") {
    event.preventDefault();
    drawer(true);
    $("#chat-search").focus();
  } else if (mod && event.shiftKey && event.key.toLowerCase() === "o") {
    event.preventDefault();
    newConversation();
  }
}

function drawer(open) {
  $("#app").classList.toggle("drawer-open", open);
  $("#scrim").hidden = !open;
}

function newConversation() {
  drawer(false);
  if (location.hash === "#/" || location.hash === "") {
    show("chat");
    state.view.draft();
  } else {
    location.hash = "#/";
  }
}

// ---- views -------------------------------------------------------------------------------

function show(name) {
  for (const view of ["chat", "lab", "status"]) $(`#view-${view}`).hidden = view !== name;
  $("#open-lab").classList.toggle("current", name === "lab");
  $("#open-status").classList.toggle("current", name === "status");
}

async function route() {
  drawer(false);
  const hash = location.hash || "#/";
  if (hash === "#/lab") {
    show("lab");
    if (!state.labMounted) mountLab($("#view-lab"));
    state.labMounted = true;
  } else if (hash === "#/status") {
    show("status");
    mountStatus($("#view-status"));
  } else if (hash.startsWith("#/c/")) {
    show("chat");
    try {
      await state.view.open(decodeURIComponent(hash.slice(4)));
    } catch (error) {
      state.view.draft();
      state.view.flash(`That conversation could not be opened: ${error.message}`);
    }
  } else {
    show("chat");
    if (state.view.conversation || !state.view.messages.childNodes.length) state.view.draft();
  }
  markCurrent();
}

// ---- the conversation list -----------------------------------------------------------------

// Refreshes overlap (a turn ends while a search is typed): only the latest one is shown,
// whichever answer arrives last.
let listRequests = 0;

async function refreshList() {
  const request = ++listRequests;
  let conversations;
  try {
    conversations = await api(`/api/conversations${state.query ? `?q=${encodeURIComponent(state.query)}` : ""}`);
  } catch (error) {
    if (!(error instanceof ConnectionLost)) throw error;
    return;
  }
  if (request !== listRequests) return;
  state.conversations = conversations;
  const list = clear($("#conversation-list"));
  if (!state.conversations.length) {
    list.append(el("p", { className: "conversation-empty", text: state.query ? "No conversation matches." : "No conversations yet." }));
    return;
  }
  let group = null;
  for (const conversation of state.conversations) {
    const name = dayGroup(conversation.updated);
    if (name !== group) {
      group = name;
      list.append(el("h3", { className: "conversation-group", text: name }));
    }
    list.append(listItem(conversation));
  }
  markCurrent();
}

function listItem(conversation) {
  const item = el("div", { className: "conversation-item", dataset: { id: conversation.id } });
  const link = el("a", { href: `#/c/${conversation.id}`, text: conversation.title, title: conversation.title });
  const actions = el(
    "div",
    { className: "item-actions" },
    el("button", { type: "button", className: "icon rename", "aria-label": `Rename “${conversation.title}”`, title: "Rename", text: "✎", on: { click: () => rename(item, conversation) } }),
    el("button", { type: "button", className: "icon delete", "aria-label": `Delete “${conversation.title}”`, title: "Delete", text: "✕", on: { click: () => confirmDelete(item, conversation) } }),
  );
  item.append(link, actions);
  return item;
}

function rename(item, conversation) {
  const input = el("input", { type: "text", value: conversation.title, "aria-label": "New title", maxlength: "200" });
  const save = async () => {
    const title = input.value.trim();
    if (title && title !== conversation.title) {
      try {
        const updated = await api(`/api/conversations/${conversation.id}`, { method: "PATCH", body: { title } });
        if (state.view.conversation && state.view.conversation.id === conversation.id) state.view.conversation.title = updated.title;
      } catch (error) {
        state.view.flash(`Not renamed: ${error.message}`);
      }
    }
    refreshList();
  };
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter") save();
    if (event.key === "Escape") {
      event.stopPropagation();
      refreshList();
    }
  });
  input.addEventListener("blur", save, { once: true });
  item.replaceChildren(input);
  input.focus();
  input.select();
}

function confirmDelete(item, conversation) {
  const yes = el("button", { type: "button", className: "danger confirm-delete", text: "Delete", on: { click: () => remove(conversation) } });
  const no = el("button", { type: "button", className: "quiet", text: "Keep", on: { click: () => refreshList() } });
  item.replaceChildren(el("span", { className: "conversation-empty", text: `Delete “${conversation.title}”?` }), yes, no);
  yes.focus();
}

async function remove(conversation) {
  try {
    await api(`/api/conversations/${conversation.id}`, { method: "DELETE" });
  } catch (error) {
    state.view.flash(`Not deleted: ${error.message}`);
  }
  if (state.view.conversation && state.view.conversation.id === conversation.id) location.hash = "#/";
  refreshList();
}

function markCurrent() {
  const current = state.view && state.view.conversation ? state.view.conversation.id : null;
  for (const item of document.querySelectorAll(".conversation-item")) {
    const on = item.dataset.id === current && $("#view-chat").hidden === false;
    item.classList.toggle("current", on);
    const link = item.querySelector("a");
    if (link) (on ? link.setAttribute("aria-current", "page") : link.removeAttribute("aria-current"));
  }
}

// ---- status and the token ------------------------------------------------------------------

async function checkStatus() {
  const result = await overview();
  showDots(result);
  // Only a person with nothing open yet is taken to Status (the lab diagnoses search too).
  if (result.blocking && ["", "#/"].includes(location.hash)) location.hash = "#/status";
}

function showDots(result) {
  const dots = clear($("#status-dots"));
  const names = { searxng: "SearXNG", engine: "search engine", model: "model server" };
  const said = [];
  for (const [part, label] of Object.entries(names)) {
    const value = result.parts[part] || "unknown";
    dots.append(el("span", { className: `status-dot ${value}`, title: `${label}: ${value}` }));
    said.push(`${label} ${value}`);
  }
  dots.setAttribute("aria-label", said.join(", "));
}

/** The service wants its token: a form trades it for a session cookie (HttpOnly, so no
 * script on the page can read it). */
function askToken(message) {
  const dialog = $("#login-dialog");
  if (dialog.open) return;
  $("#login-error").textContent = message === "wrong access token" ? message : "";
  dialog.showModal();
  $("#login-token").focus();
}

async function signIn(event) {
  event.preventDefault();
  const error = $("#login-error");
  try {
    await api("/api/session", { method: "POST", body: { token: $("#login-token").value } });
  } catch (failure) {
    error.textContent = failure.message;
    return;
  }
  $("#login-dialog").close();
  if (state.config) location.reload();
  else start();
}

async function signOut() {
  await api("/api/session", { method: "DELETE" });
  location.reload();
}

start();
