// Tasks: what the caller may see (the API filters by team), the queue with the engine's reasons, and
// a table of every task with its state, team, GPUs, priority and age.

import { loadTasks, TASK_LIST_LIMIT } from "../data.js";
import { age, h, table } from "../dom.js";
import { isActiveState, plural } from "../format.js";

export const title = "Tasks";
//: Refreshed when the event stream reports a change of the caller's tasks, polled less often meanwhile (app.js).
export const followsEvents = true;
//: Waiting tasks shown as cards, first in the queue first; the table lists the rest.
const QUEUE_CARDS = 10;

const STATES = [
  ["active", "Active (waiting or running)"],
  ["pending", "Waiting"],
  ["running", "Running"],
  ["finished", "Finished"],
  ["", "All"],
];

function filterOf(ctx) {
  return { state: ctx.params.get("state") ?? "active", team: ctx.params.get("team") ?? "" };
}

export async function load(ctx) {
  return loadTasks(ctx.api, filterOf(ctx));
}

/** The filter bar: rendered once per visit so that refreshing never steals focus from it. */
export function header(ctx) {
  const filter = filterOf(ctx);
  const teams = new Set(ctx.who?.teams || []);
  if (filter.team) teams.add(filter.team);
  const apply = (event) => {
    event.preventDefault();
    const form = event.target.closest("form");
    const q = new URLSearchParams();
    q.set("state", form.elements.state.value);
    if (form.elements.team.value.trim()) q.set("team", form.elements.team.value.trim());
    ctx.navigate(`#/tasks?${q}`);
  };
  return [
    h("h1", {}, "Tasks"),
    h(
      "form",
      { class: "filters", role: "search", "aria-label": "Filter tasks", onsubmit: apply, onchange: apply },
      h(
        "label",
        {},
        "Show ",
        h(
          "select",
          { name: "state" },
          STATES.map(([value, text]) => h("option", { value, selected: value === filter.state }, text)),
        ),
      ),
      h(
        "label",
        {},
        "Team ",
        h("input", { name: "team", list: "team-choices", value: filter.team, placeholder: "all my teams", size: 14 }),
        h("datalist", { id: "team-choices" }, [...teams].sort().map((t) => h("option", { value: t }))),
      ),
      h("button", { type: "submit", class: "secondary" }, "Apply"),
    ),
  ];
}

export function render(data, ctx) {
  const now = ctx.api.now();
  const filter = filterOf(ctx);
  const byId = new Map(data.tasks.map((t) => [t.id, t]));
  // The queue (every waiting task the caller may see, in the engine's order), with the task's own row
  // when the table has it; the queue entry alone carries name, team, GPUs and priority otherwise.
  const waiting = data.queue
    .filter((q) => !filter.team || q.team === filter.team)
    .filter(() => filter.state === "" || filter.state === "active" || filter.state === "pending")
    .map((q) => byId.get(q.task_id) || { id: q.task_id, name: q.name, team: q.team, gpus: q.gpus, priority: q.priority, queue: q });
  const shown = waiting.slice(0, QUEUE_CARDS);
  const truncated = data.tasks.length >= TASK_LIST_LIMIT;
  return [
    waiting.length
      ? h(
          "section",
          { "aria-labelledby": "queue-heading", class: "queue" },
          h("h2", { id: "queue-heading" }, `Waiting (${waiting.length})`),
          h("ol", { class: "queue-list" }, shown.map((t) => queueItem(t, now))),
          waiting.length > shown.length
            ? h("p", { class: "muted" }, `… and ${plural(waiting.length - shown.length, "more task")} waiting behind these.`)
            : null,
        )
      : null,
    h(
      "section",
      { "aria-labelledby": "tasks-heading" },
      h("h2", { id: "tasks-heading" }, filter.state === "active" ? "Active tasks" : "Tasks"),
      truncated
        ? h("p", { class: "muted" }, `The newest ${TASK_LIST_LIMIT} are shown; choose a team or a state to see others.`)
        : null,
      data.tasks.length ? tasksTable(data.tasks, now) : h("p", { class: "empty" }, emptyText(filter)),
    ),
  ];
}

