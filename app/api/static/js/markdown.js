// Markdown to DOM, for untrusted model output that may still be streaming.
//
// Every node is built with createElement and every piece of model text goes in as a text node:
// nothing here hands a string to an HTML parser, so raw HTML in an answer shows as the literal
// text it is. Links are made only for absolute http(s)/mailto URLs, images are never loaded
// (their alt text is shown), and no style or on* attribute is ever set, so the page's CSP
// needs no 'unsafe-inline'. One block parser (lines -> blocks, recursive for quotes and list
// items) and one inline parser (a left-to-right scanner) do the work.
import { el } from "./dom.js";

const MAX_DEPTH = 32; // deeper nesting is shown as text: hostile input cannot exhaust the stack
const SAFE_PROTOCOLS = new Set(["http:", "https:", "mailto:"]);

// -- fences: shared by splitStable and the block parser, so both agree on what is code -------

const FENCE_OPEN = /^( {0,3})(`{3,}|~{3,})(.*)$/;
const FENCE_CLOSE = /^ {0,3}(`{3,}|~{3,})[ \t]*$/;

function fenceOpen(line) {
  const m = FENCE_OPEN.exec(line);
  if (!m) return null;
  const info = m[3].trim();
  if (m[2][0] === "`" && info.includes("`")) return null; // ```x``` on one line is inline code
  return { indent: m[1].length, char: m[2][0], length: m[2].length, info };
}

function closesFence(line, fence) {
  const m = FENCE_CLOSE.exec(line);
  return Boolean(m) && m[1][0] === fence.char && m[1].length >= fence.length;
}

/**
 * While an answer streams, only complete lines are rendered as markdown, and never an open
 * code fence: its lines would otherwise be re-parsed as markdown on every delta. The open
 * fence and everything after it stay in the tail, shown as plain text.
 */
export function splitStable(text) {
  const end = text.lastIndexOf("\n") + 1;
  let fence = null;
  let fenceStart = 0;
  for (let pos = 0; pos < end; ) {
    const next = text.indexOf("\n", pos) + 1;
    const line = text.slice(pos, next - 1).replace(/\r$/, "");
    if (fence) {
      if (closesFence(line, fence)) fence = null;
    } else if ((fence = fenceOpen(line))) {
      fenceStart = pos;
    }
    pos = next;
  }
  const cut = fence ? fenceStart : end;
  return { stable: text.slice(0, cut), tail: text.slice(cut) };
}

/** A DocumentFragment for `text`. options.citationHref(n) -> href|null, options.citationLabel(n)
 * -> the number shown (default n), options.onCopy(code). */
export function renderMarkdown(text, options = {}) {
  const fragment = document.createDocumentFragment();
  const lines = String(text ?? "").replace(/\r\n?/g, "\n").split("\n");
  if (lines.at(-1) === "") lines.pop();
  const ctx = { citationHref: options?.citationHref, citationLabel: options?.citationLabel, onCopy: options?.onCopy };
  parseBlocks(lines, fragment, ctx, 0);
  return fragment;
}

// -- blocks ----------------------------------------------------------------------------------

const HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
const RULE = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
const QUOTE = /^ {0,3}> ?/;
const LIST_ITEM = /^([ \t]*)([-*+]|(\d{1,9})[.)])(?:([ \t]+)(.*))?$/;
const DELIMITER_CELL = /^:?-+:?$/;

const isBlank = (line) => !line.trim();

// Leading whitespace in columns (a tab counts 4), and its removal: list items nest by indent.
function indentOf(line) {
  let cols = 0;
  for (const ch of line) {
    if (ch === " ") cols += 1;
    else if (ch === "\t") cols += 4;
    else break;
  }
  return cols;
}

function dedent(line, cols) {
  let i = 0;
  for (let removed = 0; removed < cols && (line[i] === " " || line[i] === "\t"); i++) {
    removed += line[i] === "\t" ? 4 : 1;
  }
  return line.slice(i);
}

