// Settings → Account (household mode only): the person's password (changed with the
// current one given), their signed-in sessions (when each signed in and was last used; one
// signed out, all the others, or everywhere) and their personal API tokens (made with a
// label, shown once with how to use it, listed without the token, revoked one by one).

import { api } from "./api.js";
import { el, clear } from "./dom.js";

const TOKENS_HELP = "A token lets a script, Open WebUI or an MCP client act as you: your conversations and memory. It is shown once; only its hash is kept.";

function when(value) {
  const date = typeof value === "number" ? new Date(value * 1000) : new Date(value);
  return date.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

/** The account's sections, drawn into `body`; the password's for a person who has one of
 * the stack's (not one the home lab's login names). */
export function renderAccount(body, { password }) {
  const sessions = sessionsSection();
  body.append(...(password ? [passwordSection(sessions.draw)] : []), sessions.section, tokensSection());
}

/** The password changed; `changed` then (the other sessions it ended are gone). */
function passwordSection(changed) {
  const field = (id, label, autocomplete) =>
    el("label", { className: "password-field" }, label, el("input", { type: "password", id, autocomplete, required: true, maxlength: "1024" }));
  const error = el("p", { className: "field-error", role: "alert" });
  const done = el("span", { className: "saved", role: "status" });
  const form = el(
    "form",
    { className: "password-form", id: "password-form" },
    field("password-current", "Current password", "current-password"),
    field("password-new", "New password (at least 8 characters)", "new-password"),
    field("password-again", "New password again", "new-password"),
    el("div", { className: "settings-foot" }, el("button", { type: "submit", text: "Change password" }), done),
    error,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.textContent = done.textContent = "";
    const [current, password, again] = ["#password-current", "#password-new", "#password-again"].map((id) => form.querySelector(id));
    if (password.value !== again.value) {
      error.textContent = "The two new passwords differ: type it the same twice.";
      again.focus();
      return;
    }
    try {
      const { sessions } = await api("/api/password", { method: "PUT", body: { current: current.value, password: password.value } });
      form.reset();
      done.textContent = `Password changed.${sessions ? ` ${sessions} other ${sessions === 1 ? "session" : "sessions"} signed out.` : ""}`;
      changed();
    } catch (failure) {
      error.textContent = failure.message;
    }
  });
  return el("section", { className: "field account" }, el("h3", { text: "Password" }), form);
}

function sessionsSection() {
  const list = el("ul", { className: "model-list account-list", id: "account-sessions" });
  const error = el("p", { className: "field-error", role: "alert" });
  const done = el("span", { className: "saved", role: "status" });
  const act = async (call, said) => {
    error.textContent = done.textContent = "";
    try {
      const answer = await call();
      done.textContent = said(answer);
      await draw();
    } catch (failure) {
      error.textContent = failure.message;
    }
  };
  const draw = async () => {
    const sessions = await api("/api/sessions");
    clear(list);
    for (const session of sessions) {
      const signOut = el("button", { type: "button", className: "quiet", "aria-label": `Sign out the session of ${when(session.created)}`, text: "Sign out", on: { click: () => act(() => api(`/api/sessions/${session.id}`, { method: "DELETE" }), () => "Signed out.") } });
      const used = session.last_used ? `last used ${when(session.last_used)}` : "not used since";
      list.append(el("li", {}, el("span", { text: `Signed in ${when(session.created)}` }), el("small", { text: used }), session.this_browser ? el("span", { className: "this-browser", text: "this browser" }) : signOut));
    }
  };
  const others = el("button", { type: "button", id: "sign-out-others", text: "Sign out the others", on: { click: () => act(() => api("/api/sessions", { method: "DELETE" }), ({ sessions }) => `${sessions} signed out.`) } });
  const everywhere = el("button", {
    type: "button",
    id: "sign-out-everywhere",
    text: "Sign out everywhere",
    on: {
      click: async () => {
        if (!window.confirm("Sign out every browser, this one too, and revoke every API token of yours?")) return;
        try {
          await api("/api/access", { method: "DELETE" });
          window.location.reload();
        } catch (failure) {
          error.textContent = failure.message;
        }
      },
    },
  });
  const redraw = () => draw().catch((failure) => (error.textContent = `Could not list the sessions: ${failure.message}`));
  redraw();
  const section = el("section", { className: "field account" }, el("h3", { text: "Sessions" }), list, el("div", { className: "settings-foot account-actions" }, others, everywhere, done), error);
  return { section, draw: redraw };
}

