// Household mode (docs/household.md): Settings' People tab, for admins only (the list, add,
// disable or enable, make an admin or not, end sessions, a new sign-in link, remove with the
// name typed, each one's share of the Brave plan), and every person's own
// "Export my conversations". An admin never reads anyone's conversations: removing
// someone, the page asks to have them download theirs first.

import { api, text as fetchText } from "./api.js";
import { el, clear } from "./dom.js";

const REMOVE_HELP = "This cannot be undone. Their conversations, memory.md and searches go with them, and you cannot read or download them: ask them to use Settings → Global → Export my conversations first.";

/** The People tab's body: the list, then the form that adds someone. */
export async function renderPeople(body) {
  const section = el("div", { className: "people", id: "people" });
  const lead = el("p", { className: "field-help", text: "Everyone who may sign in to this service. You see their names, never their conversations." });
  const list = el("ul", { className: "people-list", "aria-label": "People" });
  const error = el("p", { className: "field-error", role: "alert" });
  section.append(lead, list, error, addForm(() => draw()));
  body.append(section);

  const draw = async () => {
    error.textContent = "";
    let people;
    try {
      people = await api("/api/people");
    } catch (failure) {
      error.textContent = failure.message;
      return;
    }
    clear(list);
    for (const person of people) list.append(row(person, draw, error));
  };
  await draw();
}

function row(person, redraw, error) {
  const mine = person.you;
  const name = el("span", { className: "person-name", text: person.name });
  const marks = [
    person.display_name && person.display_name !== person.name ? person.display_name : null,
    person.email,
    person.admin ? "admin" : null,
    person.disabled ? "disabled" : null,
    person.signs_in === "password" ? "password" : "signs in through the proxy",
    `since ${person.created.slice(0, 10)}`,
  ].filter(Boolean);
  const item = el("li", { className: "person", dataset: { id: String(person.id) } }, el("div", { className: "person-who" }, name, mine ? el("span", { className: "badge", text: "you" }) : null, el("span", { className: "person-marks", text: marks.join(" · ") })));
  const share = shareOf(person, item);
  if (mine) {
    item.append(el("div", { className: "person-actions" }, share.button), share.line);
    return item;
  }
  const act = async (call) => {
    error.textContent = "";
    try {
      await call();
      await redraw();
    } catch (failure) {
      error.textContent = failure.message;
    }
  };
  const toggle = person.disabled ? "Enable" : "Disable";
  const remove = el("button", { type: "button", className: "quiet danger", "aria-label": `Remove ${person.name}`, text: "Remove" });
  const given = el("div", { className: "person-link", hidden: true });
  const newLink = async () => {
    error.textContent = "";
    try {
      const made = await api(`/api/people/${person.id}/link`, { method: "POST" });
      showLink(given, person.name, new URL(made.sign_in_link, location.origin).href, `person-link-address-${person.id}`);
      given.hidden = false;
    } catch (failure) {
      error.textContent = failure.message;
    }
  };
  const actions = el(
    "div",
    { className: "person-actions" },
    share.button,
    el("button", { type: "button", className: "quiet", "aria-label": `${toggle} ${person.name}`, text: toggle, on: { click: () => act(() => api(`/api/people/${person.id}`, { method: "PATCH", body: { disabled: !person.disabled } })) } }),
    el("button", { type: "button", className: "quiet", "aria-label": person.admin ? `${person.name} no longer an admin` : `Make ${person.name} an admin`, title: "An admin manages the people, as you do; never their conversations", text: person.admin ? "Not admin" : "Make admin", on: { click: () => act(() => api(`/api/people/${person.id}`, { method: "PATCH", body: { admin: !person.admin } })) } }),
    el("button", { type: "button", className: "quiet", "aria-label": `End ${person.name}'s sessions`, title: "Signs them out everywhere and revokes their API tokens: they sign in anew", text: "End sessions", on: { click: () => act(() => api(`/api/people/${person.id}/reset`, { method: "POST" })) } }),
    person.disabled ? null : el("button", { type: "button", className: "quiet", "aria-label": `A new sign-in link for ${person.name}`, title: "A one-time link with which they choose a new password (a forgotten one); their earlier link stops working", text: "Sign-in link", on: { click: newLink } }),
    remove,
  );
  remove.addEventListener("click", () => confirmRemoval(item, person, remove, redraw));
  item.append(actions, share.line, given);
  return item;
}

const LIMITS = [
  { key: "daily", label: "Daily" },
  { key: "monthly", label: "Monthly" },
];

/** The row's share of the Brave plan (read once the list is drawn) and its Limits button,
 * which opens the form that sets them. */
