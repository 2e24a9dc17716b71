// What the history, team, planning and admin pages read and send: like data.js, the only place that
// knows these endpoints' paths. Everything goes through the public API with the caller's credentials.

import { ApiError, items } from "./api.js";

export const WINDOWS = ["24h", "7d", "30d"];
//: History changes slowly and costs more than a snapshot: it is fetched at most this often (ms).
const HISTORY_TTL_MS = 60000;
const cache = new Map();

async function cached(key, fetcher) {
  const hit = cache.get(key);
  if (hit && Date.now() - hit.at < HISTORY_TTL_MS) return hit.value;
  const value = await fetcher();
  cache.set(key, { at: Date.now(), value });
  return value;
}

/** Forget cached history (after a change the page itself made). */
export function forgetHistory() {
  cache.clear();
}

/** GPUs held per team and pool over `window`, from the ledger (see /api/v1/history/gpus). */
export function loadGpuHistory(api, window, team = "") {
  return cached(`gpus:${window}:${team}`, () => api.get("/history/gpus", { window, team }));
}

/** p50 / p95 waits per team and day. */
export function loadWaits(api, days = 14, team = "") {
  return cached(`waits:${days}:${team}`, () => api.get("/history/waits", { days, team }));
}

async function orNull(promise, statuses = [403, 404]) {
  try {
    return await promise;
  } catch (e) {
    if (e instanceof ApiError && statuses.includes(e.status)) return null;
    throw e;
  }
}

/** One team: its detail, its latest tasks (null when the caller may not see tasks), 7 days of history. */
export async function loadTeam(api, name) {
  const path = `/teams/${encodeURIComponent(name)}`;
  const team = await api.get(path); // 403 / 404 surface as the page's error
  const [tasks, gpus, waits] = await Promise.all([
    orNull(api.get("/tasks", { team: name, limit: 50 }).then(items)),
    orNull(loadGpuHistory(api, "7d", name)),
    orNull(loadWaits(api, 14, name)),
  ]);
  return { team, tasks, gpus, waits };
}

export function loadTimeline(api, id) {
  return api.get(`/tasks/${encodeURIComponent(id)}/timeline`);
}

export async function loadRuns(api) {
  return items(await api.get("/planning/runs"));
}

export function startRun(api, body) {
  return api.post("/planning/runs", body);
}

export function loadPolicy(api) {
  return api.get("/policy");
}

export function diffPolicy(api, text) {
  return api.post("/policy/diff", { text });
}

export function applyPolicy(api, text) {
  return api.request("PUT", "/policy", { body: { text, dry_run: false } });
}

export async function loadTokens(api) {
  return items(await api.get("/tokens", { include_revoked: false }));
}

export function createToken(api, body) {
  return api.post("/tokens", body);
}

export function revokeToken(api, id) {
  return api.request("DELETE", `/tokens/${encodeURIComponent(id)}`);
}

export async function loadAudit(api, filters) {
  return items(await api.get("/audit", { ...filters, limit: 200 }));
}

/** A file input that puts a local policy file's text into `textarea` (nothing is uploaded by itself). */
export function policyFileInput(id, textarea, onLoaded) {
  const input = document.createElement("input");
  Object.assign(input, { type: "file", id, accept: ".yaml,.yml,text/yaml,text/plain" });
  input.addEventListener("change", async () => {
    const file = input.files && input.files[0];
    if (!file) return;
    textarea.value = await file.text();
    onLoaded?.(file.name);
  });
  return input;
}
