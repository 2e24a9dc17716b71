// One team: who is in it, its quota and limits, this month's use and cost against its budget with a
// burn-down projection, its tasks, its history, and the preemptions it suffered and caused (naming
// the other team). Everything as the API shows it to the caller (costs only to those who may read them).

import { chartFrame, fitWidth, lineChart, xOf } from "../chart.js";
import { loadTeam } from "../history_data.js";
import { age, h, table } from "../dom.js";
import { formatHours, formatMoney, formatTime, plural } from "../format.js";
import { gpuCharts, waitsCharts } from "./history.js";
import { stateBadge } from "./tasks.js";

export const title = "Team";
//: Refreshed when the event stream reports a change of the caller's tasks, polled less often meanwhile (app.js).
export const followsEvents = true;
export const refreshMs = 15000;

export async function load(ctx) {
  return loadTeam(ctx.api, ctx.args.name);
}

export function header(ctx) {
  return [h("p", { class: "back" }, h("a", { href: "#/" }, "← Overview"))];
}

export function render(data, ctx) {
  const { team } = data;
  return [
    h("h1", {}, `Team ${team.name}`, h("span", { class: "muted small" }, `cohort ${team.cohort}`)),
    h(
      "dl",
      { class: "stats wide" },
      stat("Members", team.members.length, "members"),
      stat("Running tasks", team.running_tasks, "running"),
      stat("Waiting tasks", team.pending_tasks, "pending"),
      team.costs ? stat("Cost this month", formatMoney(team.costs.total_cents, team.costs.currency), "cost") : null,
    ),
    section("quota", "Quota and limits", quotaTable(team)),
    team.costs || team.budget ? section("costs", `This month (${team.costs?.month || team.budget?.month})`, costs(team, ctx)) : null,
    section("preemptions", "Preemptions in the last 30 days", preemptions(team)),
    data.tasks ? section("tasks", "Latest tasks", tasksTable(data.tasks, ctx)) : null,
    data.gpus ? section("team-history", "GPUs held over the last 7 days", gpuCharts(data.gpus)) : null,
    data.waits ? waitsCharts(data.waits) : null,
    section("members", "Members", members(team)),
  ];
}

function section(id, heading, ...body) {
  return h("section", { "aria-labelledby": `${id}-heading`, id: `section-${id}` }, h("h2", { id: `${id}-heading` }, heading), ...body);
}

function stat(name, value, key) {
  return h("div", { class: `stat stat-${key}` }, h("dt", {}, name), h("dd", { dataset: { stat: key } }, String(value)));
}

const limit = (v) => (v === null || v === undefined ? "unlimited" : String(v));

function quotaTable(team) {
  return table({
    cls: "quota stack",
    caption: `Team ${team.name}'s quota per pool`,
    columns: [["Pool"], ["Nominal", "num"], ["Borrow limit", "num"], ["Lend limit", "num"], ["Used now", "num"], ["Borrowed now", "num"]],
    rows: team.quotas.map((q) =>
      h(
        "tr",
        { dataset: { pool: q.pool } },
        h("th", { scope: "row" }, `${q.pool}`, h("span", { class: "muted" }, q.gpu_type ? ` · ${q.gpu_type}` : "")),
        h("td", { class: "num", dataset: { col: "nominal" } }, String(q.nominal_gpus)),
        h("td", { class: "num" }, limit(q.borrow_limit_gpus)),
        h("td", { class: "num" }, limit(q.lend_limit_gpus)),
        h("td", { class: "num", dataset: { col: "used" } }, String(q.used_gpus)),
        h("td", { class: "num" }, String(q.borrowed_gpus)),
      ),
    ),
  });
}

function costs(team, ctx) {
  const c = team.costs;
  const b = team.budget;
  const currency = c?.currency || "USD";
  const parts = [];
  if (c) {
    parts.push(
      h(
        "dl",
        { class: "stats wide" },
        stat("GPU-hours", formatHours(c.gpu_hours), "gpu-hours"),
        stat("of which borrowed", formatHours(c.borrowed_gpu_hours), "borrowed-hours"),
        stat("Direct cost", formatMoney(c.direct_cents, currency), "direct"),
        stat("Total (with idle and admin shares)", formatMoney(c.total_cents, currency), "total"),
      ),
    );
  }
  if (b) parts.push(burnDown(b, currency, ctx));
  return parts;
}