function listItem(line) {
  const m = LIST_ITEM.exec(line);
  if (!m) return null;
  const indent = indentOf(m[1]);
  const gap = m[4] ? Math.min(indentOf(m[4]), 4) : 1;
  return {
    indent,
    offset: indent + m[2].length + gap, // where the item's own content starts
    ordered: m[3] !== undefined,
    start: m[3] !== undefined ? Number(m[3]) : 1,
    text: m[5] ?? "",
  };
}

const BLOCKS = [fenceBlock, headingBlock, ruleBlock, quoteBlock, listBlock, tableBlock, paragraphBlock];

function parseBlocks(lines, parent, ctx, depth) {
  for (let i = 0; i < lines.length; ) {
    if (isBlank(lines[i])) {
      i++;
      continue;
    }
    // Each block parser returns the index after what it consumed, or 0 when it does not apply;
    // the paragraph parser always applies.
    for (const block of BLOCKS) {
      const next = block(lines, i, parent, ctx, depth);
      if (next > i) {
        i = next;
        break;
      }
    }
  }
}

/** Does lines[i] start a block that ends a paragraph (or a list item's lazy continuation)? */
function startsBlock(lines, i) {
  const line = lines[i];
  return Boolean(
    fenceOpen(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line) ||
      listItem(line) || tableAlignments(lines, i),
  );
}

function fenceBlock(lines, i, parent, ctx) {
  const fence = fenceOpen(lines[i]);
  if (!fence) return 0;
  const code = [];
  // An unclosed fence runs to the end: a finished answer that never closed it is still code.
  for (i++; i < lines.length && !closesFence(lines[i], fence); i++) code.push(dedent(lines[i], fence.indent));
  parent.append(codeBlock(code.join("\n"), fence.info.split(/\s/)[0], ctx));
  return i + 1;
}

function codeBlock(code, lang, ctx) {
  const button = el("button", { className: "copy", type: "button", text: "Copy" });
  let timer = 0;
  const show = (label) => {
    button.textContent = label;
    clearTimeout(timer);
    timer = setTimeout(() => (button.textContent = "Copy"), 1500);
  };
  button.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(code);
    } catch {
      show("Copy failed"); // also when there is no clipboard API (not a secure context)
      return;
    }
    show("Copied");
    if (ctx.onCopy) ctx.onCopy(code);
  });
  return el(
    "div",
    { className: lang ? "code-block has-lang" : "code-block" },
    lang ? el("span", { className: "code-lang", text: lang }) : null,
    el("pre", {}, el("code", { text: code })),
    button,
  );
}

function headingBlock(lines, i, parent, ctx) {
  const m = HEADING.exec(lines[i]);
  if (!m) return 0;
  parent.append(el(`h${m[1].length}`, {}, ...parseInline(m[2] ?? "", ctx)));
  return i + 1;
}

function ruleBlock(lines, i, parent) {
  if (!RULE.test(lines[i])) return 0;
  parent.append(el("hr"));
  return i + 1;
}

function quoteBlock(lines, i, parent, ctx, depth) {
  if (depth >= MAX_DEPTH || !QUOTE.test(lines[i])) return 0;
  const inner = [];
  while (i < lines.length && QUOTE.test(lines[i])) inner.push(lines[i++].replace(QUOTE, ""));
  const quote = el("blockquote");
  parseBlocks(inner, quote, ctx, depth + 1);
  parent.append(quote);
  return i;
}

