// The search lab: a search exactly as the model gets it (date, title, domain, snippets,
// detected language), and "Compare locales": the in-language share per locale as a bar
// chart, a table and a CSV file. Results are untrusted text: they only go in through
// el()/svg() (textContent), links only for http(s) addresses.

import { api, ApiError } from "./api.js";
import { el, svg, clear } from "./dom.js";

export const COMMON_LOCALES = [
  "all", "en", "en-US", "en-GB", "pl", "pl-PL", "fr", "fr-FR", "de", "de-DE",
  "es", "es-ES", "it", "it-IT", "ja", "ja-JP",
];
const MAX_PAGE = 10;

/** The language a locale asks for ("pl-PL" -> "pl"); null for all/auto. */
function languageOf(locale) {
  if (!locale || locale === "all" || locale === "auto") return null;
  return locale.split("-")[0].toLowerCase();
}

/** What the service compares by default: all, the language, the locale. */
function defaultLocales(locale) {
  const language = languageOf(locale);
  return language ? [...new Set(["all", language, locale])] : [];
}

function safeHref(url) {
  try {
    const parsed = new URL(url);
    return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.href : null;
  } catch {
    return null;
  }
}

function share(part, whole) {
  return whole ? (100 * part) / whole : 0;
}

// ---- CSV ------------------------------------------------------------------------------------

function csvCell(value) {
  let text = String(value ?? "");
  // A cell starting like a formula is run by spreadsheets: keep it text.
  if (/^[=+\-@\t\r]/.test(text)) text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

export function measurementCsv(body) {
  const lines = [["query", "locale", "target", "top", "in_target", "total", "share_percent"]];
  for (const row of body.rows) {
    lines.push([body.query, row.locale, body.target, body.top, row.in_target, row.total, share(row.in_target, row.total).toFixed(1)]);
  }
  return lines.map((cells) => cells.map(csvCell).join(",")).join("\r\n") + "\r\n";
}

function csvName(body) {
  const slug = body.query.toLowerCase().normalize("NFKD").replace(/[^\w]+/g, "-").replace(/^-+|-+$/g, "").slice(0, 40) || "query";
  return `search-lab-${slug}-${new Date().toISOString().slice(0, 10)}.csv`;
}

function download(text, name) {
  const url = URL.createObjectURL(new Blob(["\ufeff", text], { type: "text/csv;charset=utf-8" }));
  const link = el("a", { href: url, download: name, hidden: true });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 30_000);
}

// ---- the chart ------------------------------------------------------------------------------

const ROW = 40;
const BAR = 24;
const AXIS = 26;
const CHAR = 7.6; // width of one character of the 13px labels, roughly

/** One horizontal bar per locale: the share of results in the target language. */
function barChart(body, width) {
  const labelWidth = Math.max(48, Math.max(...body.rows.map((r) => r.locale.length)) * CHAR + 16);
  const left = labelWidth;
  const track = Math.max(60, width - left - 12);
  const height = body.rows.length * ROW + AXIS;
  const title = `Results in “${body.target}” among the top ${body.top}, by locale`;
  const said = body.rows.map((r) => `${r.locale}: ${r.in_target} of ${r.total}`).join("; ");
  const chart = svg("svg", {
    class: "lab-chart-svg",
    viewBox: `0 0 ${left + track + 12} ${height}`,
    role: "img",
    "aria-label": `${title}. ${said}.`,
  });
  chart.append(svg("title", { text: title }), svg("desc", { text: said }));

  const grid = svg("g", { class: "lab-grid", "aria-hidden": "true" });
  for (const percent of [0, 25, 50, 75, 100]) {
    const x = left + (track * percent) / 100;
    grid.append(
      svg("line", { x1: x, x2: x, y1: 4, y2: height - AXIS + 4 }),
      svg("text", { x, y: height - 8, "text-anchor": percent === 0 ? "start" : percent === 100 ? "end" : "middle", text: `${percent}%` }),
    );
  }
  chart.append(grid);

  body.rows.forEach((row, index) => {
    const y = index * ROW + (ROW - BAR) / 2;
    const filled = (track * share(row.in_target, row.total)) / 100;
    const value = `${row.in_target}/${row.total}`;
    const inside = filled >= value.length * CHAR + 14;
    const group = svg("g", {
      class: "lab-bar",
      "data-locale": row.locale,
      "data-value": value,
    });
    group.append(
      svg("title", { text: `${row.locale}: ${row.in_target} of ${row.total} results in “${body.target}” (${Math.round(share(row.in_target, row.total))}%)` }),
      svg("text", { class: "lab-bar-label", x: left - 10, y: y + BAR / 2, "dominant-baseline": "central", "text-anchor": "end", text: row.locale }),
      svg("rect", { class: "lab-bar-track", x: left, y, width: track, height: BAR, rx: 4 }),
      svg("rect", { class: "lab-bar-fill", x: left, y, width: filled, height: BAR, rx: 4 }),
      svg("text", {
        class: `lab-bar-value ${inside ? "inside" : "outside"}`,
        x: inside ? left + filled - 8 : left + filled + 8,
        y: y + BAR / 2,
        "dominant-baseline": "central",
        "text-anchor": inside ? "end" : "start",
        text: value,
      }),
    );
    chart.append(group);
  });
  return chart;
}

