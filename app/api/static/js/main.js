// The page's shell: the sidebar (conversations, search, rename, delete), the views
// (#/c/<id>, #/lab, #/status), keyboard shortcuts and the token form.

import { ANSWER_SECONDS, api, ApiError, auth, ConnectionLost } from "./api.js";
import { ConversationView } from "./conversation.js";
import { $, el, clear } from "./dom.js";
import { forgetDrafts } from "./drafts.js";
import { dayGroup } from "./format.js";
import { keepFor } from "./kept.js";
import { mountLab } from "./lab.js";
import { welcome } from "./people.js";
import { priceSearches } from "./message.js";
import { SettingsDialog } from "./settings.js";
import { mountStatus, overview } from "./status.js";
import { streams } from "./streams.js";
import { bindTheme } from "./theme.js";
import { fillPicker, renderHeader, renderTitle } from "./topbar.js";

const state = { config: null, view: null, conversations: [], query: "", labMounted: false, dots: null };

async function start() {
  auth.onMissing = askToken;
  $("#login-form").onsubmit = signIn;
  // While a token is required the sign-in cannot be dismissed: behind it nothing works.
  $("#login-dialog").addEventListener("cancel", (event) => event.preventDefault());
  $("#login-dialog").addEventListener("close", () => {
    if (!state.signedIn) $("#login-dialog").showModal();
  });
  if (welcome()) return; // a sign-in link: the page starts after the password is chosen
  state.config = await pageConfig();
  if (!state.config) return;
  priceSearches(state.config.search_price_per_1000);
  keepFor(state.config.person);
  state.view = new ConversationView(state.config, {
    created: (id) => {
      history.replaceState(null, "", `#/c/${id}`);
      refreshList();
    },
    changed: () => refreshList(),
    turnEnded: (ended) => recheckDots(ended),
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
      fillPicker(state.view);
      renderHeader(state.view);
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
  bindTheme($("#theme"));
  streams.onChange = markStreams;
  $("#skip-link").addEventListener("click", (event) => {
    event.preventDefault(); // an in-page jump, not an address the router would open
    $("#composer-input").focus();
  });
  $("#conversation-list").addEventListener("keydown", moveInList);
  $("#chat-search").addEventListener("keydown", intoList);
  $("#new-conversation").addEventListener("click", newConversation);
  $("#open-settings").addEventListener("click", () => {
    drawer(false); // on a phone the menu would still cover the chat once Settings closes
    state.settings.open("global");
  });
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
    if (document.querySelector("dialog[open]")) return; // the dialog's own Escape
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

/** The ☰ menu of a narrow window: opened, the keyboard is in it; closed, the focus it
 * held goes back to the ☰, not to a control out of sight. */
function drawer(open) {
  const app = $("#app");
  const menu = $("#open-sidebar");
  if (!menu.getClientRects().length) return; // a wide window: no ☰, the sidebar is always there
  const wasOpen = app.classList.contains("drawer-open");
  app.classList.toggle("drawer-open", open);
  $("#scrim").hidden = !open;
  if (open && !wasOpen && !$("#sidebar").contains(document.activeElement)) $("#new-conversation").focus();
  else if (!open && wasOpen && $("#sidebar").contains(document.activeElement)) menu.focus();
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

// ---- while the service cannot answer -------------------------------------------------------

// While the service cannot answer what the page starts from or its list (restarting, a
// proxy's 502, its database down: a 503 saying so), it is asked again, each wait longer
// than the last, and the page comes back by itself once it answers: no reload needed.
const RETRY_SECONDS = [2, 4, 8, 15, 30];
/** The wait before asking again after `failures` failures in a row. */
const retryWait = (failures) => RETRY_SECONDS[Math.min(failures, RETRY_SECONDS.length - 1)];

/** /api/config, once the service gives it; null when it will not: a sign-in is asked (start()
 * runs again after it) or a refusal that asking again would not change. */
async function pageConfig() {
  for (let attempt = 0; ; attempt++) {
    let failure;
    try {
      const config = await api("/api/config", { timeout: ANSWER_SECONDS });
      unserved(null);
      return config;
    } catch (error) {
      failure = error;
    }
    if (failure.status === 401) {
      unserved(null); // the sign-in form, over the page
      return null;
    }
    const notice = unserved(unservedBecause(failure));
    // Another refusal (a 403 for an address it does not serve, say) would only come again.
    if (failure instanceof ApiError && failure.status < 500) return null;
    await retryIn(notice, retryWait(attempt));
  }
}

function unservedBecause(failure) {
  // A 503 is the service saying what it lacks (its database, say): its words, as given.
  if (failure instanceof ApiError) return `The chat service cannot serve the page now: ${failure.message}`;
  if (failure instanceof ConnectionLost) return failure.message.charAt(0).toUpperCase() + failure.message.slice(1);
  return `The chat service did not answer: ${failure.message}`;
}

/** The page's shell hidden behind a notice saying `reason`, or shown again (null). */
function unserved(reason) {
  let notice = $("#start-notice");
  $("#app").hidden = $("#skip-link").hidden = reason !== null;
  if (reason === null) {
    if (notice) notice.remove();
    return null;
  }
  if (!notice) {
    notice = el("div", { id: "start-notice", className: "notice warning start-notice" },
      el("p", { className: "start-reason", role: "alert" }),
      el("p", { className: "start-retry", hidden: true }, el("span"), " ", el("button", { type: "button", text: "Try now" })));
    document.body.prepend(notice);
  }
  const said = $(".start-reason", notice);
  if (said.textContent !== reason) said.textContent = reason; // said once, not at each try
  return notice;
}

/** Counts `seconds` down in the notice, or less when Try now is pressed; then "Trying…". */
function retryIn(notice, seconds) {
  const line = $(".start-retry", notice);
  const [left, now] = [$("span", line), $("button", line)];
  line.hidden = false;
  now.disabled = false;
  return new Promise((resolve) => {
    const tick = () => {
      if (seconds <= 0) return go();
      left.textContent = `Trying again in ${seconds} s.`;
      seconds -= 1;
    };
    const go = () => {
      clearInterval(timer);
      now.onclick = null;
      now.disabled = true;
      left.textContent = "Trying again…";
      resolve();
    };
    const timer = setInterval(tick, 1000);
    now.onclick = go;
    tick();
  });
}

/** Only these addresses are routes; any other fragment (a citation's #a2-source-1, say)
 * is a place in the page and must not change the conversation shown. */
function isRoute(hash) {
  return ["", "#", "#/", "#/lab", "#/status"].includes(hash) || hash.startsWith("#/c/");
}

async function route() {
  if (!isRoute(location.hash)) return;
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
      // Ready to type, unless the person is typing elsewhere (a title being renamed).
      if (!document.activeElement.matches("input, textarea, select")) state.view.input.focus();
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
let listFailures = 0; // in a row: how long the next ask waits
const RECHECK_SECONDS = 3;

async function refreshList() {
  const request = ++listRequests;
  let conversations;
  try {
    const query = state.query ? `?q=${encodeURIComponent(state.query)}` : "";
    conversations = await api(`/api/conversations${query}`, { timeout: ANSWER_SECONDS });
  } catch (error) {
    if (!(error instanceof ApiError || error instanceof ConnectionLost)) throw error;
    if (request === listRequests) {
      // No list came (the service, or its database, does not answer): say so rather than
      // show no conversations, and ask again by itself, each wait longer, until it comes.
      clear($("#conversation-list")).append(el("p", { className: "conversation-empty list-error", role: "alert", text: `Conversations could not be loaded: ${error.message}` }));
      if (error instanceof ConnectionLost || error.status >= 500) recheckListIn(retryWait(listFailures++));
    }
    return;
  }
  if (request !== listRequests) return;
  listFailures = 0;
  state.conversations = conversations;
  streams.serverRunning(conversations.filter((c) => c.running).map((c) => c.id));
  // A turn no stream of this page follows (another tab's, or one left by a reload): the
  // list is asked again until it ends, so its mark goes.
  if (conversations.some((c) => streams.unfollowed(c.id)) && !state.recheck) recheckListIn(RECHECK_SECONDS);
  // The title a first message gave the conversation shown, once the service has it.
  const shown = state.view && state.view.conversation;
  const entry = shown && conversations.find((c) => c.id === shown.id);
  if (entry && entry.title !== shown.title) {
    shown.title = entry.title;
    renderTitle(state.view);
  }
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

/** The list asked again in `seconds` (one wait at a time: a later one replaces it). */
function recheckListIn(seconds) {
  clearTimeout(state.recheck);
  state.recheck = setTimeout(() => {
    state.recheck = null;
    refreshList();
  }, seconds * 1000);
}

function listItem(conversation) {
  const item = el("div", { className: "conversation-item", dataset: { id: conversation.id } });
  // One Tab stop for the whole list (arrow keys move within it): see moveInList.
  const link = el("a", { href: `#/c/${conversation.id}`, text: conversation.title, title: conversation.title, tabindex: "-1", on: { click: () => drawer(false), dblclick: (event) => { event.preventDefault(); rename(item, conversation); } } });
  const menu = el("button", { type: "button", className: "icon item-menu", tabindex: "-1", "aria-haspopup": "menu", "aria-label": `Actions for “${conversation.title}”`, title: "Rename or delete", text: "⋯", on: { click: () => openMenu(item, conversation) } });
  link.addEventListener("keydown", (event) => {
    if (event.key === "F2") rename(item, conversation);
    else if (event.key === "Delete") confirmDelete(item, conversation);
    else if (event.key === "ContextMenu" || (event.shiftKey && event.key === "F10")) openMenu(item, conversation);
    else return;
    event.preventDefault();
  });
  item.append(link, menu);
  return item;
}

function openMenu(item, conversation) {
  closeMenus();
  const menu = el(
    "div",
    { className: "item-menu-list", role: "menu" },
    el("button", { type: "button", role: "menuitem", className: "rename", text: "Rename", on: { click: () => rename(item, conversation) } }),
    el("button", { type: "button", role: "menuitem", className: "delete danger", text: "Delete", on: { click: () => confirmDelete(item, conversation) } }),
  );
  menu.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      event.stopPropagation();
      closeMenus();
      item.querySelector("a")?.focus();
    }
  });
  item.append(menu);
  menu.querySelector("button").focus();
  setTimeout(() => document.addEventListener("click", closeMenus, { once: true }));
}

function closeMenus() {
  for (const menu of document.querySelectorAll(".item-menu-list")) menu.remove();
}

/** Arrow keys, Home and End move between the conversations; only one row is a Tab stop.
 * Up from the first goes back to the search box the list answers. */
function moveInList(event) {
  const links = [...document.querySelectorAll(".conversation-item > a")];
  const at = links.indexOf(document.activeElement);
  if (at < 0) return;
  if (at === 0 && event.key === "ArrowUp") {
    event.preventDefault();
    $("#chat-search").focus();
    return;
  }
  const to = { ArrowDown: at + 1, ArrowUp: at - 1, Home: 0, End: links.length - 1 }[event.key];
  if (to === undefined || !links[to]) return;
  event.preventDefault();
  setTabStop(links[to]);
  links[to].focus();
}

/** Down from the search box (Ctrl+K) reaches its results: the first conversation listed. */
function intoList(event) {
  if (event.key !== "ArrowDown") return;
  const first = document.querySelector(".conversation-item > a");
  if (!first) return;
  event.preventDefault();
  setTabStop(first);
  first.focus();
}

/** After the list is drawn again (a rename or a delete left undone): the keyboard goes on
 * from the same conversation, not from the top of the page. */
async function backToItem(id) {
  await refreshList();
  const link = document.querySelector(`.conversation-item[data-id="${CSS.escape(id)}"] > a`);
  if (!link) return;
  setTabStop(link);
  link.focus();
}

function setTabStop(link) {
  for (const other of document.querySelectorAll(".conversation-item > a")) other.tabIndex = other === link ? 0 : -1;
}

/** The sidebar's marks: a conversation answering now, or one whose answer came unseen. */
function markStreams() {
  for (const item of document.querySelectorAll(".conversation-item")) {
    const mark = streams.mark(item.dataset.id);
    item.classList.toggle("streaming", mark === "streaming");
    item.classList.toggle("unseen", mark === "unseen");
    const link = item.querySelector("a");
    if (link) link.setAttribute("aria-description", mark === "streaming" ? "answering" : mark === "unseen" ? "new answer" : "");
  }
}

function rename(item, conversation) {
  const input = el("input", { type: "text", value: conversation.title, "aria-label": "New title", maxlength: "200" });
  // Once: Chromium blurs the box when the list drawn again removes it, and a second save
  // would draw the list again later, under whatever the person does next (a double-click
  // that opens the next rename, say: its typing would go to the message box).
  let finished = false;
  const save = async () => {
    if (finished) return;
    finished = true;
    const title = input.value.trim();
    if (title && title !== conversation.title) {
      try {
        const updated = await api(`/api/conversations/${conversation.id}`, { method: "PATCH", body: { title } });
        if (state.view.conversation && state.view.conversation.id === conversation.id) {
          state.view.conversation.title = updated.title;
          renderTitle(state.view);
        }
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
      finished = true; // nothing saved, however the box goes away
      backToItem(conversation.id);
    }
  });
  input.addEventListener("blur", save, { once: true });
  item.replaceChildren(input);
  input.addEventListener("dblclick", (event) => event.stopPropagation());
  input.focus();
  input.select();
}

/** Inline: Delete or Keep. Keep has the focus, so an Enter pressed out of habit deletes
 * nothing; Escape keeps too. */
function confirmDelete(item, conversation) {
  const keep = () => backToItem(conversation.id);
  const yes = el("button", { type: "button", className: "danger confirm-delete", text: "Delete", on: { click: () => remove(conversation) } });
  const no = el("button", { type: "button", className: "quiet keep", text: "Keep", on: { click: keep } });
  item.replaceChildren(el("span", { className: "conversation-empty", text: `Delete “${conversation.title}”?` }), yes, no);
  item.addEventListener("keydown", (event) => {
    if (event.key !== "Escape") return;
    event.stopPropagation();
    keep();
  });
  no.focus();
}

async function remove(conversation) {
  try {
    await api(`/api/conversations/${conversation.id}`, { method: "DELETE" });
  } catch (error) {
    // Kept (a turn still answering, say): the page stays where it is and says why, the
    // focus back on the row as Keep leaves it.
    state.view.flash(`Not deleted: ${error.message}`);
    backToItem(conversation.id);
    return;
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
  // The list's one Tab stop: the conversation shown, else the first.
  const stop = document.querySelector(".conversation-item.current > a") || document.querySelector(".conversation-item > a");
  if (stop && !document.activeElement?.closest?.("#conversation-list")) setTabStop(stop);
  markStreams();
}

// ---- status and the token ------------------------------------------------------------------

async function checkStatus() {
  const result = await overview();
  showDots(result);
  // Only a person with nothing open yet is taken to Status (the lab diagnoses search too).
  if (result.blocking && ["", "#/"].includes(location.hash)) location.hash = "#/status";
}

/** A turn's end is news about the servers it used: a failure may mean one went away, and
 * an answer after a failure that one is back. Checked again then (the free checks), not
 * after every answer while all is well. */
function recheckDots(ended) {
  const allWell = state.dots && Object.values(state.dots.parts).every((value) => value === "ok");
  if (allWell && (ended === "done" || ended === "interrupted")) return;
  overview().then(showDots);
}

function showDots(result) {
  state.dots = result;
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

/** The service wants its token, or in household mode a name and a password: a form trades
 * it for a session cookie (HttpOnly, so no script on the page can read it). */
async function askToken(message) {
  const dialog = $("#login-dialog");
  if (dialog.open) return;
  state.signedIn = false;
  if (state.household === undefined) {
    state.household = await api("/api/session").then((session) => Boolean(session.household), () => false);
  }
  if (state.household) {
    $("#login-title").textContent = "Sign in";
    $("#login-lead").textContent = "Your name and password in this household.";
    $("#login-secret-label").textContent = "Password";
    $("#login-name-field").hidden = false;
    $("#login-name").required = true;
    dialog.setAttribute("aria-label", "Sign in");
  }
  const said = ["wrong access token", "wrong name or password"].includes(message);
  $("#login-error").textContent = said ? message : "";
  dialog.showModal();
  $(state.household ? "#login-name" : "#login-token").focus();
}

async function signIn(event) {
  event.preventDefault();
  const error = $("#login-error");
  const secret = $("#login-token").value;
  const body = state.household ? { name: $("#login-name").value, password: secret } : { token: secret };
  try {
    await api("/api/session", { method: "POST", body });
  } catch (failure) {
    error.textContent = failure.message;
    return;
  }
  state.signedIn = true;
  $("#login-dialog").close();
  if (state.config) location.reload();
  else start();
}

async function signOut() {
  if (state.config.person) forgetDrafts();
  await api("/api/session", { method: "DELETE" });
  location.reload();
}

start();
