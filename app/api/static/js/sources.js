// An answer's sources under it: a chip for each source it cites and each page it read,
// then the other search results it only saw, folded; each numbered as the answer shows it
// (AnswerView.shownNumber).

import { el } from "./dom.js";

const CHIP_TITLE = 48; // characters of a page's title on its chip (the whole one on hover)

/** The sources box of answer `answerId`; `shownNumber(n)`: the number shown for source n;
 * `cited(n)`: whether the answer cites it. */
export function sourceList(sources, shownNumber, answerId, cited) {
  const chips = el("div", { className: "sources", "aria-label": "Sources" });
  const seen = [];
  const numbered = sources.map((source, index) => [index + 1, shownNumber(index + 1), source]);
  numbered.sort((a, b) => a[1] - b[1]);
  for (const [number, shown, source] of numbered) {
    if (source.read || cited(number)) chips.append(sourceChip(source, shown, `${answerId}-source-${number}`));
    else seen.push([number, shown, source]);
  }
  if (seen.length) {
    const list = el("ol", {});
    for (const [number, shown, source] of seen) {
      list.append(
        el(
          "li",
          { value: shown, id: `${answerId}-source-${number}` },
          source.date ? el("span", { className: "seen-date", text: source.date }) : null,
          safeLink(source.url, source.title || source.url),
          el("span", { className: "seen", text: ` · ${source.domain || ""}` }),
        ),
      );
    }
    chips.append(el("details", { className: "seen" }, el("summary", { text: `seen: ${seen.length} result${seen.length === 1 ? "" : "s"}` }), list));
  }
  return chips;
}

function sourceChip(source, number, id) {
  const host = (source.domain || hostOf(source.url)).replace(/^www\./, "");
  const title = (source.title || "").trim();
  const short = title.length > CHIP_TITLE ? `${title.slice(0, CHIP_TITLE - 1).trimEnd()}…` : title;
  const tip = [title, source.date, source.url].filter(Boolean).join(" · ");
  const chip = safeLink(source.url, null, { className: "source-chip", id, title: tip });
  chip.append(el("span", { className: "source-number", text: number }), short ? el("span", { className: "source-title", text: short }) : null, el("span", { className: "source-host", text: host }));
  return chip;
}

function hostOf(url) {
  try {
    return new URL(url).hostname;
  } catch {
    return "";
  }
}

/** A link only for http(s) addresses; anything else is shown as text. */
function safeLink(url, text, props = {}) {
  let ok = false;
  try {
    ok = ["http:", "https:"].includes(new URL(url).protocol);
  } catch {
    ok = false;
  }
  if (!ok) return el("span", { ...props, text: text ?? url });
  return el("a", { ...props, href: url, target: "_blank", rel: "noopener noreferrer", text: text ?? undefined });
}
