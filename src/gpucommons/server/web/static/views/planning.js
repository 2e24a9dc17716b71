// Planning: replay a past month of this cluster under a proposed policy (or the quota advisor's
// proposal) as a background run, follow its progress, and compare it with the current policy.
// The latest stored runs are listed; one is shown in full.

import { ApiError } from "../api.js";
import { loadPolicy, loadRuns, policyFileInput, startRun } from "../history_data.js";
import { h, table } from "../dom.js";
import { formatTime, plural } from "../format.js";

export const title = "Planning";
export const refreshMs = 2000;

function lastMonth(nowMs) {
  const d = new Date(nowMs);
  const y = d.getUTCMonth() === 0 ? d.getUTCFullYear() - 1 : d.getUTCFullYear();
  const m = d.getUTCMonth() === 0 ? 12 : d.getUTCMonth();
  return `${y}-${String(m).padStart(2, "0")}`;
}

export async function load(ctx) {
  const runs = await loadRuns(ctx.api);
  const wanted = ctx.params.get("run");
  const shown = runs.find((r) => r.id === wanted) || runs.find((r) => r.status === "running" || r.status === "queued") || runs.find((r) => r.status === "succeeded") || runs[0] || null;
  return { runs, shown };
}

export function header(ctx) {
  const intro = h(
    "p",
    { class: "muted" },
    "A replay runs a past month of this cluster's own tasks (submit times, GPUs, run times, checkpoints) through the scheduler's engine, ",
    "once under the current policy and once under the proposed one, and compares waits, utilisation and preemptions. ",
    "It runs in the background; the page follows its progress.",
  );
  if (!ctx.who?.platform_admin) {
    return [h("h1", {}, "Planning"), intro, h("p", { class: "callout" }, "Platform admins start replays; you can read the stored runs.")];
  }
  const status = h("p", { class: "action-status", role: "status", "aria-live": "polite", id: "run-status" });
  const policyText = h("textarea", { name: "policy", id: "f-policy", rows: 12, spellcheck: "false", "aria-describedby": "f-policy-hint" });
  loadPolicy(ctx.api)
    .then((p) => {
      if (!policyText.value) policyText.value = p.text || "";
    })
    .catch(() => null);
  const form = h(
    "form",
    { class: "planning-form", id: "replay-form", onsubmit: onSubmit, "aria-labelledby": "replay-heading" },
    h("h2", { id: "replay-heading" }, "Replay a month"),
    h(
      "fieldset",
      {},
      h("legend", {}, "Replay under"),
      radio("kind", "replay", "this proposed policy", true),
      radio("kind", "advice", "the quota advisor's proposal from that month's usage"),
    ),
    h(
      "div",
      { class: "field" },
      h("label", { for: "f-month" }, "Month"),
      h("input", { type: "month", name: "month", id: "f-month", value: lastMonth(ctx.api.now()), required: true }),
    ),
    h(
      "div",
      { class: "field wide" },
      h("label", { for: "f-policy" }, "Proposed policy (YAML)"),
      policyText,
      h("p", { class: "hint muted", id: "f-policy-hint" }, "Starts as the current policy: change quotas, limits or classes (or load a file), then replay."),
    ),
    h("div", { class: "field" }, h("label", { for: "f-policy-file" }, "Load a policy file"), policyFileInput("f-policy-file", policyText)),
    h("div", { class: "form-actions" }, h("button", { type: "submit", class: "primary", id: "replay-button" }, "Start the replay")),
    status,
  );

  async function onSubmit(event) {
    event.preventDefault();
    const els = form.elements;
    const body = { kind: els.kind.value, month: els.month.value };
    if (body.kind === "replay") body.policy = els.policy.value;
    const button = form.querySelector("#replay-button");
    button.disabled = true;
    status.textContent = "Starting…";
    try {
      const run = await startRun(ctx.api, body);
      status.replaceChildren(`Replay started: ${run.title}.`, progressOf(run));
      ctx.announce("Replay started.");
      ctx.navigate(`#/planning?run=${encodeURIComponent(run.id)}`);
    } catch (e) {
      status.textContent = `Could not start it: ${e instanceof ApiError ? e.explanation : e}`;
    } finally {
      button.disabled = false;
    }
  }

  return [h("h1", {}, "Planning"), intro, form];
}

