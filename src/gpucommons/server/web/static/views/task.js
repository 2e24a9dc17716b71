// One task: its state and why, what it asked for and got, its events, the tail of its log, and a
// cancel button (two steps, so a stray click never kills a week of training).

import { ApiError } from "../api.js";
import { cancelTask, LOG_TAIL_LINES, loadTask } from "../data.js";
import { age, h, table } from "../dom.js";
import { formatTime, isActiveState, joinCommand, plural } from "../format.js";
import { loadTimeline } from "../history_data.js";
import { estimateCallout, timelineSection } from "./task_timeline.js";
import { reasonText, stateBadge } from "./tasks.js";

export const title = "Task";

// What the person was doing survives a refresh (which redraws the page): an open cancel confirmation,
// and where they scrolled the log to (following its end unless they scrolled up).
const ui = { confirming: null, logPinned: true, logScrollTop: 0 };

export async function load(ctx) {
  const [data, timeline] = await Promise.all([loadTask(ctx.api, ctx.args.id), loadTimeline(ctx.api, ctx.args.id).catch(() => null)]);
  return { ...data, timeline: steady(timeline) };
}

/** Figures that move with the clock, to the minute: the page is redrawn when something happened, not every poll. */
function steady(timeline) {
  if (!timeline) return null;
  const minute = (x) => Math.round(x / 60) * 60;
  const toMinute = (iso) => (iso ? new Date(Math.round(Date.parse(iso) / 60000) * 60000).toISOString() : iso);
  const attempts = timeline.attempts.map((a) => (a.ended_at ? a : { ...a, ran_seconds: minute(a.ran_seconds), waited_seconds: a.admitted_at ? a.waited_seconds : minute(a.waited_seconds) }));
  const e = timeline.estimate;
  const estimate = e && { ...e, likely: toMinute(e.likely), earliest: toMinute(e.earliest), latest: toMinute(e.latest) };
  return { ...timeline, attempts, estimate };
}

export function header() {
  Object.assign(ui, { confirming: null, logPinned: true, logScrollTop: 0 }); // a new visit starts afresh
  return [h("p", { class: "back" }, h("a", { href: "#/tasks" }, "← All tasks"))];
}

export function render(data, ctx) {
  const { task, events, log } = data;
  const now = ctx.api.now();
  const pending = task.state === "pending";
  return [
    h("h1", {}, task.name || task.id, " ", stateBadge(task.state)),
    pending ? waitingCallout(task, data.queue, now) : null,
    pending ? estimateCallout(data.timeline?.estimate, now) : null,
    task.message && !pending ? h("p", { class: "callout" }, task.message) : null,
    actions(task, ctx),
    h(
      "section",
      { "aria-labelledby": "facts-heading" },
      h("h2", { id: "facts-heading", class: "visually-hidden" }, "Details"),
      facts(task, now),
    ),
    timelineSection(data.timeline),
    h(
      "section",
      { "aria-labelledby": "events-heading" },
      h("h2", { id: "events-heading" }, "Events"),
      events.length ? eventsTable(events) : h("p", { class: "empty" }, "No events yet."),
    ),
    h(
      "section",
      { "aria-labelledby": "log-heading" },
      h("h2", { id: "log-heading" }, "Log ", h("span", { class: "muted small" }, `(last ${LOG_TAIL_LINES} lines)`)),
      log.error
        ? h("p", { class: "empty" }, `The log is not available: ${log.error}`)
        : h(
            "pre",
            { class: "log", id: "log-tail", tabindex: 0, "aria-label": `Last ${LOG_TAIL_LINES} lines of the task's log` },
            log.text || "(no output yet)",
          ),
    ),
  ];
}

/** Follow the log's newest line, as a terminal would, unless the reader scrolled up. */
export function afterRender(root) {
  const pre = root.querySelector("#log-tail");
  if (!pre) return;
  pre.scrollTop = ui.logPinned ? pre.scrollHeight : ui.logScrollTop;
  pre.addEventListener("scroll", () => {
    ui.logPinned = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 8;
    ui.logScrollTop = pre.scrollTop;
  });
}

function waitingCallout(task, queue, now) {
  const waited = age(Date.parse(task.queued_at || task.submitted_at), now);
  const place = queue
    ? `#${queue.position} in the cluster's queue, #${queue.team_position} in team ${task.team}'s`
    : "in the queue";
  return h(
    "div",
    { class: "callout waiting" },
    h("p", {}, h("strong", {}, "Waiting ", waited), ` · ${place}`),
    h("p", { class: "reason", dataset: { reasonCode: queue?.reason_code || "" } }, reasonText({ ...task, queue })),
  );
}

/**
 * Whether to offer *Cancel*: platform admins and the team's admins may cancel any of its tasks, members
 * their own. Only a hint for the page; the server decides (and says why when it refuses).
 */