function burnDown(b, currency, ctx) {
  const [y, m] = b.month.split("-").map(Number);
  const monthStart = Date.UTC(y, m - 1, 1);
  const monthEnd = Date.UTC(y, m, 1);
  const starts = [];
  for (let t = monthStart; t < monthEnd; t += 86400000) starts.push(t);
  const width = fitWidth();
  const x = xOf(starts, monthEnd, width);
  const now = Math.min(ctx.api.now(), monthEnd);
  const spentAt = b.days.map((d) => x(Math.min(Date.parse(`${d.day}T00:00:00Z`) + 86400000, now)));
  const lines = [
    { label: "spent", values: b.days.map((d) => d.spent_cents / 100), at: spentAt, cls: "spend" },
    { label: "projected", values: [b.spent_cents / 100, b.projected_cents / 100], at: [x(now), x(monthEnd)], cls: "projection", dashed: true, points: false },
  ];
  const money = (v) => formatMoney(Math.round(v * 100), currency).replace(/\.00$/, "");
  const verdict =
    b.spent_cents >= b.budget_cents
      ? `The budget is spent (${b.enforce}).`
      : b.exhausted_at
        ? `At this rate the budget runs out on ${formatTime(b.exhausted_at).slice(0, 10)}.`
        : `At this rate the month ends at ${formatMoney(b.projected_cents, currency)}, within the budget.`;
  return h(
    "div",
    { class: "burn-down", dataset: { projected: b.projected_cents, budget: b.budget_cents, spent: b.spent_cents } },
    h("h3", {}, "Budget burn-down"),
    h(
      "p",
      { id: "budget-verdict" },
      `${formatMoney(b.spent_cents, currency)} of ${formatMoney(b.budget_cents, currency)} spent (direct cost so far), `,
      `${formatMoney(Math.round(b.rate_cents_per_day), currency)} a day over the last days. `,
      h("strong", {}, verdict),
    ),
    chartFrame(
      lineChart({
        lines,
        starts,
        endMs: monthEnd,
        label: `Spend so far and projected against the budget of ${formatMoney(b.budget_cents, currency)}: ${verdict}`,
        formatTick: (d) => d.toISOString().slice(5, 10),
        yFormat: money,
        extra: [{ value: b.budget_cents / 100, cls: "budget-line" }],
        height: 220,
        width,
      }),
      "Solid: spend so far; dashed: at the recent rate to the month's end; the horizontal line is the budget.",
    ),
  );
}

function preemptions(team) {
  const p = team.preemptions;
  if (!p.suffered.length && !p.caused.length) return h("p", { class: "empty" }, "None: no task of this team was preempted and none preempted another.");
  const sides = (list, cls, caption, what) =>
    table({
      cls: `${cls} stack`,
      caption,
      showCaption: true,
      columns: [[what], ["Preemptions", "num"], ["GPUs", "num"]],
      rows: list.map((s) =>
        h("tr", { dataset: { team: s.team } }, h("th", { scope: "row" }, s.team), h("td", { class: "num" }, String(s.count)), h("td", { class: "num" }, String(s.gpus))),
      ),
    });
  return [
    p.suffered.length ? sides(p.suffered, "suffered", `Suffered: ${team.name}'s tasks preempted, by the team whose task took the GPUs`, "By team") : null,
    p.caused.length ? sides(p.caused, "caused", `Caused: other tasks preempted for ${team.name}'s, by the team that lost a task`, "Of team") : null,
    h(
      "details",
      { class: "numbers" },
      h("summary", {}, `The latest ${plural(p.recent.length, "preemption")}`),
      table({
        cls: "preemption-list",
        caption: "Latest preemptions involving this team",
        columns: [["When"], ["Lost a task"], ["Took the GPUs"], ["Why"], ["GPUs", "num"]],
        rows: p.recent.map((r) =>
          h(
            "tr",
            {},
            h("td", { class: "nowrap" }, formatTime(r.at)),
            h("td", {}, taskRef(r.victim_team, r.victim_task_id)),
            h("td", {}, taskRef(r.preemptor_team, r.preemptor_task_id)),
            h("td", {}, r.reason.replaceAll("_", " ")),
            h("td", { class: "num" }, String(r.gpus)),
          ),
        ),
      }),
    ),
  ];
}

function taskRef(team, id) {
  return id ? [team, " (", h("a", { href: `#/tasks/${encodeURIComponent(id)}` }, id), ")"] : team;
}

function tasksTable(tasks, ctx) {
  if (!tasks.length) return h("p", { class: "empty" }, "No tasks yet.");
  const now = ctx.api.now();
  return table({
    cls: "team-tasks stack",
    caption: "The team's latest tasks, newest first",
    columns: [["Task"], ["State"], ["GPUs", "num"], ["Priority"], ["Submitted"]],
    rows: tasks.slice(0, 20).map((t) =>
      h(
        "tr",
        { dataset: { taskId: t.id } },
        h("td", {}, h("a", { href: `#/tasks/${encodeURIComponent(t.id)}` }, t.name || t.id)),
        h("td", {}, stateBadge(t.state)),
        h("td", { class: "num" }, String(t.gpus)),
        h("td", {}, t.priority),
        h("td", { class: "nowrap" }, age(Date.parse(t.submitted_at), now), " ago"),
      ),
    ),
  });
}

function members(team) {
  if (!team.members.length) {
    return h("p", { class: "empty" }, "No member in the directory yet (members come from the groups the policy names for the team).");
  }
  return h(
    "ul",
    { class: "members" },
    team.members.map((m) => h("li", { dataset: { user: m.user_name } }, m.display_name, h("span", { class: "muted" }, ` (${m.user_name}${m.role === "admin" ? ", team admin" : ""})`))),
  );
}
