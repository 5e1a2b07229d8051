// Inline Markdown (emphasis, code spans, links, citations, autolinks) to DOM nodes, for the
// block parser of markdown.js: a left-to-right scanner under the same rules (model text only
// ever goes in as text nodes, links only to absolute http(s)/mailto URLs, images never
// loaded).
import { el } from "./dom.js";

export const MAX_DEPTH = 32; // deeper nesting is shown as text: hostile input cannot exhaust the stack
const SAFE_PROTOCOLS = new Set(["http:", "https:", "mailto:"]);

const SPECIAL = /[\\\n`*_~![<hH]/g;
const PUNCTUATION = /[!-/:-@[-`{-~]/;
const CITATION = /\[(\d{1,3}(?:[ \t]*,[ \t]*\d{1,3})*)\]/y;
const AUTOLINK = /<([a-zA-Z][a-zA-Z0-9+.-]{1,31}:[^\s<>]*)>/y;
const AUTOLINK_EMAIL = /<([^\s<>@]+@[^\s<>@]+\.[^\s<>@]+)>/y;
const BARE_URL = /https?:\/\/[^\s<>[\]"`]+/iy;

const RULES = {
  "\\": escape, "\n": lineBreak, "`": codeSpan, "*": emphasis, _: emphasis, "~": emphasis,
  "!": image, "[": linkOrCitation, "<": autolink, h: bareUrl, H: bareUrl,
};

/**
 * Inline markdown to a list of nodes and strings. A rule returns [items, nextIndex] or null;
 * null means the character is plain text. `inLink` turns off links inside a link's text.
 */
export function parseInline(s, ctx, depth = 0, inLink = false) {
  const out = [];
  const st = { ctx, depth, inLink, noCloser: {}, brackets: null };
  let text = "";
  const push = (item) => {
    if (typeof item === "string") text += item;
    else {
      if (text) out.push(text);
      text = "";
      out.push(item);
    }
  };
  if (depth > MAX_DEPTH) return [s];
  for (let i = 0; i < s.length; ) {
    SPECIAL.lastIndex = i;
    const next = SPECIAL.exec(s);
    const at = next ? next.index : s.length;
    push(s.slice(i, at)); // plain text up to the next character that may start something
    if (at >= s.length) break;
    const hit = RULES[s[at]](s, at, st);
    if (hit) hit[0].forEach(push);
    else push(s[at]);
    i = hit ? hit[1] : at + 1;
  }
  if (text) out.push(text);
  return out;
}

const runLength = (s, i) => {
  let k = i;
  while (s[k] === s[i]) k++;
  return k - i;
};
const isSpace = (ch) => ch === undefined || /\s/.test(ch);
const isWordChar = (ch) => ch !== undefined && /[\p{L}\p{N}]/u.test(ch);

function escape(s, i) {
  const ch = s[i + 1];
  if (ch === "\n") return [[el("br")], i + 2]; // a hard line break
  return ch && PUNCTUATION.test(ch) ? [[ch], i + 2] : null;
}

// Soft breaks become <br>: model answers use single newlines for lines that mean to be lines.
function lineBreak(s, i) {
  return [[el("br")], i + 1];
}

/** The index just past the backtick run closing the code span opened at i, or -1. */
function codeSpanEnd(s, i) {
  const n = runLength(s, i);
  for (let k = s.indexOf("`", i + n); k >= 0; k = s.indexOf("`", k + runLength(s, k))) {
    if (runLength(s, k) === n) return k + n;
  }
  return -1;
}

function codeSpan(s, i) {
  const n = runLength(s, i);
  const end = codeSpanEnd(s, i);
  if (end < 0) return [[s.slice(i, i + n)], i + n]; // an unmatched run is literal backticks
  let code = s.slice(i + n, end - n).replace(/\n/g, " ");
  if (/^ .*[^ ].* $/s.test(code)) code = code.slice(1, -1);
  return [[el("code", { text: code })], end];
}

// *em*, **strong**, ***both***, _em_, __strong__, ~~del~~. The closer is the next run of the
// same character and length that is not preceded by a space; "_" does not work inside words,
// so snake_case_names stay as they are.
function emphasis(s, i, st) {
  const c = s[i];
  const n = runLength(s, i);
  const literal = [[s.slice(i, i + n)], i + n];
  if ((c === "~" ? n !== 2 : n > 3) || isSpace(s[i + n]) || (c === "_" && isWordChar(s[i - 1]))) return literal;
  const close = findCloser(s, i + n, c, n, st);
  if (close < 0) return literal;
  const inner = parseInline(s.slice(i + n, close), st.ctx, st.depth + 1, st.inLink);
  const tag = c === "~" ? "del" : n === 1 ? "em" : "strong";
  const node = el(tag, {}, n === 3 ? el("em", {}, ...inner) : inner);
  return [[node], close + n];
}

function findCloser(s, from, c, n, st) {
  // Once a search from some point found nothing, a search from later finds nothing either.
  const key = c + n;
  if (from >= (st.noCloser[key] ?? Infinity)) return -1;
  for (let k = from; k < s.length; ) {
    if (s[k] === "\\") k += 2;
    else if (s[k] === "`") k = Math.max(codeSpanEnd(s, k), k + runLength(s, k)); // skip code spans
    else if (s[k] !== c) k++;
    else {
      const r = runLength(s, k);
      if (r === n && !isSpace(s[k - 1]) && !(c === "_" && isWordChar(s[k + n]))) return k;
      k += r;
    }
  }
  st.noCloser[key] = from;
  return -1;
}

/** Where each "[" of s closes, found in one pass: a scan per "[" would be quadratic. */
function matchBrackets(s) {
  const closes = new Map();
  const open = [];
  for (let k = 0; k < s.length; k++) {
    if (s[k] === "\\") k++;
    else if (s[k] === "`") k = Math.max(codeSpanEnd(s, k), k + runLength(s, k)) - 1;
    else if (s[k] === "[") open.push(k);
    else if (s[k] === "]" && open.length) closes.set(open.pop(), k);
  }
  return closes;
}

/** Parses [label](destination "title") at i: {label, url, end} or null. */
function linkParts(s, i, st) {
  st.brackets ??= matchBrackets(s);
  const close = st.brackets.get(i) ?? -1;
  if (close < 0 || s[close + 1] !== "(") return null;
  let k = close + 2;
  while (s[k] === " ") k++;
  let url;
  if (s[k] === "<") {
    const end = s.indexOf(">", k);
    if (end < 0 || s.slice(k, end).includes("\n")) return null;
    url = s.slice(k + 1, end);
    k = end + 1;
  } else {
    const start = k;
    for (let parens = 0; k < s.length && !isSpace(s[k]); k++) {
      if (s[k] === "\\") k++;
      else if (s[k] === "(") parens++;
      else if (s[k] === ")" && parens-- === 0) break;
    }
    url = s.slice(start, k).replace(/\\([!-/:-@[-`{-~])/g, "$1");
  }
  while (s[k] === " ") k++;
  const quote = { '"': '"', "'": "'", "(": ")" }[s[k]];
  if (quote) {
    k = s.indexOf(quote, k + 1) + 1; // the title is dropped
    if (k === 0) return null;
    while (s[k] === " ") k++;
  }
  return s[k] === ")" ? { label: s.slice(i + 1, close), url, end: k + 1 } : null;
}

/** The URL to link to, when it is absolute and http(s) or mailto; otherwise null. */
function safeHref(url, base) {
  try {
    const parsed = base ? new URL(url, base) : new URL(url);
    return SAFE_PROTOCOLS.has(parsed.protocol) ? parsed.href : null;
  } catch {
    return null; // relative, protocol-relative or not a URL at all
  }
}

function externalLink(href, ...children) {
  return el("a", { href, target: "_blank", rel: "noopener noreferrer" }, ...children);
}

function linkOrCitation(s, i, st) {
  const parts = linkParts(s, i, st);
  if (!parts) return citation(s, i, st);
  const label = parseInline(parts.label, st.ctx, st.depth + 1, true);
  const href = st.inLink ? null : safeHref(parts.url);
  if (!href) return [label, parts.end]; // an unsafe link is just its text
  // A text that names another address than the link's shows the real one instead: a page
  // read by the model could have it write [https://your-bank.example](https://elsewhere).
  if (namesAnotherHost(parts.label, href)) return [[externalLink(href, href)], parts.end];
  return [[externalLink(href, ...(label.length ? label : [parts.url]))], parts.end];
}

const ADDRESS_LIKE = /^(?:[a-z][a-z0-9+.-]*:\/\/)?(?:www\.)?[^\s/:@]+\.(?:\p{L}{2,}|xn--[a-z0-9-]+)\.?(?::\d+)?(?:[/?#]\S*)?$/iu;
// What a reader does not see: format characters (Cf: zero-width spaces and joiners, soft
// hyphens, direction marks); and IDNA's other dots, which a reader and the URL parser take
// for ".". The export compares hosts by the same rule (app/hostnames.py).
const UNSEEN = /\p{Cf}/gu;
const LABEL_DOTS = /[\u3002\uff0e\uff61]/g;

function namesAnotherHost(text, href) {
  const shown = text.replace(UNSEEN, "").replace(LABEL_DOTS, ".").trim().replace(/^[<`*_]+|[>`*_]+$/g, "");
  if (!ADDRESS_LIKE.test(shown)) return false;
  try {
    const named = new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(shown) ? shown : `http://${shown}`);
    return comparableHost(named) !== comparableHost(new URL(href));
  } catch {
    return true; // it looks like an address but is none: not the link's either
  }
}

// The URL parser gives a host in lower case and in IDNA's ASCII form; its trailing dot and
// "www." name the same site.
function comparableHost(url) {
  return url.hostname.replace(/\.$/, "").replace(/^www\./, "");
}

// [1], [1][2] (two matches) and [1, 2] become one link per number, when the page knows it.
function citation(s, i, st) {
  if (st.inLink || !st.ctx.citationHref) return null;
  CITATION.lastIndex = i;
  const m = CITATION.exec(s);
  if (!m) return null;
  const items = m[1].split(",").map((n) => citationLink(Number(n), st.ctx) ?? `[${Number(n)}]`);
  if (items.every((item) => typeof item === "string")) return null;
  return [items, i + m[0].length];
}

function citationLink(n, ctx) {
  const href = ctx.citationHref(n);
  if (typeof href !== "string" || !safeHref(href, document.baseURI)) return null;
  const external = !href.startsWith("#");
  return el("a", { className: "citation", href, target: external && "_blank", rel: external && "noopener noreferrer" }, `[${ctx.citationLabel ? ctx.citationLabel(n) : n}]`);
}

// Images are never loaded (no request may leave the page): the alt text stands in for them.
function image(s, i, st) {
  if (s[i + 1] !== "[") return null;
  const parts = linkParts(s, i + 1, st);
  return parts ? [[parts.label || parts.url], parts.end] : null;
}

function autolink(s, i, st) {
  if (st.inLink) return null;
  for (const [pattern, prefix] of [[AUTOLINK, ""], [AUTOLINK_EMAIL, "mailto:"]]) {
    pattern.lastIndex = i;
    const m = pattern.exec(s);
    const href = m && safeHref(prefix + m[1]);
    if (href) return [[externalLink(href, m[1])], i + m[0].length];
  }
  return null; // "<" of anything else, raw HTML included, is plain text
}

function bareUrl(s, i, st) {
  if (st.inLink || isWordChar(s[i - 1])) return null;
  BARE_URL.lastIndex = i;
  const m = BARE_URL.exec(s);
  if (!m) return null;
  // Trailing punctuation ends the sentence, not the URL; so does a ")" without its "(".
  let url = m[0];
  for (let before = ""; before !== url; ) {
    before = url;
    url = url.replace(/[.,:;!?'*_~]+$/, "");
    if (url.endsWith(")") && url.split("(").length < url.split(")").length) url = url.slice(0, -1);
  }
  const href = safeHref(url);
  return href ? [[externalLink(href, url)], i + url.length] : null;
}
