// Markdown to DOM, for untrusted model output that may still be streaming.
//
// Every node is built with createElement and every piece of model text goes in as a text node:
// nothing here hands a string to an HTML parser, so raw HTML in an answer shows as the literal
// text it is. Links are made only for absolute http(s)/mailto URLs, images are never loaded
// (their alt text is shown), and no style or on* attribute is ever set, so the page's CSP
// needs no 'unsafe-inline'. One block parser (lines -> blocks, recursive for quotes and list
// items, here) and one inline parser (a left-to-right scanner, in markdown-inline.js) do
// the work.
import { el } from "./dom.js";
import { MAX_DEPTH, parseInline } from "./markdown-inline.js";

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
