// What each page needs from the server, in one place: the pages render plain objects and never know
// endpoint paths. Team- and task-level data comes from the public API (/api/v1), which filters it by
// what the caller may see; /ui/api/context adds who the caller is and the cluster's shape.

import { ApiError, items } from "./api.js";

const TERMINAL = ["succeeded", "failed", "cancelled"];
const ACTIVE = ["pending", "admitted", "running", "preempting"];

/** Who the caller is, the pools (capacity, used, borrowed, idle) and the priority classes. 401 if signed out. */
export function loadContext(api) {
  return api.request("GET", "/ui/api/context", { absolute: true });
}

/** Teams with their per-pool quota and usage (the ones the caller may see) and the cluster's pools. */
export async function loadOverview(api) {
  const [teams, context] = await Promise.all([api.get("/teams").then(items), loadContext(api)]);
  return { teams, pools: summarisePools(teams, context.pools) };
}

/**
 * Per pool: the cluster-wide numbers (capacity, used, borrowed, idle) and the visible teams' rows.
 * `owned` is what is used within quota: the solid part of the pool's bar.
 */
function summarisePools(teams, pools) {
  return pools.map((p) => ({
    name: p.name,
    gpuType: p.gpu_type,
    capacity: p.capacity_gpus,
    used: p.used_gpus,
    borrowed: p.borrowed_gpus,
    owned: Math.max(0, p.used_gpus - p.borrowed_gpus),
    idle: p.idle_gpus,
    teams: teams.flatMap((t) => (t.pools || []).filter((tp) => tp.pool === p.name).map((tp) => ({ team: t.name, ...tp }))),
  }));
}

/**
 * The waiting tasks, in the engine's order. Each says when it joined the queue (`queued_at`, server
 * time), rounded to 5 s, so a page is redrawn only when something changed; `waiting_seconds` serves
 * servers that do not send it yet (it grows with every poll, and an answer reused after a 304 keeps the
 * value it had).
 */
async function loadQueue(api, team = "") {
  const queue = items(await api.get("/queue", { team }));
  const now = api.now();
  return queue.map(({ waiting_seconds: waited, queued_at: queuedAt, ...q }) => ({
    ...q,
    waiting_since_ms: Math.round((queuedAt ? Date.parse(queuedAt) : now - 1000 * waited) / 5000) * 5000,
  }));
}

//: The task table shows the newest this many: enough to find one, small enough to poll every few seconds.
export const TASK_LIST_LIMIT = 200;

/** The caller's visible tasks, newest first, each pending one with its queue position and reason. */
export async function loadTasks(api, { state = "", team = "" } = {}) {
  const states = state === "active" ? ACTIVE : state === "finished" ? TERMINAL : state ? [state] : [];
  const [tasks, queue] = await Promise.all([
    api.get("/tasks", { team, state: states, limit: TASK_LIST_LIMIT }).then(items),
    loadQueue(api, team),
  ]);
  const byId = new Map(queue.map((q) => [q.task_id, q]));
  const list = tasks.map((t) => ({ ...t, queue: byId.get(t.id) || null }));
  list.sort((a, b) => (b.seq ?? 0) - (a.seq ?? 0));
  return { tasks: list, queue };
}

export const LOG_TAIL_LINES = 200;
//: Of a first read, only the last bytes are decoded: plenty for 200 lines, cheap for a huge log.
const LOG_DECODE_BYTES = 256 * 1024;

/**
 * The last lines of a task's log, fetched incrementally: the API serves the log from a byte offset, so
 * each refresh after the first reads only what the task wrote since the previous one.
 */
class LogTail {
  constructor() {
    this.offset = 0;
    this.lines = [];
    this.partial = "";
    this.decoder = new TextDecoder();
  }

  async refresh(api, path) {
    const response = await api.request("GET", `${path}/logs`, { query: { offset: this.offset }, accept: "text/plain", raw: true });
    const bytes = new Uint8Array(await response.arrayBuffer());
    if (!bytes.length) return;
    const cut = Math.max(0, bytes.length - LOG_DECODE_BYTES);
    this.offset += bytes.length;
    let text = this.partial + this.decoder.decode(bytes.subarray(cut), { stream: true });
    if (cut > 0) text = text.slice(text.indexOf("\n") + 1); // drop the line the cut went through
    const parts = text.split("\n");
    this.partial = parts.pop();
    this.lines = this.lines.concat(parts).slice(-LOG_TAIL_LINES);
  }

  get text() {
    return this.lines.concat(this.partial ? [this.partial] : []).slice(-LOG_TAIL_LINES).join("\n");
  }
}

