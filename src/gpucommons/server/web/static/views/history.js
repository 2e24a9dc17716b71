// History on the overview (and, for one team, on its page): GPUs held over time against quota, and
// waits per day. Charts come with their numbers in a table (`<details>`), which the browser tests read.

import { chartFrame, fitWidth, lineChart, NARROW, seriesClass, seriesLegend, stackedGpuChart, xOf } from "../chart.js";
import { loadGpuHistory, loadWaits, WINDOWS } from "../history_data.js";
import { h, table } from "../dom.js";
import { formatDuration } from "../format.js";

const WINDOW_NAMES = { "24h": "24 hours", "7d": "7 days", "30d": "30 days" };

export function windowParam(ctx) {
  const w = ctx.params.get("window") || "";
  return WINDOWS.includes(w) ? w : "24h";
}

/** The history and the waits, or the reason they could not be loaded (the rest of the page still shows). */
export async function loadHistory(api, window) {
  try {
    const [gpus, waits] = await Promise.all([loadGpuHistory(api, window), loadWaits(api, 14)]);
    return { window, gpus, waits, error: null };
  } catch (e) {
    return { window, gpus: null, waits: null, error: e.message || String(e) };
  }
}

export function tickFormat(window) {
  return window === "24h"
    ? (d) => d.toISOString().slice(11, 16)
    : (d) => d.toISOString().slice(5, 10);
}

/** Stable colours: a team keeps its colour on every chart of a page. */
export function colours(teams) {
  const names = [...new Set(teams)].sort();
  return new Map(names.map((t, i) => [t, i]));
}

function gpus(value) {
  return (Math.round(value * 100) / 100).toString();
}

/** The overview's history section: a stacked chart per pool, then each team against its quota. */
export function historySection(history, basePath = "#/") {
  const links = h(
    "ul",
    { class: "window-links", "aria-label": "Time window" },
    WINDOWS.map((w) =>
      h(
        "li",
        {},
        h("a", { href: `${basePath}?window=${w}`, "aria-current": w === history.window ? "true" : null, id: `window-${w}` }, WINDOW_NAMES[w]),
      ),
    ),
  );
  const body = history.error
    ? h("p", { class: "load-error callout error" }, `The history could not be loaded: ${history.error}`)
    : [gpuCharts(history.gpus), waitsCharts(history.waits)];
  return h(
    "section",
    { "aria-labelledby": "history-heading", class: "history" },
    h("h2", { id: "history-heading" }, `GPUs held over the last ${WINDOW_NAMES[history.window]}`),
    links,
    body,
  );
}

export function gpuCharts(gpu) {
  const starts = gpu.bucket_starts.map((t) => Date.parse(t));
  const endMs = Date.parse(gpu.end);
  const format = tickFormat(gpu.window);
  const colour = colours(gpu.series.map((s) => s.team));
  if (!gpu.series.length) return h("p", { class: "empty" }, "No team visible to you has a quota or used GPUs in this window.");
  const pools = gpu.pools.filter((p) => gpu.series.some((s) => s.pool === p.name));
  return h(
    "div",
    { class: "gpu-history", dataset: { window: gpu.window } },
    seriesLegend([
      ...[...colour.keys()].map((t) => [`area owned ${seriesClass(colour.get(t))}`, t]),
      ["area borrowed neutral", "borrowed (above quota)", "hatched"],
      ["capacity-line", "pool capacity", "line"],
      ["quota-line", "nominal quota", "line"],
    ]),
    pools.map((pool) => {
      const series = gpu.series.filter((s) => s.pool === pool.name).map((s) => ({ ...s, held: s.held_gpus, borrowed: s.borrowed_gpus, nominal: s.nominal_gpus, colour: colour.get(s.team) }));
      const peak = Math.max(0, ...starts.map((_, i) => series.reduce((a, s) => a + s.held[i], 0)));
      const label = `GPUs held in pool ${pool.name} (${pool.capacity_gpus} GPUs), stacked by team, over ${WINDOW_NAMES[gpu.window]}: peak ${gpus(peak)}`;
      return h(
        "article",
        { class: "card history-pool", dataset: { pool: pool.name } },
        h("h3", {}, `Pool ${pool.name}`, h("span", { class: "muted" }, ` · ${pool.gpu_type} · ${pool.capacity_gpus} GPUs`)),
        chartFrame(stackedGpuChart({ series, starts, endMs, capacity: pool.capacity_gpus, label, formatTick: format, width: fitWidth() }), "Average GPUs held per interval; hatched: above the team's quota."),
        series.length < 2
          ? null
          : h(
          "div",
          { class: "small-multiples" },
          series.map((s) =>
            h(
              "div",
              { class: "small-chart", dataset: { team: s.team, pool: s.pool } },
              h("h4", {}, s.team),
              chartFrame(
                stackedGpuChart({
                  series: [s],
                  starts,
                  endMs,
                  label: `${s.team} in ${s.pool}: GPUs held against its quota of ${s.nominal[s.nominal.length - 1]}`,
                  formatTick: format,
                  height: 170,
                  width: NARROW,
                }),
              ),
            ),
          ),
        ),
        numbersTable(pool.name, series, gpu.bucket_starts),
      );
    }),
  );
}