// A list is the run of items of one kind (ordered or not); an item owns the lines indented
// past its marker (dedented to its content column, so "   - sub" under "1. x" is a sub-list)
// and unindented lines that merely continue its text.
function listBlock(lines, i, parent, ctx, depth) {
  const first = listItem(lines[i]);
  if (!first || depth >= MAX_DEPTH) return 0;
  const list = first.ordered ? el("ol", { start: first.start !== 1 ? first.start : null }) : el("ul");
  let loose = false;
  for (let item = first; item && item.ordered === first.ordered; item = i < lines.length && listItem(lines[i])) {
    const body = [item.text];
    for (i++; i < lines.length; i++) {
      const line = lines[i];
      if (isBlank(line)) body.push("");
      else if (indentOf(line) > item.indent) body.push(dedent(line, item.offset));
      else if (!isBlank(body.at(-1)) && !startsBlock(lines, i)) body.push(line);
      else break;
    }
    let blanks = 0;
    for (; body.length > 1 && isBlank(body.at(-1)); blanks++) body.pop();
    // A blank line between items of this list; one before a list of the other kind ends it.
    if (blanks && i < lines.length && listItem(lines[i])?.ordered === first.ordered) loose = true;
    const li = el("li");
    parseBlocks(body, li, ctx, depth + 1);
    list.append(li);
  }
  // A tight list shows its items' first paragraph inline, without paragraph margins.
  if (!loose) {
    for (const li of [...list.children]) { // a copy: the live collection is slow to walk while edited
      if (li.firstChild && li.firstChild.nodeName === "P") li.firstChild.replaceWith(...li.firstChild.childNodes);
    }
  }
  parent.append(list);
  return i;
}

function splitRow(line) {
  let row = line.trim();
  if (row.startsWith("|")) row = row.slice(1);
  if (row.endsWith("|") && !row.endsWith("\\|")) row = row.slice(0, -1);
  return row.split(/(?<!\\)\|/).map((cell) => cell.trim().replace(/\\\|/g, "|"));
}

/** The column alignments when lines[i] is a table header followed by its delimiter row. */
function tableAlignments(lines, i) {
  if (i + 1 >= lines.length || !lines[i].includes("|") || !lines[i + 1].includes("-")) return null;
  const cells = splitRow(lines[i + 1]);
  if (!cells.every((cell) => DELIMITER_CELL.test(cell))) return null;
  if (cells.length !== splitRow(lines[i]).length) return null;
  return cells.map((cell) => {
    const left = cell.startsWith(":");
    const right = cell.endsWith(":");
    return left && right ? "align-center" : right ? "align-right" : left ? "align-left" : null;
  });
}

function tableBlock(lines, i, parent, ctx) {
  const aligns = tableAlignments(lines, i);
  if (!aligns) return 0;
  // Rows are padded or cut to the header's width, as GFM does.
  const row = (line, tag) => {
    const cells = splitRow(line);
    return el("tr", {}, aligns.map((align, c) => el(tag, { className: align }, ...parseInline(cells[c] ?? "", ctx))));
  };
  const table = el("table", {}, el("thead", {}, row(lines[i], "th")));
  const body = el("tbody");
  for (i += 2; i < lines.length && !isBlank(lines[i]) && lines[i].includes("|"); i++) body.append(row(lines[i], "td"));
  if (body.firstChild) table.append(body);
  parent.append(table);
  return i;
}

function paragraphBlock(lines, i, parent, ctx) {
  const text = [lines[i].trim()];
  for (i++; i < lines.length && !isBlank(lines[i]) && !startsBlock(lines, i); i++) text.push(lines[i].trim());
  parent.append(el("p", {}, ...parseInline(text.join("\n"), ctx)));
  return i;
}

// -- inline ----------------------------------------------------------------------------------

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
function parseInline(s, ctx, depth = 0, inLink = false) {
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

const ADDRESS_LIKE = /^(?:[a-z][a-z0-9+.-]*:\/\/)?(?:www\.)?[^\s/:@]+\.[a-z]{2,}(?::\d+)?(?:[/?#]\S*)?$/i;

function namesAnotherHost(text, href) {
  const shown = text.trim().replace(/^[<`*_]+|[>`*_]+$/g, "");
  if (!ADDRESS_LIKE.test(shown)) return false;
  try {
    const named = new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(shown) ? shown : `http://${shown}`);
    return named.hostname.replace(/^www\./, "") !== new URL(href).hostname.replace(/^www\./, "");
  } catch {
    return true; // it looks like an address but is none: not the link's either
  }
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
