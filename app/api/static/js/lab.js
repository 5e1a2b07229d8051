// The search lab: a search exactly as the model gets it (date, title, domain, snippets,
// detected language), and "Compare locales": the in-language share per locale as a bar
// chart, a table and a CSV file. Results are untrusted text: they only go in through
// el()/svg() (textContent), links only for http(s) addresses.

import { api, ApiError } from "./api.js";
import { el, svg, clear } from "./dom.js";
import * as format from "./format.js";

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

/** Mount the lab in `root`; returns it (search(page), compare(), lastSearch). */
export function mountLab(root) {
  return new SearchLab(root);
}

class SearchLab {
  constructor(root) {
    clear(root);
    root.classList.add("lab");
    this.buildForm();
    this.status = el("p", { className: "lab-status", role: "status", "aria-live": "polite" });
    this.errorBox = el("div", { className: "lab-error", role: "alert", hidden: true });
    this.comparison = el("section", { className: "lab-comparison", "aria-labelledby": "lab-comparison-title", hidden: true });
    this.results = el("section", { className: "lab-results", "aria-labelledby": "lab-results-title", hidden: true });

    root.append(
      el("header", { className: "lab-head" },
        el("h1", { text: "Search lab" }),
        el("p", { className: "lab-intro", text: "A search exactly as the model gets it: through your SearXNG, with the locale and engines you choose, and the language of each result as detected. Compare locales to see which one brings results in your language." })),
      this.form, this.status, this.errorBox, this.comparison, this.results,
    );

    // -- state --
    this.busy = new Map(); // kind -> {controller, message}
    this.lastSearch = null;
    this.chartBody = null;
    this.chartWidth = 0;

    this.chartBox = el("figure", { className: "lab-chart" });
    const observer = new ResizeObserver(() => {
      const width = Math.round(this.chartBox.clientWidth);
      if (this.chartBody && width && width !== this.chartWidth) this.drawChart();
    });
    observer.observe(this.chartBox);
    this.wire();
  }

  buildForm() {
    this.query = el("input", { id: "lab-query", type: "search", name: "q", required: true, maxlength: "400", autocomplete: "off", placeholder: "What the model would search for" });
    this.locale = el("input", { id: "lab-locale", type: "text", name: "locale", list: "lab-locale-list", autocomplete: "off", spellcheck: "false", placeholder: "SEARCH_LOCALE", "aria-describedby": "lab-locale-hint" });
    this.engines = el("input", { id: "lab-engines", type: "text", name: "engines", autocomplete: "off", spellcheck: "false", placeholder: "all enabled", "aria-describedby": "lab-engines-hint" });
    this.locales = el("input", { id: "lab-locales", type: "text", name: "locales", autocomplete: "off", spellcheck: "false", "aria-describedby": "lab-locales-hint" });
    this.top = el("input", { id: "lab-top", type: "number", name: "top", min: "1", max: "50", value: "20", required: true });
    this.fresh = el("input", { id: "lab-fresh", type: "checkbox", name: "fresh" });
    this.searchButton = el("button", { type: "submit", className: "primary", text: "Search" });
    this.compareButton = el("button", { type: "button", className: "lab-compare-button", text: "Compare locales" });
    this.form = el("form", { className: "lab-form", autocomplete: "off", "aria-label": "Search lab" },
      field("query", "Query", this.query),
      field("locale", "Locale", this.locale, "e.g. pl-PL, pl, all"),
      field("engines", "Engines", this.engines, "optional, comma list"),
      field("locales", "Locales to compare", this.locales, "default: all, the language, the locale"),
      field("top", "Top results", this.top),
      field("fresh", "Fresh", this.fresh, "ask the engines, not the search cache (spends a query)"),
      el("div", { className: "lab-actions" }, this.searchButton, this.compareButton),
      el("datalist", { id: "lab-locale-list" }, COMMON_LOCALES.map((value) => el("option", { value }))));
  }