const logTails = new Map();

/** One task with its events, the tail of its log and (while pending) its place in the queue. */
export async function loadTask(api, id) {
  const path = `/tasks/${encodeURIComponent(id)}`;
  const task = await api.get(path); // 404 / 403 surface as the page's error
  const [events, log, queue] = await Promise.all([
    api.get(`${path}/events`).then(items).catch(() => []),
    loadLogTail(api, id, path),
    task.state === "pending" ? loadQueue(api, task.team).catch(() => []) : [],
  ]);
  return { task, events, log, queue: queue.find((q) => q.task_id === id) || null };
}

async function loadLogTail(api, id, path) {
  if (!logTails.has(id)) {
    logTails.clear(); // one task's tail at a time is all a page shows
    logTails.set(id, new LogTail());
  }
  const tail = logTails.get(id);
  try {
    await tail.refresh(api, path);
    return { text: tail.text, error: null };
  } catch (e) {
    return { text: tail.text, error: e instanceof ApiError ? e.explanation : String(e) };
  }
}

export function cancelTask(api, id) {
  return api.post(`/tasks/${encodeURIComponent(id)}/cancel`);
}

export function submitTask(api, request) {
  return api.post("/tasks", request);
}

/** Choices for the submit form: the teams the caller may submit to, the pools, the priority classes. */
export async function loadSubmitOptions(api) {
  const context = await loadContext(api);
  const me = context.me;
  return {
    teams: me.platform_admin ? context.team_names : me.teams,
    pools: context.pools.map((p) => p.name),
    classes: context.priority_classes,
    defaultClass: context.default_priority_class,
  };
}

/** `[start, end)` of a "YYYY-MM" month, as ISO-8601 UTC. */
function monthWindow(month) {
  const [y, m] = month.split("-").map(Number);
  const start = new Date(Date.UTC(y, m - 1, 1));
  const end = new Date(Date.UTC(y, m, 1));
  return { start: start.toISOString(), end: end.toISOString() };
}

/**
 * GPU-hours per team in the month, from the ledger (docs/design.md, contract 4 intervals, cut at the month's edges by
 * the API; an open interval counts up to now), with the part above quota: what the usage page plots.
 */
function gpuHoursByTeam(intervals, nowMs) {
  const teams = new Map();
  for (const i of intervals) {
    const start = Date.parse(i.start);
    const end = i.end ? Date.parse(i.end) : nowMs;
    const hours = Math.max(0, end - start) / 3600000;
    const t = teams.get(i.team) || { team: i.team, gpuHours: 0, borrowedHours: 0, tasks: new Set() };
    t.gpuHours += hours * i.gpus;
    t.borrowedHours += hours * (i.borrowed_gpus || 0);
    t.tasks.add(i.task_id);
    teams.set(i.team, t);
  }
  return [...teams.values()]
    .map((t) => ({ team: t.team, gpuHours: t.gpuHours, borrowedHours: t.borrowedHours, tasks: t.tasks.size }))
    .sort((a, b) => a.team.localeCompare(b.team));
}

/** A list endpoint that older servers may lack: its items, or null on 404 (no such route). */
async function optional(promise) {
  try {
    return await promise;
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) return null;
    throw e;
  }
}

/**
 * The month's GPU-hours per team (the caller's visible teams), its chargeback (docs/design.md, contract 5, the teams
 * whose costs the caller may see) and this month's budgets; `chargeback`/`budgets` are null when the
 * server does not compute costs.
 */
export async function loadUsage(api, month) {
  const window_ = monthWindow(month);
  const [intervals, chargeback, budgets, policy] = await Promise.all([
    api.get("/usage", { from: window_.start, to: window_.end }).then(items),
    optional(api.get("/invoices", { month })),
    optional(api.get("/budgets")),
    optional(api.get("/policy")),
  ]);
  const hours = gpuHoursByTeam(intervals, api.now());
  // Borrowed GPU-hours have one definition on the page: the chargeback's (the team's use above its
  // quota, integrated over time), not the sum of what each task borrowed when it was admitted.
  for (const row of hours) {
    const charged = chargeback?.teams?.[row.team];
    if (charged) row.borrowedHours = Number(charged.borrowed_gpu_hours);
  }
  return { hours, chargeback, budgets: budgets && items(budgets), rules: policy?.chargeback || null };
}

/** One team's invoice for the month, as the API renders it (`html` or `pdf`). */
export function invoiceUrl(base, month, team, format) {
  const query = new URLSearchParams({ month, team, format });
  return `${base}/invoices?${query}`;
}
