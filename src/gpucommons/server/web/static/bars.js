// Usage bars. SVG rather than styled divs: widths are attributes (the page's Content-Security-Policy
// forbids inline styles), and the borrowed part is hatched as well as coloured, so it reads without colour.

import { h, svg } from "./dom.js";

const HEIGHT = 18;

function pct(value, scale) {
  if (!scale || scale <= 0) return 0;
  return Math.max(0, Math.min(100, (100 * value) / scale));
}

function bar(cls, label, ...parts) {
  return svg(
    "svg",
    { class: cls, role: "img", "aria-label": label, width: "100%", height: HEIGHT, preserveAspectRatio: "none" },
    svg("title", {}, label),
    ...parts,
  );
}

function rect(cls, fromPct, widthPct) {
  if (widthPct <= 0) return null;
  return svg("rect", { class: cls, x: `${fromPct}%`, y: 0, width: `${widthPct}%`, height: HEIGHT });
}

/** The used part of a bar: held within quota (solid), then borrowed (coloured and hatched). */
function usedSegments(owned, borrowed, scale) {
  const ownedPct = pct(owned, scale);
  const borrowedPct = pct(borrowed, scale);
  return [
    rect("bar-owned", 0, ownedPct),
    rect("bar-borrowed", ownedPct, borrowedPct),
    rect("bar-borrowed-hatch", ownedPct, borrowedPct),
  ];
}

function tick(cls, value, scale) {
  const x = `${pct(value, scale)}%`;
  return svg("line", { class: cls, x1: x, x2: x, y1: 0, y2: HEIGHT });
}

/**
 * A team's usage in one pool against its nominal quota: GPUs held within quota (solid), borrowed
 * above it (hatched), the rest of the quota (pale), a tick at the nominal quota and a dashed one at
 * nominal + borrow limit. `scale` is the same for every team of a pool, so bars compare at a glance.
 */
export function quotaBar({ used, borrowed, nominal, scale, label, limit = null }) {
  return bar(
    "bar",
    label,
    rect("bar-track", 0, 100),
    rect("bar-quota", 0, pct(nominal, scale)),
    ...usedSegments(Math.max(0, used - borrowed), borrowed, scale),
    nominal > 0 ? tick("bar-nominal", nominal, scale) : null,
    // The most the team may hold (nominal + borrow limit), when the policy caps it.
    limit !== null && limit > nominal ? tick("bar-limit", limit, scale) : null,
  );
}

/** A pool's capacity split into GPUs used within quota, borrowed, and idle. */
export function poolBar({ owned, borrowed, capacity, label }) {
  const scale = capacity || owned + borrowed || 1;
  return bar("bar bar-pool", label, rect("bar-idle", 0, 100), ...usedSegments(owned, borrowed, scale));
}

/** The colour key shown with the bars: [[cssClass, text], ...] → list items. */
export function legend(entries) {
  return h(
    "ul",
    { class: "legend", "aria-label": "Legend" },
    entries.map(([cls, text]) =>
      h(
        "li",
        {},
        svg(
          "svg",
          { class: "legend-swatch", width: 14, height: 14, "aria-hidden": "true" },
          cls === "bar-limit-key"
            ? svg("line", { class: "bar-limit", x1: 7, x2: 7, y1: 0, y2: 14 })
            : svg("rect", { class: cls, x: 0, y: 0, width: 14, height: 14 }),
          cls === "bar-borrowed" ? svg("rect", { class: "bar-borrowed-hatch", x: 0, y: 0, width: 14, height: 14 }) : null,
        ),
        text,
      ),
    ),
  );
}