function shareOf(person, item) {
  const line = el("p", { className: "person-share", id: `person-share-${person.id}`, text: "Brave queries: reading…" });
  const button = el("button", { type: "button", className: "quiet", "aria-label": `${person.name}'s limits`, "aria-expanded": "false", "aria-controls": `person-limits-${person.id}`, disabled: true, text: "Limits" });
  let share = null;
  const show = (given) => {
    share = given;
    line.textContent = share.text;
    button.disabled = false;
  };
  api(`/api/people/${person.id}/limits`).then(show, (failure) => (line.textContent = failure.message));
  button.addEventListener("click", () => {
    const open = document.getElementById(`person-limits-${person.id}`);
    if (open) return open.querySelector("select").focus();
    button.setAttribute("aria-expanded", "true");
    item.append(limitsForm(person, share, button, show));
  });
  return { button, line };
}

/** Daily and monthly limits: the settings' default, no limit, or a number from 0. The server
 * judges the number; its refusal is shown and the form keeps what was typed. */
function limitsForm(person, share, opener, saved) {
  const close = () => {
    form.remove();
    opener.setAttribute("aria-expanded", "false");
    opener.focus();
  };
  const error = el("p", { className: "field-error", role: "alert" });
  const fields = LIMITS.map(({ key, label }) => {
    const id = `person-limits-${person.id}-${key}`;
    const own = share.own[key];
    const choice = el(
      "select",
      { id },
      el("option", { value: "default", text: "The default" }),
      el("option", { value: "none", text: "No limit" }),
      el("option", { value: "number", text: "A number" }),
    );
    choice.value = own === "default" ? "default" : own === null ? "none" : "number";
    const count = el("input", { type: "number", id: `${id}-count`, min: "0", step: "1", inputmode: "numeric", "aria-label": `${label} Brave queries for ${person.name}`, value: typeof own === "number" ? String(own) : "" });
    count.hidden = choice.value !== "number";
    choice.addEventListener("change", () => {
      count.hidden = choice.value !== "number";
      if (!count.hidden) count.focus();
    });
    // An empty or unreadable number goes as typed, for the server to say what it wants.
    const value = () => (choice.value === "default" ? "default" : choice.value === "none" ? null : count.value === "" ? "" : Number(count.value));
    return { key, value, node: el("div", { className: "person-limit" }, el("label", { for: id, text: `${label} limit` }), el("div", { className: "person-limit-choice" }, choice, count)) };
  });
  const form = el(
    "form",
    { className: "person-limits", id: `person-limits-${person.id}`, "aria-label": `${person.name}'s limits`, novalidate: true },
    el("p", { className: "field-help", text: "Brave queries a UTC day and a calendar month. The default: the settings' (SEARCH_USER_DAILY_LIMIT, SEARCH_USER_MONTHLY_LIMIT)." }),
    el("div", { className: "person-limit-fields" }, fields.map((field) => field.node)),
    error,
    el("div", { className: "settings-foot" }, el("button", { type: "submit", className: "primary", text: "Save" }), el("button", { type: "button", className: "quiet", text: "Cancel", on: { click: close } })),
  );
  escapeCloses(form, close);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.textContent = "";
    try {
      saved(await api(`/api/people/${person.id}/limits`, { method: "PUT", body: Object.fromEntries(fields.map((field) => [field.key, field.value()])) }));
    } catch (failure) {
      error.textContent = failure.message;
      return;
    }
    close();
  });
  queueMicrotask(() => fields[0].node.querySelector("select").focus());
  return form;
}

/** Remove asks for the person's name, typed; Escape or Cancel gives the focus back to the row. */
function confirmRemoval(item, person, opener, redraw) {
  document.getElementById("people-remove")?.remove();
  const input = el("input", { type: "text", id: "people-remove-name", autocomplete: "off", spellcheck: "false" });
  const error = el("p", { className: "field-error", role: "alert" });
  const go = el("button", { type: "submit", className: "danger", text: `Remove ${person.name}`, disabled: true });
  const cancel = () => {
    panel.remove();
    opener.focus();
  };
  const panel = el(
    "form",
    { className: "people-remove", id: "people-remove", "aria-label": `Remove ${person.name}` },
    el("p", { text: REMOVE_HELP }),
    el("label", { for: "people-remove-name", text: `Type ${person.name} to remove them` }),
    input,
    error,
    el("div", { className: "settings-foot" }, go, el("button", { type: "button", className: "quiet", text: "Cancel", on: { click: cancel } })),
  );
  input.addEventListener("input", () => (go.disabled = input.value !== person.name));
  escapeCloses(panel, cancel);
  panel.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (input.value !== person.name) return;
    try {
      await api(`/api/people/${person.id}`, { method: "DELETE" });
    } catch (failure) {
      error.textContent = failure.message;
      return;
    }
    await redraw();
  });
  item.append(panel);
  input.focus();
}

