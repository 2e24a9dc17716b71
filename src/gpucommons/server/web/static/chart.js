// Time-series charts in SVG: GPUs held over time (stacked by team, borrowed part hatched, with the
// capacity and quota lines), small line charts (waits, budget burn-down). Sizes are in a fixed
// viewBox; colours and the hatch come from CSS classes (the page's Content-Security-Policy forbids
// inline styles). Every chart is an image with a text alternative, and its numbers are in a table
// beside it (`numbersTable`), so nothing is shown only as a picture.

import { h, svg } from "./dom.js";

//: Default viewBox width: about the width the chart is shown at on a desktop, so 12px text reads as 12px.
const WIDE = 1100;
export const NARROW = 480;
const PAD = { left: 52, right: 12, top: 10, bottom: 26 };
const HOUR_MS = 3600000;
//: Tick spacings to choose from: round hours and days (times are UTC).
const TICK_STEPS = [1, 2, 3, 6, 12, 24, 48, 120, 168].map((hours) => hours * HOUR_MS);
//: Teams get colours in this order (series-0 … series-7 in app.css, light and dark).
export const SERIES_COUNT = 8;

export function seriesClass(index) {
  return `series-${index % SERIES_COUNT}`;
}

/** A "nice" upper bound for an axis: 1, 2 or 5 × 10^n at or above `value`. */
export function niceMax(value) {
  if (!(value > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * power >= value) return m * power;
  return 10 * power;
}

/** Axis ticks from 0 to `max` (a `niceMax`), at round steps: 5 of them when max/5 is round, else 4. */
function ticks(max) {
  const fifth = max / 5;
  const power = 10 ** Math.floor(Math.log10(fifth));
  const count = [1, 2, 5, 10].some((m) => Math.abs(fifth - m * power) < 1e-9 * max) ? 5 : 4;
  return Array.from({ length: count + 1 }, (_, i) => (i * max) / count);
}

/** The viewBox width that suits the screen: text in a chart then reads at about its nominal size. */
export function fitWidth() {
  return window.matchMedia?.("(max-width: 720px)").matches ? NARROW : WIDE;
}

function frame(width, height, label) {
  return svg("svg", {
    class: width <= NARROW ? "chart small" : "chart",
    viewBox: `0 0 ${width} ${height}`,
    role: "img",
    "aria-label": label,
    preserveAspectRatio: "xMidYMid meet",
  });
}

function axes(root, { width, height, yMax, yFormat, xTicks }) {
  const W = width;
  const plotH = height - PAD.top - PAD.bottom;
  const y = (v) => PAD.top + plotH - (plotH * v) / yMax;
  for (const v of ticks(yMax)) {
    root.appendChild(svg("line", { class: "grid", x1: PAD.left, x2: W - PAD.right, y1: y(v), y2: y(v) }));
    root.appendChild(svg("text", { class: "axis-label", x: PAD.left - 6, y: y(v) + 4, "text-anchor": "end" }, yFormat(v)));
  }
  for (const { x, text } of xTicks) {
    root.appendChild(svg("text", { class: "axis-label", x, y: height - 8, "text-anchor": "middle" }, text));
  }
  return y;
}

function stepPath(xs, tops, bottoms, y) {
  // A band between two step lines: along the tops left to right, back along the bottoms.
  let d = "";
  for (let i = 0; i < tops.length; i++) d += `${i ? "L" : "M"}${xs[i]},${y(tops[i])}L${xs[i + 1]},${y(tops[i])}`;
  for (let i = bottoms.length - 1; i >= 0; i--) d += `L${xs[i + 1]},${y(bottoms[i])}L${xs[i]},${y(bottoms[i])}`;
  return `${d}Z`;
}

function stepLine(xs, values, y) {
  let d = "";
  for (let i = 0; i < values.length; i++) d += `${i ? "L" : "M"}${xs[i]},${y(values[i])}L${xs[i + 1]},${y(values[i])}`;
  return d;
}

/** x positions of bucket edges (`starts` plus the end), and labelled ticks at round UTC times. */
function timeAxis(width, starts, endMs, formatTick, maxTicks) {
  const t0 = starts[0];
  const x = xOf(starts, endMs, width);
  const xs = [...starts.map(x), x(endMs)];
  const span = endMs - t0;
  const step = TICK_STEPS.find((s) => span / s <= maxTicks) || TICK_STEPS.at(-1);
  const xTicks = [];
  for (let t = Math.ceil(t0 / step) * step; t < endMs; t += step) xTicks.push({ x: x(t), text: formatTick(new Date(t)) });
  return { xs, xTicks };
}

/**
 * GPUs held over time, stacked by team. `series`: [{team, held[], borrowed[], nominal[]}] (one pool),
 * `starts`: bucket starts (ms), `endMs`: the window's end. Each team's band is its colour: solid
 * within its quota, hatched for the part above it. `capacity` draws the pool's capacity line; with a
 * single series the team's quota line is drawn (a step line, dashed).
 */
export function stackedGpuChart({ series, starts, endMs, capacity = null, label, formatTick, height = 260, width = WIDE }) {
  const W = width;
  const root = frame(width, height, label);
  const totals = starts.map((_, i) => series.reduce((acc, s) => acc + s.held[i], 0));
  const quotaMax = series.length === 1 ? Math.max(0, ...series[0].nominal) : 0;
  const yMax = niceMax(Math.max(1, capacity || 0, quotaMax, ...totals) * 1.05);
  const y = axes(root, { width, height, yMax, yFormat: (v) => `${Math.round(v * 10) / 10}`, xTicks: [] });
  const { xs, xTicks } = timeAxis(width, starts, endMs, formatTick, width <= NARROW ? 4 : 8);
  for (const t of xTicks) root.appendChild(svg("text", { class: "axis-label", x: t.x, y: height - 8, "text-anchor": "middle" }, t.text));
  const base = starts.map(() => 0);
  series.forEach((s, k) => {
    const owned = s.held.map((v, i) => base[i] + v - s.borrowed[i]);
    const top = s.held.map((v, i) => base[i] + v);
    const cls = seriesClass(s.colour ?? k);
    root.appendChild(svg("path", { class: `area owned ${cls}`, d: stepPath(xs, owned, base, y) }));
    if (s.borrowed.some((b) => b > 0)) {
      const band = stepPath(xs, top, owned, y);
      root.appendChild(svg("path", { class: `area borrowed ${cls}`, d: band }));
      root.appendChild(svg("path", { class: "area hatch", d: band }));
    }
    top.forEach((v, i) => (base[i] = v));
  });
  if (series.length === 1) {
    root.appendChild(svg("path", { class: "quota-line", d: stepLine(xs, series[0].nominal, y) }));
  }
  if (capacity) {
    root.appendChild(svg("line", { class: "capacity-line", x1: PAD.left, x2: W - PAD.right, y1: y(capacity), y2: y(capacity) }));
  }
  return root;
}

/**
 * Lines over days or buckets: `lines`: [{label, values[], cls, dashed}] aligned on `starts` (ms).
 * `extra` draws horizontal reference lines: [{value, cls}].
 */
export function lineChart({ lines, starts, endMs, label, formatTick, yFormat, extra = [], height = 200, width = WIDE }) {
  const W = width;
  const root = frame(width, height, label);
  const all = lines.flatMap((l) => l.values.filter((v) => v !== null && v !== undefined));
  const yMax = niceMax(Math.max(1e-9, ...all, ...extra.map((e) => e.value)) * 1.08);
  const y = axes(root, { width, height, yMax, yFormat, xTicks: [] });
  const { xs, xTicks } = timeAxis(width, starts, endMs, formatTick, width <= NARROW ? 4 : 8);
  for (const t of xTicks) root.appendChild(svg("text", { class: "axis-label", x: t.x, y: height - 8, "text-anchor": "middle" }, t.text));
  const mid = (i) => (xs[i] + xs[i + 1]) / 2;
  for (const e of extra) {
    root.appendChild(svg("line", { class: e.cls, x1: PAD.left, x2: W - PAD.right, y1: y(e.value), y2: y(e.value) }));
  }
  for (const l of lines) {
    let d = "";
    l.values.forEach((v, i) => {
      if (v === null || v === undefined) return;
      const x = l.at ? l.at[i] : mid(i);
      d += `${d ? "L" : "M"}${x},${y(v)}`;
      if (l.points !== false) root.appendChild(svg("circle", { class: `point ${l.cls}`, cx: x, cy: y(v), r: 3 }));
    });
    if (d) root.appendChild(svg("path", { class: `line ${l.cls}${l.dashed ? " dashed" : ""}`, d }));
  }
  return root;
}

/** x positions (in a chart's viewBox of `width`) of instants, for lines not aligned on buckets. */
export function xOf(starts, endMs, width = WIDE) {
  const t0 = starts[0];
  const span = Math.max(1, endMs - t0);
  return (t) => PAD.left + ((width - PAD.left - PAD.right) * (t - t0)) / span;
}

/** The chart in a frame that scrolls sideways on a narrow screen. */
export function chartFrame(chart, caption) {
  return h("figure", { class: "chart-frame" }, h("div", { class: "chart-wrap" }, chart), caption ? h("figcaption", { class: "muted small" }, caption) : null);
}

/** Colour key: [[cssClasses, text]]. */
export function seriesLegend(entries) {
  return h(
    "ul",
    { class: "legend", "aria-label": "Legend" },
    entries.map(([cls, text, kind]) =>
      h(
        "li",
        {},
        svg(
          "svg",
          { class: "legend-swatch", width: 18, height: 14, "aria-hidden": "true" },
          kind === "line"
            ? svg("line", { class: cls, x1: 0, x2: 18, y1: 7, y2: 7 })
            : svg("rect", { class: cls, x: 0, y: 0, width: 18, height: 14 }),
          kind === "hatched" ? svg("rect", { class: "area hatch", x: 0, y: 0, width: 18, height: 14 }) : null,
        ),
        text,
      ),
    ),
  );
}
