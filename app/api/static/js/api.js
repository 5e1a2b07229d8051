// Talking to the chat service: JSON calls and the SSE stream of a turn.

export class ApiError extends Error {
  constructor(status, message, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

/** A lost connection to our own service (not a failure of the model server). */
export class ConnectionLost extends Error {}

/** Set by main.js: opens the sign-in form when the service wants its token. */
export const auth = { onMissing: null };

const WITH_BODY = new Set(["POST", "PUT", "PATCH"]);

/** How long the page waits for what it shows (its start, the list, a conversation) before
 * it says the service did not answer: the slowest of them, /api/config's model probe, is
 * bounded at 5 s on the service. */
export const ANSWER_SECONDS = 20;

async function send(path, { method = "GET", body, signal, accept = "application/json" } = {}) {
  const init = { method, signal, headers: { Accept: accept }, credentials: "same-origin" };
  if (WITH_BODY.has(method)) {
    // The service takes changes only as JSON, which no other site's form can send.
    init.body = JSON.stringify(body ?? {});
    init.headers["Content-Type"] = "application/json";
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new ConnectionLost(`the chat service did not answer (${error.message})`);
  }
  if (!response.ok) throw await apiError(response);
  return response;
}

async function apiError(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    // not JSON: the status says enough
  }
  const detail = body && body.detail;
  const message = typeof detail === "string" ? detail : Array.isArray(detail) ? invalid(detail) : detail ? JSON.stringify(detail) : `HTTP ${response.status}`;
  if (response.status === 401 && auth.onMissing) auth.onMissing(message);
  return new ApiError(response.status, message, body);
}

/** A 422's list of what was wrong, in the server's words: "daily: a limit is a whole number from 0...". */
function invalid(errors) {
  return errors.map((error) => (Array.isArray(error.loc) && error.loc.length > 1 ? `${error.loc.at(-1)}: ${error.msg}` : error.msg)).join("; ");
}

/**
 * A JSON call; resolves to the parsed body (null for 204). Throws ApiError or ConnectionLost.
 * With `timeout` (seconds), an answer not whole by then is a ConnectionLost: a connection a
 * proxy or a NAT dropped without a word would otherwise be waited on for many minutes.
 */
export async function api(path, { timeout, ...options } = {}) {
  if (!timeout) return json(path, options);
  const expired = new AbortController();
  const timer = setTimeout(() => expired.abort(), timeout * 1000);
  const signal = options.signal ? AbortSignal.any([options.signal, expired.signal]) : expired.signal;
  try {
    return await json(path, { ...options, signal });
  } catch (error) {
    if (error.name === "AbortError" && expired.signal.aborted) throw new ConnectionLost(`the chat service did not answer within ${timeout} s`);
    throw error;
  } finally {
    clearTimeout(timer);
  }
}

async function json(path, options) {
  const response = await send(path, options);
  if (response.status === 204) return null;
  try {
    return await response.json();
  } catch (error) {
    if (error.name === "AbortError") throw error;
    // The connection broke while the body came (or something else answered, not JSON).
    throw new ConnectionLost(`the chat service's answer did not come whole (${error.message})`);
  }
}

/** The body as text (exports). */
export async function text(path, options = {}) {
  return (await send(path, { ...options, accept: "*/*" })).text();
}

/**
 * POST a turn (or, with `body` null, GET a running turn's events) and yield its SSE events
 * as [id, event]. Aborting `signal` only leaves the stream: the turn runs on in the
 * service until its end or Stop (POST .../stop).
 * Throws ApiError before the stream starts (409, 404...), ConnectionLost if it breaks.
 */
export async function* streamTurn(path, body, signal) {
  const method = body === null ? "GET" : "POST";
  const response = await send(path, { method, body, signal, accept: "text/event-stream" });
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  try {
    for (;;) {
      let chunk;
      try {
        chunk = await reader.read();
      } catch (error) {
        if (error.name === "AbortError" || (signal && signal.aborted)) return;
        throw new ConnectionLost(`the connection to the chat service broke (${error.message})`);
      }
      if (chunk.done) break;
      buffer += chunk.value.replace(/\r\n?/g, "\n");
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const frame = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const lines = frame.split("\n");
        const data = lines
          .filter((line) => line.startsWith("data:"))
          .map((line) => line.slice(5).replace(/^ /, ""))
          .join("\n");
        const id = lines.find((line) => line.startsWith("id:"));
        if (data) yield [id ? Number(id.slice(3)) : null, JSON.parse(data)];
      }
    }
  } finally {
    reader.releaseLock();
  }
}