function addForm(redraw) {
  const name = el("input", { type: "text", id: "person-name", autocomplete: "off", required: true });
  const password = el("input", { type: "password", id: "person-password", autocomplete: "new-password", "aria-describedby": "person-password-help" });
  const admin = el("input", { type: "checkbox", id: "person-admin" });
  const link = el("input", { type: "checkbox", id: "person-link" });
  link.addEventListener("change", () => (password.disabled = link.checked));
  const given = el("div", { className: "person-link", hidden: true });
  const error = el("p", { className: "field-error", role: "alert", id: "person-error" });
  const done = el("span", { className: "saved", role: "status" });
  const form = el(
    "form",
    { className: "person-add", "aria-label": "Add a person" },
    el("div", { className: "field-label" }, el("span", { text: "Add a person" })),
    el("div", { className: "field-row" },
      el("div", { className: "field" }, el("label", { for: "person-name", text: "Name" }), name),
      el("div", { className: "field" }, el("label", { for: "person-password", text: "Password" }), password,
        el("p", { className: "field-help", id: "person-password-help", text: "At least 8 characters; tell it to them. Empty: they sign in through the proxy only." }))),
    el("label", { className: "check" }, link, " A one-time sign-in link instead: they choose their password (valid 24 hours, once)"),
    el("label", { className: "check" }, admin, " An admin (may manage the people)"),
    error,
    el("div", { className: "settings-foot" }, el("button", { type: "submit", className: "primary", text: "Add" }), done),
    given,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.textContent = done.textContent = "";
    const body = { name: name.value, admin: admin.checked, ...(link.checked ? { link: true } : password.value ? { password: password.value } : {}) };
    try {
      const added = await api("/api/people", { method: "POST", body });
      done.textContent = `Added ${added.name}.`;
      form.reset();
      password.disabled = false;
      given.hidden = !added.sign_in_link;
      if (added.sign_in_link) showLink(given, added.name, new URL(added.sign_in_link, location.origin).href);
      await redraw();
    } catch (failure) {
      error.textContent = failure.message;
      name.focus();
    }
  });
  return form;
}

/** The link to give a person: shown once (only its digest is kept), with Copy. */
function showLink(box, name, address, id = "person-link-address") {
  const field = el("input", { type: "text", id, readonly: true, value: address, "aria-label": `${name}'s sign-in link` });
  const copied = el("span", { className: "saved", role: "status" });
  const copy = async () => {
    field.select();
    try {
      await navigator.clipboard.writeText(address);
      copied.textContent = "Copied.";
    } catch {
      copied.textContent = "Select it and copy it by hand.";
    }
  };
  clear(box).append(
    el("p", { className: "field-help", text: `Give ${name} this link: it signs them in once, to choose their password, within 24 hours. It is not shown again.` }),
    el("div", { className: "inline-form" }, field, el("button", { type: "button", text: "Copy", on: { click: copy } })),
    copied,
  );
}

/** A one-time sign-in link opened (#welcome=TOKEN): the sign-in form asks for the password
 * its person chooses instead. Whether it did (then the page starts once they are in). */
export function welcome() {
  const token = new URLSearchParams(location.hash.slice(1)).get("welcome");
  if (!token) return false;
  const dialog = document.getElementById("login-dialog");
  document.getElementById("login-title").textContent = "Welcome";
  document.getElementById("login-lead").textContent = "Choose your password for this household: 8 characters at least. This link works once.";
  document.getElementById("login-secret-label").textContent = "Your new password";
  const secret = document.getElementById("login-token");
  secret.autocomplete = "new-password";
  dialog.setAttribute("aria-label", "Welcome");
  document.getElementById("login-form").onsubmit = async (event) => {
    event.preventDefault();
    try {
      await api("/api/session", { method: "POST", body: { link: token, password: secret.value } });
    } catch (failure) {
      document.getElementById("login-error").textContent = failure.message;
      return;
    }
    history.replaceState(null, "", location.pathname); // the used link out of the address bar
    location.reload();
  };
  dialog.showModal();
  secret.focus();
  return true;
}

/** Settings → Global: every conversation of the signed-in person's, as one Markdown file. */
export function exportSection() {
  const error = el("p", { className: "field-error", role: "alert" });
  const download = async () => {
    error.textContent = "";
    try {
      const body = await fetchText("/api/export");
      const url = URL.createObjectURL(new Blob([body], { type: "text/markdown" }));
      const link = el("a", { href: url, download: "my-conversations.md", hidden: true });
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 1000);
    } catch (failure) {
      error.textContent = failure.message;
    }
  };
  return el(
    "div",
    { className: "field" },
    el("div", { className: "field-label" }, el("span", { text: "Your conversations" })),
    el("div", { className: "settings-foot" }, el("button", { type: "button", id: "export-mine", text: "Export my conversations", on: { click: download } })),
    error,
  );
}

/** Escape in a row's own form closes that form, not the whole Settings dialog. */
function escapeCloses(node, close) {
  node.addEventListener("keydown", (event) => {
    if (event.key !== "Escape") return;
    event.preventDefault();
    event.stopPropagation();
    close();
  });
}