function numbersTable(pool, series, startsIso) {
  const rows = startsIso.map((t, i) =>
    h(
      "tr",
      { dataset: { bucket: t } },
      h("th", { scope: "row", class: "nowrap" }, `${t.slice(0, 16).replace("T", " ")}`),
      series.map((s) =>
        h(
          "td",
          { class: "num", dataset: { team: s.team, held: s.held[i], borrowed: s.borrowed[i], nominal: s.nominal[i] } },
          `${gpus(s.held[i])}${s.borrowed[i] ? ` (${gpus(s.borrowed[i])} borrowed)` : ""} / ${s.nominal[i]}`,
        ),
      ),
    ),
  );
  return h(
    "details",
    { class: "numbers" },
    h("summary", {}, "The numbers behind the chart"),
    table({
      cls: "history-numbers",
      caption: `Average GPUs held per interval in pool ${pool} (borrowed) / quota, UTC`,
      columns: [["Interval from"], ...series.map((s) => [s.team, "num"])],
      rows,
    }),
  );
}

export function waitsCharts(waits) {
  const teams = waits.teams.filter((t) => t.days.length);
  const heading = h("h2", { id: "waits-heading" }, "Waits per day (p50 and p95)");
  if (!teams.length) {
    return h("section", { "aria-labelledby": "waits-heading" }, heading, h("p", { class: "empty" }, "No admissions in the last 14 days."));
  }
  const first = Date.parse(`${waits.start}T00:00:00Z`);
  const end = Date.parse(`${waits.end}T00:00:00Z`) + 86400000;
  const starts = [];
  for (let t = first; t < end; t += 86400000) starts.push(t);
  const x = xOf(starts, end, NARROW);
  const colour = colours(waits.teams.map((t) => t.team));
  return h(
    "section",
    { "aria-labelledby": "waits-heading", class: "waits" },
    heading,
    h("p", { class: "muted small" }, "From entering the queue (submit, or requeue after a preemption) to admission; per UTC day of the admission."),
    h(
      "div",
      { class: "small-multiples" },
      teams.map((t) => {
        const at = t.days.map((d) => x(Date.parse(`${d.day}T12:00:00Z`)));
        const cls = seriesClass(colour.get(t.team));
        return h(
          "div",
          { class: "small-chart", dataset: { team: t.team } },
          h("h4", {}, t.team),
          chartFrame(
            lineChart({
              lines: [
                { label: "p50", values: t.days.map((d) => d.p50_seconds), at, cls },
                { label: "p95", values: t.days.map((d) => d.p95_seconds), at, cls, dashed: true },
              ],
              starts,
              endMs: end,
              label: `${t.team}: wait p50 and p95 per day; last day ${formatDuration(t.days.at(-1).p50_seconds)} / ${formatDuration(t.days.at(-1).p95_seconds)}`,
              formatTick: tickFormat("7d"),
              yFormat: (v) => formatDuration(v),
              height: 170,
              width: NARROW,
            }),
            "Solid: median; dashed: 95th percentile.",
          ),
          h(
            "details",
            { class: "numbers" },
            h("summary", {}, `${t.team}'s waits`),
            table({
              cls: "wait-numbers",
              caption: `Waits of team ${t.team} per day`,
              columns: [["Day"], ["Admissions", "num"], ["p50", "num"], ["p95", "num"], ["Longest", "num"]],
              rows: t.days.map((d) =>
                h(
                  "tr",
                  { dataset: { day: d.day } },
                  h("th", { scope: "row" }, d.day),
                  h("td", { class: "num" }, String(d.admissions)),
                  h("td", { class: "num", dataset: { seconds: d.p50_seconds } }, formatDuration(d.p50_seconds)),
                  h("td", { class: "num", dataset: { seconds: d.p95_seconds } }, formatDuration(d.p95_seconds)),
                  h("td", { class: "num" }, formatDuration(d.max_seconds)),
                ),
              ),
            }),
          ),
        );
      }),
    ),
  );
}
