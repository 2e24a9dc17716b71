// A task's attempts on a time line (queued → admitted → running → preempted by whom → requeued …)
// and, while it waits, when it is likely to start and how sure that is.

import { h, table } from "../dom.js";
import { formatDuration, formatTime } from "../format.js";

const OUTCOME = {
  waiting: "waiting in the queue",
  admitted: "admitted, starting",
  running: "running",
  preempting: "being preempted (saving its state)",
  preempted: "preempted, then requeued",
  requeued: "requeued",
  succeeded: "succeeded",
  failed: "failed",
  cancelled: "cancelled",
};

function when(iso) {
  return iso ? formatTime(iso) : "–";
}

/** "likely in 25m (between 10m and 1h 5m)", for the waiting callout. */
export function estimateCallout(estimate, nowMs) {
  if (!estimate) return null;
  const inWords = (iso) => (iso ? `${formatDuration(Math.max(0, Date.parse(iso) - nowMs) / 1000)}` : "?");
  const text = estimate.likely
    ? [
        h("strong", {}, `Likely to start in about ${inWords(estimate.likely)}`),
        ` (${formatTime(estimate.likely)}); between ${inWords(estimate.earliest)} and ${estimate.latest ? inWords(estimate.latest) : "later than the replay can tell"}.`,
      ]
    : [h("strong", {}, "No start estimate.")];
  return h(
    "div",
    { class: "callout estimate", id: "start-estimate", dataset: { likely: estimate.likely || "", earliest: estimate.earliest || "", latest: estimate.latest || "" } },
    h("p", {}, ...text),
    h("p", { class: "muted small" }, estimate.basis),
  );
}

function preemptor(a) {
  const p = a.preempted_by;
  if (!p) return a.preempted_at ? "preempted" : "";
  const task = p.task_id ? [" (", h("a", { href: `#/tasks/${encodeURIComponent(p.task_id)}` }, p.task_id), ")"] : [];
  return ["by team ", h("strong", {}, p.team), ...task, ` · ${p.reason.replaceAll("_", " ")}`];
}

/** The attempts as a list of steps and, for a quick read, a table. */
export function timelineSection(timeline) {
  if (!timeline || !timeline.attempts.length) return null;
  const steps = [];
  timeline.attempts.forEach((a, i) => {
    steps.push(step(a.number > 1 ? "resumed" : "queued", a.queued_at, a.number > 1 ? `attempt ${a.number}: back in the queue` : "submitted, in the queue"));
    if (a.admitted_at) steps.push(step("admitted", a.admitted_at, `admitted after waiting ${formatDuration(a.waited_seconds)}`));
    if (a.started_at) steps.push(step("running", a.started_at, "running"));
    if (a.preempted_at) steps.push(step("preempted", a.preempted_at, "preempted ", preemptor(a)));
    if (a.ended_at && a.outcome !== "preempted" && a.outcome !== "requeued") steps.push(step(a.outcome, a.ended_at, OUTCOME[a.outcome] || a.outcome));
    if (i === timeline.attempts.length - 1 && !a.ended_at) steps.push(h("li", { class: "step now", dataset: { kind: "now" } }, h("span", { class: "dot", "aria-hidden": "true" }), h("span", {}, `now: ${OUTCOME[a.outcome] || a.outcome}`)));
  });
  return h(
    "section",
    { "aria-labelledby": "timeline-heading", class: "timeline" },
    h("h2", { id: "timeline-heading" }, "Timeline"),
    h("ol", { class: "steps" }, steps),
    table({
      cls: "attempts stack",
      caption: "The task's attempts",
      columns: [["Attempt", "num"], ["Queued"], ["Waited", "num"], ["Ran", "num"], ["Ended"], ["Preempted by"]],
      rows: timeline.attempts.map((a) =>
        h(
          "tr",
          { dataset: { attempt: a.number, outcome: a.outcome, preemptorTeam: a.preempted_by?.team || "" } },
          h("td", { class: "num" }, String(a.number)),
          h("td", { class: "nowrap" }, when(a.queued_at)),
          h("td", { class: "num" }, formatDuration(a.waited_seconds)),
          h("td", { class: "num" }, formatDuration(a.ran_seconds)),
          h("td", {}, OUTCOME[a.outcome] || a.outcome),
          h("td", {}, preemptor(a) || "–"),
        ),
      ),
    }),
  );
}

function step(kind, iso, ...text) {
  return h(
    "li",
    { class: `step step-${kind}`, dataset: { kind } },
    h("span", { class: "dot", "aria-hidden": "true" }),
    h("time", { datetime: iso, class: "nowrap muted small" }, formatTime(iso)),
    h("span", {}, ...text),
  );
}