  wire() {
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.search(1);
    });
    this.compareButton.addEventListener("click", () => this.compare());
    this.locale.addEventListener("input", () => this.updateLocalesHint());
    this.updateLocalesHint();

    api("/api/config")
      .then((config) => {
        const fallback = config && config.defaults && config.defaults.search_locale;
        if (!fallback) return;
        this.locale.placeholder = fallback;
        if (!this.locale.value) this.locale.value = fallback;
        this.updateLocalesHint();
      })
      .catch(() => {
        // the service's SEARCH_LOCALE still applies when the field is left empty
      });
  }

  showStatus() {
    const messages = [...this.busy.values()].map((b) => b.message);
    this.status.textContent = messages.join(" ");
    this.status.classList.toggle("busy", messages.length > 0);
  }

  showError(title, error) {
    const errorBox = this.errorBox;
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

  async run(kind, button, message, path, render, failTitle, section) {
    const busy = this.busy;
    if (busy.has(kind)) busy.get(kind).controller.abort();
    const controller = new AbortController();
    busy.set(kind, { controller, message });
    button.disabled = true;
    button.setAttribute("aria-busy", "true");
    this.showError(null);
    this.showStatus();
    try {
      const body = await api(path, { signal: controller.signal });
      if (busy.get(kind)?.controller === controller) render(body);
    } catch (error) {
      if (error.name === "AbortError") return;
      section.hidden = true;
      this.showError(failTitle, error);
    } finally {
      if (busy.get(kind)?.controller === controller) {
        busy.delete(kind);
        button.disabled = false;
        button.removeAttribute("aria-busy");
        this.showStatus();
      }
    }
  }

  chosenLocale() {
    return this.locale.value.trim();
  }

  updateLocalesHint() {
    const defaults = defaultLocales(this.chosenLocale() || this.locale.placeholder);
    this.locales.placeholder = defaults.length ? defaults.join(",") : "e.g. all,pl,pl-PL";
  }

  // -- search --
  search(page = 1) {
    if (!this.form.reportValidity()) return;
    const params = new URLSearchParams({ q: this.query.value.trim(), page: String(page) });
    if (this.chosenLocale()) params.set("locale", this.chosenLocale());
    if (this.engines.value.trim()) params.set("engines", this.engines.value.trim());
    if (this.fresh.checked) params.set("fresh", "true");
    this.run("search", this.searchButton, "Searching…", `/api/lab/search?${params}`, (body) => this.renderResults(body), "Search failed", this.results);
  }

  renderResults(body) {
    const results = this.results;
    this.lastSearch = body;
    clear(results);
    const target = body.target;
    const inTarget = target ? body.results.filter((r) => r.language === target).length : 0;
    const facts = [`${body.results.length} result${body.results.length === 1 ? "" : "s"}`, `locale ${body.locale}`, `page ${body.page}`];
    if (target) facts.push(`${inTarget} of ${body.results.length} in “${target}”`);
    if (body.cached_age !== null) facts.push(`from cache, ${format.age(body.cached_age)}`);
    if (body.waited) facts.push(`waited ${body.waited.toFixed(1)} s for the search plan's rate`);
    if (body.cost !== null) facts.push(body.cost ? `about ${format.dollars(body.cost)}` : "no Brave query spent");
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
      el("button", { type: "button", className: "quiet", text: "← Previous page", disabled: body.page <= 1, on: { click: () => this.search(body.page - 1) } }),
      el("span", { text: `page ${body.page}` }),
      el("button", { type: "button", className: "quiet", text: "Next page →", disabled: body.page >= MAX_PAGE || !body.results.length, on: { click: () => this.search(body.page + 1) } }));
    results.append(pager);
    results.hidden = false;
  }

  // -- compare --
  compare() {
    if (!this.form.reportValidity()) return;
    const params = new URLSearchParams({ q: this.query.value.trim(), top: this.top.value.trim() });
    if (this.locales.value.trim()) params.set("locales", this.locales.value.trim());
    else if (this.chosenLocale()) params.set("locale", this.chosenLocale());
    if (this.engines.value.trim()) params.set("engines", this.engines.value.trim());
    if (this.fresh.checked) params.set("fresh", "true");
    this.run("measure", this.compareButton, "Measuring locales…", `/api/lab/measure?${params}`, (body) => this.renderComparison(body), "Comparison failed", this.comparison);
  }

  drawChart() {
    this.chartWidth = Math.round(this.chartBox.clientWidth) || 640;
    clear(this.chartBox).append(barChart(this.chartBody, this.chartWidth));
  }

  renderComparison(body) {
    this.chartBody = body;
    clear(this.comparison);
    this.comparison.append(
      el("div", { className: "lab-section-head" },
        el("h2", { id: "lab-comparison-title", text: "Compare locales" }),
        el("button", { type: "button", className: "lab-csv", text: "Download CSV", on: { click: () => download(measurementCsv(body), csvName(body)) } })),
      el("p", { className: "lab-summary", text: `How many of the top ${body.top} results for “${body.query}” are in “${body.target}”, locale by locale (the language is detected from each result's title and snippets).` }),
      this.chartBox,
      el("div", { className: "lab-table-wrap" }, comparisonTable(body)),
    );
    this.comparison.hidden = false;
    this.drawChart();
  }
}

function field(id, label, input, hint) {
  return el("div", { className: `lab-field lab-field-${id}` },
    el("label", { for: `lab-${id}`, text: label }),
    input,
    hint ? el("span", { className: "lab-hint", id: `lab-${id}-hint`, text: hint }) : null);
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

function comparisonTable(body) {
  return el("table", { className: "lab-table" },
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
}
