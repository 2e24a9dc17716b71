// Submit a task: the same request `commons submit` sends. The server validates everything again; the
// form only catches what a person would want to hear about before the round trip.

import { ApiError } from "../api.js";
import { loadSubmitOptions, submitTask } from "../data.js";
import { h } from "../dom.js";
import { splitCommand } from "../format.js";

export const title = "Submit a task";
//: A form is not refreshed under the user's fingers.
export const refreshMs = 0;

export async function load(ctx) {
  return loadSubmitOptions(ctx.api);
}

export function render(options, ctx) {
  const errorBox = h("div", { class: "form-error", role: "alert", id: "submit-error", hidden: true });
  const teamField = options.teams.length
    ? h("select", { name: "team", id: "f-team", required: true }, options.teams.map((t) => h("option", { value: t }, t)))
    : h("input", { name: "team", id: "f-team", required: true, autocomplete: "off" });

  const form = h(
    "form",
    { class: "submit-form", novalidate: true, onsubmit: onSubmit, "aria-describedby": "submit-help" },
    h("p", { id: "submit-help", class: "muted" }, "The task runs as a process with CUDA_VISIBLE_DEVICES set to the GPUs it gets. ",
      "Tasks that may be preempted should save their state on SIGTERM."),
    field("Team", teamField),
    field("GPUs", h("input", { name: "gpus", id: "f-gpus", type: "number", min: 0, max: 100000, step: 1, value: 1, required: true, inputmode: "numeric" })),
    field("Priority class", h("select", { name: "priority", id: "f-priority" }, classOptions(options, teamField.value))),
    field(
      "Pool",
      h(
        "select",
        { name: "pool", id: "f-pool" },
        h("option", { value: "" }, "any of the team's pools"),
        options.pools.map((p) => h("option", { value: p }, p)),
      ),
    ),
    field("Name", h("input", { name: "name", id: "f-name", maxlength: 200, autocomplete: "off", placeholder: "optional" })),
    field(
      "Command",
      h("textarea", { name: "command", id: "f-command", rows: 3, required: true, spellcheck: "false", placeholder: "python3 train.py --epochs 10" }),
      "Split into words like a shell would; for pipes or variables use sh -c '…'.",
    ),
    h(
      "fieldset",
      { class: "checkpoint" },
      h("legend", {}, "Checkpoints"),
      radio("checkpoint", "none", "None declared", true),
      radio("checkpoint", "on-signal", "Saves its state on SIGTERM (within the grace period)"),
      h(
        "div",
        { class: "radio-row" },
        radio("checkpoint", "every", "Saves its state every"),
        " ",
        h("input", { name: "interval", id: "f-interval", size: 5, value: "30m", "aria-label": "checkpoint interval, e.g. 30m or 2h", pattern: "[1-9][0-9]{0,6}[smhd]" }),
      ),
    ),
    errorBox,
    h("div", { class: "form-actions" }, h("button", { type: "submit", class: "primary", id: "submit-button" }, "Submit task")),
  );

  // A class reserved to other teams (or roles) is not offered: the choice follows the team.
  teamField.addEventListener("change", () => {
    const select = form.elements.priority;
    const chosen = select.value;
    select.replaceChildren(...classOptions(options, teamField.value));
    if ([...select.options].some((o) => o.value === chosen)) select.value = chosen;
  });

  async function onSubmit(event) {
    event.preventDefault();
    const els = form.elements;
    const problems = [];
    const team = els.team.value.trim();
    if (!team) problems.push("choose a team");
    const gpus = Number(els.gpus.value);
    if (!Number.isInteger(gpus) || gpus < 0) problems.push("GPUs must be a whole number, 0 or more");
    const parsed = splitCommand(els.command.value);
    if (parsed.error) problems.push(parsed.error);
    else if (!parsed.argv.length) problems.push("the command is empty");
    let checkpoint = null;
    const mode = els.checkpoint.value;
    if (mode === "on-signal") checkpoint = "on-signal";
    if (mode === "every") {
      const interval = els.interval.value.trim();
      if (!/^[1-9][0-9]{0,6}[smhd]$/.test(interval)) problems.push("the checkpoint interval reads like 30m, 2h or 1d");
      checkpoint = `every:${interval}`;
    }
    if (problems.length) return showError(`Please fix: ${problems.join("; ")}.`);
    const request = { team, gpus, command: parsed.argv };
    if (els.name.value.trim()) request.name = els.name.value.trim();
    if (els.priority.value) request.priority = els.priority.value;
    if (els.pool.value) request.pool = els.pool.value;
    if (checkpoint) request.checkpoint = checkpoint;
    const button = form.querySelector("#submit-button");
    button.disabled = true;
    errorBox.hidden = true;
    try {
      const task = await submitTask(ctx.api, request);
      ctx.announce(`Task ${task.name || task.id} submitted.`);
      ctx.navigate(`#/tasks/${encodeURIComponent(task.id)}`);
    } catch (e) {
      showError(e instanceof ApiError ? e.explanation : String(e));
    } finally {
      button.disabled = false;
    }
  }

  function showError(text) {
    errorBox.textContent = text;
    errorBox.hidden = false;
    errorBox.focus?.();
  }

  return [h("h1", {}, "Submit a task"), form];
}

/** The class choices for `team`: the default, then the classes the caller may use in that team. */
function classOptions(options, team) {
  const usable = options.classes.filter((c) => !team || !c.teams || c.teams.includes(team));
  return [
    h("option", { value: "" }, options.defaultClass ? `default (${options.defaultClass})` : "the policy's default"),
    ...usable.map((c) => h("option", { value: c.name }, classLabel(c))),
  ];
}

/** "training (500; needs checkpoints)": what a person needs to know to pick a class. */
function classLabel(c) {
  const notes = [String(c.value)];
  if (c.checkpoint_required) notes.push("needs checkpoints");
  if (c.preemptible === false) notes.push("never preempted");
  return `${c.name} (${notes.join("; ")})`;
}

function field(label, control, hint) {
  const hintId = hint ? `${control.id}-hint` : null;
  if (hintId) control.setAttribute("aria-describedby", hintId);
  return h(
    "div",
    { class: "field" },
    h("label", { for: control.id }, label),
    control,
    hint ? h("p", { class: "hint muted", id: hintId }, hint) : null,
  );
}

function radio(name, value, label, checked = false) {
  const id = `f-${name}-${value}`;
  return h(
    "span",
    { class: "radio" },
    h("input", { type: "radio", name, value, id, checked }),
    h("label", { for: id }, label),
  );
}
