// Cluster overview: per pool, GPUs used / borrowed / idle; per team, a bar of usage against its nominal
// quota (borrowed part hatched) and its queue.

import { legend, poolBar, quotaBar } from "../bars.js";
import { loadOverview } from "../data.js";
import { h, table } from "../dom.js";
import { plural } from "../format.js";
import { historySection, loadHistory, windowParam } from "./history.js";

export const title = "Overview";
//: Refreshed when the event stream reports a change of the caller's tasks, polled less often meanwhile (app.js).
export const followsEvents = true;

export async function load(ctx) {
  const [overview, history] = await Promise.all([loadOverview(ctx.api), loadHistory(ctx.api, windowParam(ctx))]);
  return { ...overview, history };
}

export function render(data) {
  const { teams, pools } = data;
  return [
    h("h1", {}, "Cluster overview"),
    h(
      "section",
      { "aria-labelledby": "pools-heading" },
      h("h2", { id: "pools-heading" }, "Pools"),
      pools.length
        ? h("div", { class: "cards" }, pools.map(poolCard))
        : h("p", { class: "empty" }, "No pools visible to you."),
    ),
    h(
      "section",
      { "aria-labelledby": "teams-heading" },
      h("h2", { id: "teams-heading" }, "Teams"),
      legend([
        ["bar-owned", "used within quota"],
        ["bar-borrowed", "borrowed (above quota)"],
        ["bar-quota", "unused quota"],
        ["bar-nominal-key", "nominal quota"],
        ["bar-limit-key", "borrow limit"],
      ]),
      teams.length ? teamsTable(teams, pools) : h("p", { class: "empty" }, "No teams visible to you."),
    ),
    historySection(data.history),
  ];
}

function poolCard(pool) {
  const capacity = pool.capacity;
  const label =
    `${pool.name}: ${pool.owned} GPUs used within quota, ${pool.borrowed} borrowed` +
    (capacity === null ? "" : `, ${pool.idle} idle of ${capacity}`);
  return h(
    "article",
    { class: "card pool", "aria-label": `Pool ${pool.name}`, dataset: { pool: pool.name } },
    h("h3", {}, pool.name, pool.gpuType ? h("span", { class: "muted" }, ` · ${pool.gpuType}`) : null),
    h(
      "dl",
      { class: "stats" },
      stat("Used", pool.used, "used"),
      stat("Borrowed", pool.borrowed, "borrowed"),
      stat("Idle", pool.idle === null ? "–" : pool.idle, "idle"),
      stat("Capacity", capacity === null ? "–" : capacity, "capacity"),
    ),
    poolBar({ owned: pool.owned, borrowed: pool.borrowed, capacity, label }),
  );
}

function stat(name, value, key) {
  return h("div", { class: `stat stat-${key}` }, h("dt", {}, name), h("dd", { dataset: { stat: key } }, String(value)));
}

function teamsTable(teams, pools) {
  // One scale per pool, shared by all its teams' bars, so lengths compare across teams.
  const scale = new Map();
  for (const pool of pools) {
    let max = 1;
    for (const tp of pool.teams) max = Math.max(max, tp.nominal_gpus || 0, tp.used_gpus || 0, maxUsage(tp) || 0);
    scale.set(pool.name, max * 1.04); // a little room, so a mark at the end of the scale stays visible
  }
  const rows = [];
  for (const team of [...teams].sort((a, b) => a.name.localeCompare(b.name))) {
    const teamPools = team.pools && team.pools.length ? team.pools : [null];
    teamPools.forEach((tp, i) => {
      const first = i === 0;
      const span = teamPools.length;
      rows.push(
        h(
          "tr",
          { dataset: { team: team.name, pool: tp ? tp.pool : "" } },
          first ? h("th", { scope: "row", rowspan: span }, h("a", { href: `#/teams/${encodeURIComponent(team.name)}`, id: `team-link-${team.name}` }, team.name)) : null,
          h("td", {}, tp ? tp.pool : "–"),
          h(
            "td",
            { class: "bar-cell" },
            tp ? teamBar(team, tp, scale.get(tp.pool) || 1) : null,
            // On a narrow screen the number columns give way to this caption under the bar.
            tp ? h("div", { class: "bar-caption narrow-only", "aria-hidden": "true" }, captionText(tp)) : null,
          ),
          h("td", { class: "num wide-only", dataset: { col: "used" } }, tp ? `${tp.used_gpus} / ${tp.nominal_gpus}` : "–"),
          h("td", { class: "num wide-only", dataset: { col: "borrowed" } }, tp ? String(tp.borrowed_gpus) : "–"),
          first
            ? h(
                "td",
                { class: "num", rowspan: span, dataset: { col: "queue" } },
                queueText(team),
              )
            : null,
        ),
      );
    });
  }
  return table({
    cls: "teams",
    caption: "GPU usage against nominal quota, per team and pool",
    columns: [
      ["Team"],
      ["Pool"],
      ["Usage vs quota", "bar-cell"],
      ["GPUs used / quota", "num wide-only"],
      ["Borrowed", "num wide-only"],
      ["Queue", "num"],
    ],
    rows,
  });
}

function teamBar(team, tp, scale) {
  const limit = tp.borrow_limit_gpus === null || tp.borrow_limit_gpus === undefined ? "" : `, borrow limit ${tp.borrow_limit_gpus}`;
  const label =
    `${team.name} in ${tp.pool}: ${tp.used_gpus} of ${tp.nominal_gpus} quota GPUs used` +
    (tp.borrowed_gpus ? `, ${tp.borrowed_gpus} borrowed` : "") +
    limit;
  return quotaBar({ used: tp.used_gpus, borrowed: tp.borrowed_gpus, nominal: tp.nominal_gpus, scale, label, limit: maxUsage(tp) });
}

/** Nominal quota + borrow limit: the most a team may hold in a pool (null: borrowing is unlimited). */
function maxUsage(tp) {
  return tp.borrow_limit_gpus === null || tp.borrow_limit_gpus === undefined ? null : tp.nominal_gpus + tp.borrow_limit_gpus;
}

function captionText(tp) {
  return `${tp.used_gpus} / ${tp.nominal_gpus} GPUs` + (tp.borrowed_gpus ? ` · ${tp.borrowed_gpus} borrowed` : "");
}

function queueText(team) {
  const n = team.pending_tasks || 0;
  if (!n) return "0";
  return h(
    "a",
    {
      href: `#/tasks?team=${encodeURIComponent(team.name)}&state=pending`,
      title: `${plural(n, "task")} waiting`,
      id: `queue-link-${team.name}`,
    },
    `${n}`,
    h("span", { class: "muted" }, ` (${team.pending_gpus || 0} GPUs)`),
  );
}