function mayCancel(task, who) {
  if (!who) return true;
  return Boolean(who.platform_admin || (who.admin_of || []).includes(task.team) || task.submitted_by === who.subject);
}

function actions(task, ctx) {
  if (!isActiveState(task.state)) return null;
  if (!mayCancel(task, ctx.who)) return null;
  if (task.cancel_requested) return h("p", { class: "actions muted" }, "Cancellation requested; the task is stopping.");
  const status = h("span", { class: "action-status", role: "status", "aria-live": "polite" });
  const open = ui.confirming === task.id;
  const confirm = h(
    "span",
    { class: "confirm", hidden: !open },
    "Stop this task? ",
    h("button", { type: "button", class: "danger", id: "cancel-confirm", onclick: doCancel }, "Yes, cancel it"),
    " ",
    h("button", { type: "button", class: "secondary", onclick: () => toggle(false) }, "Keep it"),
  );
  const start = h(
    "button",
    { type: "button", class: "danger-outline", id: "cancel-button", hidden: open, onclick: () => toggle(true) },
    "Cancel task",
  );

  function toggle(opening) {
    ui.confirming = opening ? task.id : null;
    start.hidden = opening;
    confirm.hidden = !opening;
    (opening ? confirm.querySelector("button") : start).focus();
  }

  async function doCancel() {
    confirm.querySelectorAll("button").forEach((b) => (b.disabled = true));
    status.textContent = "Cancelling…";
    try {
      await cancelTask(ctx.api, task.id);
      ui.confirming = null;
      status.textContent = "Cancellation requested.";
      ctx.refresh();
    } catch (e) {
      status.textContent = `Could not cancel: ${e instanceof ApiError ? e.explanation : e}`;
      confirm.querySelectorAll("button").forEach((b) => (b.disabled = false));
    }
  }

  return h("div", { class: "actions" }, start, confirm, " ", status);
}

function facts(task, now) {
  const rows = [
    ["Task id", h("span", { class: "mono" }, task.id)],
    ["Team", task.team],
    ["GPUs", gpusText(task)],
    ["Pool", task.assigned_pool ? task.assigned_pool + (task.pool ? "" : " (any of the team's pools)") : task.pool || "any of the team's pools"],
    ["Priority", `${task.priority}${task.priority_value !== undefined ? ` (${task.priority_value})` : ""}`],
    ["Checkpoint", task.checkpoint || "none declared"],
    ["Submitted", timeAndAge(task.submitted_at, now, task.submitted_by ? ` by ${task.submitted_by}` : "")],
    ["Started", task.started_at ? timeAndAge(task.started_at, now) : "–"],
    ["Finished", task.finished_at ? formatTime(task.finished_at) : "–"],
    exitRow(task),
    ["Restarts", `${task.restart_count || 0} (${plural(task.preemptions || 0, "preemption")})`],
    ["Last checkpoint", task.last_checkpoint_at ? timeAndAge(task.last_checkpoint_at, now) : "–"],
    ["Work lost to preemption", task.lost_gpu_seconds ? `${(task.lost_gpu_seconds / 3600).toFixed(2)} GPU-hours` : "none"],
    ["Command", h("code", { class: "command" }, joinCommand(task.command))],
  ];
  return h("dl", { class: "facts" }, rows.map(([k, v]) => h("div", {}, h("dt", {}, k), h("dd", {}, v))));
}

const FINAL = new Set(["succeeded", "failed", "cancelled"]);

// A task that runs again still carries the exit code of the attempt that was preempted: say whose
// it is rather than show "Exit code 143" beside "running".
function exitRow(task) {
  if (task.exit_code === null || task.exit_code === undefined) return ["Exit code", "–"];
  if (FINAL.has(task.state)) return ["Exit code", String(task.exit_code)];
  return ["Previous attempt", `ended with exit code ${task.exit_code} (attempt ${task.restart_count} is ${task.state})`];
}

function gpusText(task) {
  let text = String(task.gpus);
  if (task.gpu_indices && task.gpu_indices.length) text += ` (indices ${task.gpu_indices.join(", ")})`;
  if (task.borrowed_gpus) text += `, ${task.borrowed_gpus} borrowed`;
  return text;
}

function timeAndAge(iso, now, suffix = "") {
  return [formatTime(iso), " (", age(Date.parse(iso), now), " ago)", suffix];
}

function eventsTable(events) {
  const sorted = [...events].sort((a, b) => (a.id ?? 0) - (b.id ?? 0));
  return table({
    cls: "events",
    caption: "Task events, oldest first",
    columns: [["Time"], ["Event"], ["Message"]],
    rows: sorted.map((e) =>
      h(
        "tr",
        {},
        h("td", { class: "nowrap" }, formatTime(e.at)),
        h("td", {}, e.kind, e.to_state ? h("span", { class: "muted" }, ` ${e.from_state || "–"} → ${e.to_state}`) : null),
        h("td", {}, e.message || ""),
      ),
    ),
  });
}
