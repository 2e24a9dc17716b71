import { formatDuration } from "./format.js";

// Building DOM nodes safely: every piece of data goes in as text, never as HTML, so a task name or a
// log line can never inject markup or script into the dashboard (the API token lives in this page).

/**
 * h("a", {href: "#/tasks", class: "x", onclick: fn}, "text", childNode, [more, children])
 * Attributes starting with "on" become event listeners; `null`/`false` attributes and children are skipped.
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else if (key === "dataset") {
      Object.assign(el.dataset, value);
    } else if (value === true) {
      el.setAttribute(key, "");
    } else {
      el.setAttribute(key, String(value));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else if (child instanceof Node) el.appendChild(child);
    else el.appendChild(document.createTextNode(String(child)));
  }
}

/** Replace everything inside `el` with `children`. */
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

/** A small SVG element (bars are SVG so they scale with the layout and print cleanly). */
export function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value !== null && value !== undefined) el.setAttribute(key, String(value));
  }
  for (const child of children) {
    if (child instanceof Node) el.appendChild(child);
    else if (child !== null && child !== undefined) el.appendChild(document.createTextNode(String(child)));
  }
  return el;
}

/**
 * A table in a frame that scrolls sideways when the screen is narrow. `columns` are `[heading, class]`
 * pairs (class optional); `rows` are `<tr>` nodes. The caption is for screen readers unless `showCaption`.
 * Each cell learns its column's heading (`data-label`): a `stack` table shows it on a narrow screen,
 * where its rows become cards.
 */
export function table({ cls, caption, columns, rows, showCaption = false }) {
  for (const row of rows) {
    [...row.children].forEach((cell, i) => {
      if (cell.tagName === "TD" && !cell.dataset.label && columns[i]) cell.dataset.label = columns[i][0];
    });
  }
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      { class: cls },
      h("caption", { class: showCaption ? null : "visually-hidden" }, caption),
      h("thead", {}, h("tr", {}, columns.map(([text, c]) => h("th", { scope: "col", class: c || null }, text)))),
      h("tbody", {}, rows),
    ),
  );
}

/**
 * "5m": how long ago `fromMs` was, kept current by the shell's one-second timer (`tickAges`) without
 * redrawing the page, so ages move on even while the data stays the same.
 */
export function age(fromMs, nowMs) {
  return h("span", { class: "age", dataset: { ageFrom: String(fromMs) } }, formatDuration((nowMs - fromMs) / 1000));
}

/** Bring every age under `root` up to `nowMs`. */
export function tickAges(root, nowMs) {
  for (const el of root.querySelectorAll("[data-age-from]")) {
    const text = formatDuration((nowMs - Number(el.dataset.ageFrom)) / 1000);
    if (el.textContent !== text) el.textContent = text;
  }
}