function emptyText(filter) {
  const scope = filter.team ? ` in team ${filter.team}` : "";
  return filter.state === "active"
    ? `No task is waiting or running${scope}. Submit one, or show all tasks.`
    : `No tasks${scope} match this filter.`;
}

function queueItem(task, now) {
  const q = task.queue;
  const position = q ? `#${q.position}` : "#?";
  return h(
    "li",
    { class: "queue-item", dataset: { taskId: task.id } },
    h("span", { class: "queue-pos", "aria-label": q ? `position ${q.position} in the queue` : "position unknown" }, position),
    h(
      "div",
      {},
      h("a", { href: `#/tasks/${encodeURIComponent(task.id)}`, id: `queue-link-${task.id}` }, task.name || task.id),
      h(
        "span",
        { class: "muted" },
        ` · ${task.team} · ${plural(task.gpus, "GPU")} · ${task.priority} · waiting `,
        waited(task, now),
        q && q.team_position ? ` · #${q.team_position} in ${task.team}` : "",
      ),
      h("p", { class: "reason", dataset: { reasonCode: q?.reason_code || "" } }, reasonText(task)),
    ),
  );
}

function waited(task, now) {
  const since = task.queued_at || task.submitted_at;
  return age(since ? Date.parse(since) : task.queue.waiting_since_ms, now);
}

/**
 * Why a task waits, in words. The engine explains each team's first waiting task; a task further back
 * in its team's queue waits, first of all, for the ones ahead of it.
 */
export function reasonText(task) {
  const q = task.queue;
  if (q && !q.reason_code && q.team_position > 1) {
    const ahead = q.team_position - 1;
    return `Behind ${plural(ahead, "earlier task")} of team ${task.team} (a team's queue runs by priority, then age).`;
  }
  if (q && q.reason) return q.reason;
  if (task.message) return task.message;
  return "Waiting for the next scheduling cycle.";
}

function tasksTable(tasks, now) {
  return table({
    cls: "tasks stack",
    caption: "Tasks, newest first",
    columns: [["Task"], ["State"], ["Team"], ["GPUs", "num"], ["Pool"], ["Priority"], ["Age", "num"], ["Note"]],
    rows: tasks.map((t) => taskRow(t, now)),
  });
}

function taskRow(task, now) {
  const cell = (label, attrs, ...content) => h("td", { ...attrs, dataset: { label } }, ...content);
  return h(
    "tr",
    { dataset: { taskId: task.id, state: task.state } },
    h(
      "th",
      { scope: "row" },
      h("a", { href: `#/tasks/${encodeURIComponent(task.id)}`, id: `task-link-${task.id}` }, task.name || task.id),
      task.name ? h("div", { class: "muted mono small" }, task.id) : null,
    ),
    cell("State", {}, stateBadge(task.state)),
    cell("Team", {}, task.team),
    cell(
      "GPUs",
      { class: "num" },
      String(task.gpus),
      task.borrowed_gpus ? h("span", { class: "borrowed-note" }, ` (${task.borrowed_gpus} borrowed)`) : null,
    ),
    cell("Pool", {}, task.assigned_pool || task.pool || "any"),
    cell("Priority", {}, task.priority),
    cell("Age", { class: "num" }, age(Date.parse(task.submitted_at), now)),
    cell("Note", { class: "note" }, noteText(task)),
  );
}

function noteText(task) {
  if (task.state === "pending") {
    const q = task.queue;
    return [q ? h("strong", {}, `#${q.position} `) : null, reasonText(task)];
  }
  if (task.cancel_requested && isActiveState(task.state)) return "cancelling…";
  if (task.state === "failed" && task.exit_code !== null && task.exit_code !== undefined) return `exit code ${task.exit_code}`;
  if (task.restart_count) return `restarted ${plural(task.restart_count, "time")}`;
  return task.message || "";
}

const STATE_TEXT = {
  pending: "waiting",
  admitted: "admitted",
  running: "running",
  preempting: "preempting",
  succeeded: "succeeded",
  failed: "failed",
  cancelled: "cancelled",
};

export function stateBadge(state) {
  return h("span", { class: `badge state-${state}` }, STATE_TEXT[state] || state);
}