// ---- the view -------------------------------------------------------------------------------

export function mountLab(root) {
  clear(root);
  root.classList.add("lab");

  const field = (id, label, input, hint) =>
    el("div", { className: `lab-field lab-field-${id}` },
      el("label", { for: `lab-${id}`, text: label }),
      input,
      hint ? el("span", { className: "lab-hint", id: `lab-${id}-hint`, text: hint }) : null);

  const query = el("input", { id: "lab-query", type: "search", name: "q", required: true, maxlength: "400", autocomplete: "off", placeholder: "What the model would search for" });
  const locale = el("input", { id: "lab-locale", type: "text", name: "locale", list: "lab-locale-list", autocomplete: "off", spellcheck: "false", placeholder: "SEARCH_LOCALE", "aria-describedby": "lab-locale-hint" });
  const engines = el("input", { id: "lab-engines", type: "text", name: "engines", autocomplete: "off", spellcheck: "false", placeholder: "all enabled", "aria-describedby": "lab-engines-hint" });
  const locales = el("input", { id: "lab-locales", type: "text", name: "locales", autocomplete: "off", spellcheck: "false", "aria-describedby": "lab-locales-hint" });
  const top = el("input", { id: "lab-top", type: "number", name: "top", min: "1", max: "50", value: "20", required: true });
  const searchButton = el("button", { type: "submit", className: "primary", text: "Search" });
  const compareButton = el("button", { type: "button", className: "lab-compare-button", text: "Compare locales" });
  const form = el("form", { className: "lab-form", autocomplete: "off", "aria-label": "Search lab" },
    field("query", "Query", query),
    field("locale", "Locale", locale, "e.g. pl-PL, pl, all"),
    field("engines", "Engines", engines, "optional, comma list"),
    field("locales", "Locales to compare", locales, "default: all, the language, the locale"),
    field("top", "Top results", top),
    el("div", { className: "lab-actions" }, searchButton, compareButton),
    el("datalist", { id: "lab-locale-list" }, COMMON_LOCALES.map((value) => el("option", { value }))));

  const status = el("p", { className: "lab-status", role: "status", "aria-live": "polite" });
  const errorBox = el("div", { className: "lab-error", role: "alert", hidden: true });
  const comparison = el("section", { className: "lab-comparison", "aria-labelledby": "lab-comparison-title", hidden: true });
  const results = el("section", { className: "lab-results", "aria-labelledby": "lab-results-title", hidden: true });

  root.append(
    el("header", { className: "lab-head" },
      el("h1", { text: "Search lab" }),
      el("p", { className: "lab-intro", text: "A search exactly as the model gets it: through your SearXNG, with the locale and engines you choose, and the language of each result as detected. Compare locales to see which one brings results in your language." })),
    form, status, errorBox, comparison, results,
  );

  // -- state --
  const busy = new Map(); // kind -> {controller, message}
  let lastSearch = null;
  let chartBody = null;
  let chartWidth = 0;

  function showStatus() {
    const messages = [...busy.values()].map((b) => b.message);
    status.textContent = messages.join(" ");
    status.classList.toggle("busy", messages.length > 0);
  }

  function showError(title, error) {
    clear(errorBox);
    if (!error) {
      errorBox.hidden = true;
      return;
    }
    errorBox.append(el("strong", { text: title }), el("p", { text: error.message || String(error) }));
    if (error instanceof ApiError && error.status === 502) {
      errorBox.append(el("p", { className: "lab-error-hint" }, "SearXNG or its engine failed; the ", el("a", { href: "#/status", text: "status page" }), " checks each part."));
    }
    errorBox.hidden = false;
  }

  async function run(kind, button, message, path, render, failTitle, section) {
    if (busy.has(kind)) busy.get(kind).controller.abort();
    const controller = new AbortController();
    busy.set(kind, { controller, message });
    button.disabled = true;
    button.setAttribute("aria-busy", "true");
    showError(null);
    showStatus();
    try {
      const body = await api(path, { signal: controller.signal });
      if (busy.get(kind)?.controller === controller) render(body);
    } catch (error) {
      if (error.name === "AbortError") return;
      section.hidden = true;
      showError(failTitle, error);
    } finally {
      if (busy.get(kind)?.controller === controller) {
        busy.delete(kind);
        button.disabled = false;
        button.removeAttribute("aria-busy");
        showStatus();
      }
    }
  }

  function chosenLocale() {
    return locale.value.trim();
  }

  function updateLocalesHint() {
    const defaults = defaultLocales(chosenLocale() || locale.placeholder);
    locales.placeholder = defaults.length ? defaults.join(",") : "e.g. all,pl,pl-PL";
  }

  // -- search --
  function search(page = 1) {
    if (!form.reportValidity()) return;
    const params = new URLSearchParams({ q: query.value.trim(), page: String(page) });
    if (chosenLocale()) params.set("locale", chosenLocale());
    if (engines.value.trim()) params.set("engines", engines.value.trim());
    run("search", searchButton, "Searching…", `/api/lab/search?${params}`, renderResults, "Search failed", results);
  }

  function renderResults(body) {
    lastSearch = body;
    clear(results);
    const target = body.target;
    const inTarget = target ? body.results.filter((r) => r.language === target).length : 0;
    const facts = [`${body.results.length} result${body.results.length === 1 ? "" : "s"}`, `locale ${body.locale}`, `page ${body.page}`];
    if (target) facts.push(`${inTarget} of ${body.results.length} in “${target}”`);
    results.append(
      el("h2", { id: "lab-results-title", text: `Results for “${body.query}”` }),
      el("p", { className: "lab-summary", text: facts.join(" · ") }),
    );
    if (body.engine_errors.length) {
      results.append(el("div", { className: "notice warning lab-engine-errors" },
        el("strong", { text: "Some engines failed: " }),
        body.engine_errors.join("; ")));
    }
    if (!body.results.length) {
      results.append(el("p", { className: "lab-empty", text: "No results: this is what the model would be told too." }));
    } else {
      results.append(el("ol", { className: "lab-result-list" }, body.results.map((r) => resultItem(r, target))));
    }
    const pager = el("nav", { className: "lab-pager", "aria-label": "Result pages" },
      el("button", { type: "button", className: "quiet", text: "← Previous page", disabled: body.page <= 1, on: { click: () => search(body.page - 1) } }),
      el("span", { text: `page ${body.page}` }),
      el("button", { type: "button", className: "quiet", text: "Next page →", disabled: body.page >= MAX_PAGE || !body.results.length, on: { click: () => search(body.page + 1) } }));
    results.append(pager);
    results.hidden = false;
  }

  function resultItem(result, target) {
    const match = Boolean(target) && result.language === target;
    const href = safeHref(result.url);
    const title = result.title || result.url;
    return el("li", { className: "lab-result" },
      el("div", { className: "lab-result-meta" },
        result.date
          ? el("time", { className: "lab-date", datetime: result.date, text: result.date })
          : el("span", { className: "lab-date undated", text: "no date" }),
        el("span", { className: "lab-domain", text: result.domain }),
        el("span", {
          className: `lab-lang${match ? " match" : ""}`,
          title: match ? `detected language: ${result.language}, the locale's` : `detected language: ${result.language}`,
          text: result.language,
        })),
      href
        ? el("a", { className: "lab-title", href, rel: "noopener noreferrer", target: "_blank", title: result.url, text: title })
        : el("span", { className: "lab-title", title: result.url, text: title }),
      el("p", { className: "lab-snippet", text: result.content }));
  }

  // -- compare --
  function compare() {
    if (!form.reportValidity()) return;
    const params = new URLSearchParams({ q: query.value.trim(), top: top.value.trim() });
    if (locales.value.trim()) params.set("locales", locales.value.trim());
    else if (chosenLocale()) params.set("locale", chosenLocale());
    if (engines.value.trim()) params.set("engines", engines.value.trim());
    run("measure", compareButton, "Measuring locales…", `/api/lab/measure?${params}`, renderComparison, "Comparison failed", comparison);
  }

  const chartBox = el("figure", { className: "lab-chart" });
  const observer = new ResizeObserver(() => {
    const width = Math.round(chartBox.clientWidth);
    if (chartBody && width && width !== chartWidth) drawChart();
  });
  observer.observe(chartBox);

  function drawChart() {
    chartWidth = Math.round(chartBox.clientWidth) || 640;
    clear(chartBox).append(barChart(chartBody, chartWidth));
  }

  function renderComparison(body) {
    chartBody = body;
    clear(comparison);
    const table = el("table", { className: "lab-table" },
      el("caption", { className: "visually-hidden", text: `Results in “${body.target}” among the top ${body.top}, by locale` }),
      el("thead", {}, el("tr", {},
        el("th", { scope: "col", text: "Locale" }),
        el("th", { scope: "col", className: "num", text: `In “${body.target}”` }),
        el("th", { scope: "col", className: "num", text: "Total" }),
        el("th", { scope: "col", className: "num", text: "Share" }))),
      el("tbody", {}, body.rows.map((row) => el("tr", { dataset: { locale: row.locale } },
        el("th", { scope: "row", text: row.locale }),
        el("td", { className: "num", text: String(row.in_target) }),
        el("td", { className: "num", text: String(row.total) }),
        el("td", { className: "num", text: `${Math.round(share(row.in_target, row.total))}%` })))));
    comparison.append(
      el("div", { className: "lab-section-head" },
        el("h2", { id: "lab-comparison-title", text: "Compare locales" }),
        el("button", { type: "button", className: "lab-csv", text: "Download CSV", on: { click: () => download(measurementCsv(body), csvName(body)) } })),
      el("p", { className: "lab-summary", text: `How many of the top ${body.top} results for “${body.query}” are in “${body.target}”, locale by locale (py3langid on title and snippets, as measure-locale counts).` }),
      chartBox,
      el("div", { className: "lab-table-wrap" }, table),
    );
    comparison.hidden = false;
    drawChart();
  }

  // -- wiring --
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    search(1);
  });
  compareButton.addEventListener("click", compare);
  locale.addEventListener("input", updateLocalesHint);
  updateLocalesHint();

  api("/api/config")
    .then((config) => {
      const fallback = config && config.defaults && config.defaults.search_locale;
      if (!fallback) return;
      locale.placeholder = fallback;
      if (!locale.value) locale.value = fallback;
      updateLocalesHint();
    })
    .catch(() => {
      // the service's SEARCH_LOCALE still applies when the field is left empty
    });

  return { search, compare, get lastSearch() { return lastSearch; } };
}