function tokensSection() {
  const list = el("ul", { className: "model-list account-list", id: "account-tokens" });
  const error = el("p", { className: "field-error", role: "alert" });
  const shown = el("div", { className: "token-shown", id: "token-shown", hidden: true });
  const input = el("input", { type: "text", id: "token-label", maxlength: "256", placeholder: "what it is for, e.g. laptop's Open WebUI", "aria-label": "Token label" });
  const draw = async () => {
    const tokens = await api("/api/tokens");
    clear(list);
    for (const token of tokens) {
      const used = token.last_used ? `last used ${when(token.last_used)}` : "never used";
      const revoke = el("button", { type: "button", className: "quiet", "aria-label": `Revoke ${token.label}`, text: "Revoke", on: { click: () => revokeToken(token) } });
      list.append(el("li", {}, el("span", { className: "token-label", text: token.label }), el("small", { text: `made ${when(token.created)}, ${used}` }), revoke));
    }
    if (!tokens.length) list.append(el("li", { className: "conversation-empty", text: "No token." }));
  };
  const revokeToken = async (token) => {
    error.textContent = "";
    try {
      await api(`/api/tokens/${token.id}`, { method: "DELETE" });
      await draw();
    } catch (failure) {
      error.textContent = failure.message;
    }
  };
  const form = el("form", { className: "inline-form" }, input, el("button", { type: "submit", text: "Make a token" }));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.textContent = "";
    if (!input.value.trim()) {
      error.textContent = "Give the token a label: what it is for.";
      return;
    }
    try {
      const made = await api("/api/tokens", { method: "POST", body: { label: input.value.trim() } });
      input.value = "";
      showOnce(shown, made);
      await draw();
    } catch (failure) {
      error.textContent = failure.message;
    }
  });
  draw().catch((failure) => (error.textContent = `Could not list the tokens: ${failure.message}`));
  return el("section", { className: "field account" }, el("h3", { text: "API tokens" }), el("p", { className: "field-help", text: TOKENS_HELP }), form, error, shown, list);
}

/** The new token, this once: with Copy and how a client uses it. Nothing keeps it after. */
function showOnce(box, made) {
  const status = el("span", { className: "saved", role: "status" });
  const value = el("code", { className: "token-value", id: "token-value", text: made.token });
  const copy = el("button", {
    type: "button",
    id: "copy-token",
    text: "Copy",
    on: {
      click: async () => {
        try {
          await navigator.clipboard.writeText(made.token);
          status.textContent = "Copied.";
        } catch {
          status.textContent = "Copy failed: select the token and copy it."; // no clipboard API (not a secure context)
        }
      },
    },
  });
  const base = window.location.origin;
  const close = el("button", { type: "button", className: "quiet", text: "Done", on: { click: () => clear(box).setAttribute("hidden", "") } });
  clear(box).append(
    el("p", { className: "token-warning", text: `“${made.label}”: copy it now. It will not be shown again.` }),
    value,
    el("div", { className: "settings-foot" }, copy, close, status),
    el("p", { className: "field-help", text: "For /v1 (the openai SDK, Open WebUI):" }),
    el("code", { className: "token-usage", text: `OPENAI_BASE_URL=${base}/v1\nOPENAI_API_KEY=<the token>` }),
    el("p", { className: "field-help", text: "For an MCP client (Streamable HTTP):" }),
    el("code", { className: "token-usage", text: `url: ${base}/mcp\nheader: Authorization: Bearer <the token>` }),
  );
  box.hidden = false;
}