function radio(name, value, label, checked = false) {
  const id = `f-${name}-${value}`;
  return h("span", { class: "radio" }, h("input", { type: "radio", name, value, id, checked }), h("label", { for: id }, label));
}

export function render(data) {
  const { runs, shown } = data;
  return [
    h(
      "section",
      { "aria-labelledby": "run-heading" },
      h("h2", { id: "run-heading" }, shown ? shown.title : "No run yet"),
      shown ? runView(shown) : h("p", { class: "empty" }, "No replay has been run on this server yet."),
    ),
    runs.length
      ? h(
          "section",
          { "aria-labelledby": "runs-heading" },
          h("h2", { id: "runs-heading" }, "Latest runs"),
          table({
            cls: "runs stack",
            caption: "The latest planning runs, newest first",
            columns: [["Run"], ["Status"], ["Started by"], ["Created"]],
            rows: runs.map((r) =>
              h(
                "tr",
                { dataset: { runId: r.id, status: r.status } },
                h("td", {}, h("a", { href: `#/planning?run=${encodeURIComponent(r.id)}` }, r.title)),
                h("td", {}, r.status),
                h("td", {}, r.created_by),
                h("td", { class: "nowrap" }, formatTime(r.created_at)),
              ),
            ),
          }),
        )
      : null,
  ];
}

/** The run's progress bar; also shown at once when a run is started, however soon it ends. */
function progressOf(run) {
  return h(
    "div",
    { class: "progress", id: "run-progress", dataset: { status: run.status } },
    h("label", { for: "run-progress-bar" }, run.phase || "waiting"),
    h("progress", { id: "run-progress-bar", max: Math.max(1, run.total), value: run.done }, `${run.done} of ${run.total}`),
    h("span", { class: "muted small" }, run.total ? ` ${run.done} of ${run.total} jobs` : ""),
  );
}

function runView(run) {
  const parts = [h("p", { class: "muted" }, `${run.kind === "advice" ? "Quota advice" : "Replay"} of ${formatTime(run.window_start).slice(0, 10)} to ${formatTime(run.window_end).slice(0, 10)}, started by ${run.created_by}.`)];
  if (run.status === "queued" || run.status === "running") parts.push(progressOf(run));
  if (run.status === "failed") parts.push(h("p", { class: "callout error", id: "run-error" }, `This run failed: ${run.error}`));
  if (run.status === "succeeded") parts.push(result(run));
  if (run.proposed_policy) {
    parts.push(h("details", { class: "numbers" }, h("summary", {}, "The proposed policy"), h("pre", { class: "policy-text" }, run.proposed_policy)));
  }
  return h("div", { class: "run", dataset: { runId: run.id, status: run.status } }, parts);
}

function result(run) {
  const r = run.report;
  const labels = r.variants || [];
  const cols = [["Metric"], ...labels.map((l) => [l, "num"])];
  return [
    h("p", { id: "run-done" }, `Done: ${plural(r.jobs, "task")} replayed` + (r.never_ran ? ` (${plural(r.never_ran, "task")} that never started left out).` : ".")),
    table({
      cls: "comparison stack",
      caption: "The cluster under each policy",
      showCaption: true,
      columns: cols,
      rows: (r.summary_rows || []).map(([metric, ...cells]) => h("tr", { dataset: { metric } }, h("th", { scope: "row" }, metric), cells.map((c) => h("td", { class: "num" }, c)))),
    }),
    table({
      cls: "comparison-teams stack",
      caption: "Per team: wait p50 / p95 · finish-time fairness (below 1: sharing helped)",
      showCaption: true,
      columns: [["Team"], ...labels.map((l) => [l, "num"])],
      rows: (r.team_rows || []).map(([team, ...cells]) => h("tr", { dataset: { team } }, h("th", { scope: "row" }, team), cells.map((c) => h("td", { class: "num" }, c)))),
    }),
  ];
}
