// What each page needs from the API, in one place: the pages render plain objects and never know
// endpoint paths. When the API grows, this is the file that changes.

import { ApiError, items } from "./api.js";

/**
 * Who the caller is (name, roles, teams). Throws ApiError(401) when the credentials are refused; returns
 * null when the server cannot say who (no such endpoint) but accepts the credentials.
 */
export async function loadWhoAmI(api) {
  try {
    return await api.get("/me");
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 404)) throw e;
  }
  await api.get("/teams"); // still proves the credentials are accepted
  return null;
}

/** Teams with their per-pool quota and usage, plus the pools' capacity (when the API gives it). */
export async function loadOverview(api) {
  const [teams, pools] = await Promise.all([api.get("/teams").then(items), loadPools(api)]);
  return { teams, pools: summarisePools(teams, pools) };
}

async function loadPools(api) {
  try {
    return items(await api.get("/pools"));
  } catch (e) {
    if (e instanceof ApiError && (e.status === 404 || e.status === 403)) return [];
    throw e;
  }
}

/**
 * Per pool: capacity, GPUs used within quota, GPUs borrowed, idle. Teams' usage adds up to the pool's;
 * capacity comes from /pools (null when unknown: then idle is unknown too).
 */
export function summarisePools(teams, pools) {
  const byName = new Map();
  for (const p of pools) {
    byName.set(p.name, {
      name: p.name,
      gpuType: p.gpu_type || "",
      capacity: Number.isFinite(p.capacity_gpus) ? p.capacity_gpus : (p.nodes ?? 0) * (p.gpus_per_node ?? 0) || null,
      used: 0,
      borrowed: 0,
      nominal: 0,
      reportedUsed: Number.isFinite(p.used_gpus) ? p.used_gpus : null,
      teams: [],
    });
  }
  for (const team of teams) {
    for (const tp of team.pools || []) {
      if (!byName.has(tp.pool)) {
        byName.set(tp.pool, { name: tp.pool, gpuType: "", capacity: null, used: 0, borrowed: 0, nominal: 0, reportedUsed: null, teams: [] });
      }
      const pool = byName.get(tp.pool);
      pool.used += tp.used_gpus || 0;
      pool.borrowed += tp.borrowed_gpus || 0;
      pool.nominal += tp.nominal_gpus || 0;
      pool.teams.push({ team: team.name, ...tp });
    }
  }
  const out = [];
  for (const pool of byName.values()) {
    // A pool's own count (when given) includes teams this caller cannot see.
    const used = pool.reportedUsed ?? pool.used;
    out.push({
      ...pool,
      used,
      owned: Math.max(0, used - pool.borrowed),
      idle: pool.capacity === null ? null : Math.max(0, pool.capacity - used),
    });
  }
  return out;
}

/** The caller's visible tasks, newest first, each pending one with its queue position and reason. */
export async function loadTasks(api, { state = "", team = "" } = {}) {
  const query = { team };
  if (state && state !== "active" && state !== "finished") query.state = state;
  const [tasks, queue] = await Promise.all([api.get("/tasks", query).then(items), loadQueue(api)]);
  const byId = new Map(queue.map((q) => [q.task_id, q]));
  let list = tasks.map((t) => ({ ...t, queue: byId.get(t.id) || null }));
  if (state === "active") list = list.filter((t) => !["succeeded", "failed", "cancelled"].includes(t.state));
  if (state === "finished") list = list.filter((t) => ["succeeded", "failed", "cancelled"].includes(t.state));
  list.sort((a, b) => (b.seq ?? 0) - (a.seq ?? 0));
  return { tasks: list, queue };
}

async function loadQueue(api) {
  try {
    return items(await api.get("/queue"));
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) return [];
    throw e;
  }
}

export const LOG_TAIL_LINES = 200;

/** One task with its events, the tail of its log and (while pending) its place in the queue. */
export async function loadTask(api, id) {
  const path = `/tasks/${encodeURIComponent(id)}`;
  const [task, events, log, queue] = await Promise.all([
    api.get(path),
    api.get(`${path}/events`).then(items).catch(() => []),
    loadLogTail(api, path),
    loadQueue(api).catch(() => []),
  ]);
  return { task, events, log, queue: queue.find((q) => q.task_id === id) || null };
}

async function loadLogTail(api, path) {
  try {
    const payload = await api.request("GET", `${path}/logs`, {
      query: { tail: LOG_TAIL_LINES },
      accept: "text/plain, application/json",
    });
    if (typeof payload === "string") return { text: payload, error: null };
    if (payload && Array.isArray(payload.lines)) return { text: payload.lines.join("\n"), error: null };
    if (payload && typeof payload.text === "string") return { text: payload.text, error: null };
    return { text: "", error: null };
  } catch (e) {
    return { text: "", error: e instanceof ApiError ? e.explanation : String(e) };
  }
}

export function cancelTask(api, id) {
  return api.post(`/tasks/${encodeURIComponent(id)}/cancel`);
}

export function submitTask(api, request) {
  return api.post("/tasks", request);
}

/** Choices for the submit form: the caller's teams, the pools, the priority classes. */
export async function loadSubmitOptions(api, who) {
  const [teams, policy] = await Promise.all([
    api.get("/teams").then(items).catch(() => []),
    api.get("/policy").catch(() => null),
  ]);
  const mine = who && Array.isArray(who.teams) && !who.platform_admin ? new Set(who.teams) : null;
  const teamNames = teams.map((t) => t.name).filter((n) => !mine || mine.has(n));
  const pools = policy && Array.isArray(policy.pools) ? policy.pools.map((p) => (typeof p === "string" ? p : p.name)) : [];
  const classes = policy && Array.isArray(policy.priority_classes) ? policy.priority_classes : [];
  return {
    teams: teamNames,
    pools,
    classes: classes.map((c) => (typeof c === "string" ? { name: c } : c)),
    defaultClass: policy?.default_priority_class || "",
  };
}

/** The month's chargeback (contract 5) and where each team's invoice is, or `{missing: true}`. */
export async function loadUsage(api, month) {
  try {
    const result = await api.get("/chargeback", { period: month });
    return { result, missing: false };
  } catch (e) {
    if (e instanceof ApiError && e.status === 404 && e.code !== "not_found") return { missing: true };
    throw e;
  }
}

export function invoiceUrl(base, month, team, format) {
  const u = new URL(`${base}/invoices/${encodeURIComponent(month)}/${encodeURIComponent(team)}`, window.location.origin);
  u.searchParams.set("format", format);
  return u.pathname + u.search;
}
