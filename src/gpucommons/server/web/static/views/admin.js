// Administration (platform admins): the policy with a diff against a proposed file and *Apply*, API
// tokens (create, revoke), and the audit log with filters. The server decides who may do any of it;
// a member who opens this page gets the API's refusal and nothing else.

import { ApiError } from "../api.js";
import { applyPolicy, createToken, diffPolicy, forgetHistory, loadAudit, loadPolicy, loadTokens, policyFileInput, revokeToken } from "../history_data.js";
import { h, table } from "../dom.js";
import { formatTime } from "../format.js";

export const title = "Administration";
export const refreshMs = 10000;

const ROLES = ["team_member", "team_admin", "finance", "platform_admin", "scim"];
const FILTERS = ["actor", "action", "outcome", "since", "until"];
// Which token the person is about to revoke survives a refresh.
const ui = { revoking: null };

function filters(ctx) {
  const out = {};
  for (const key of FILTERS) {
    const v = (ctx.params.get(key) || "").trim();
    if (v) out[key] = key === "since" || key === "until" ? `${v}T00:00:00Z` : v;
  }
  return out;
}

export async function load(ctx) {
  const [policy, tokens, audit] = await Promise.all([loadPolicy(ctx.api), loadTokens(ctx.api), loadAudit(ctx.api, filters(ctx))]);
  // To the minute: the page is redrawn when something happened, not because this page used its token.
  const minute = (iso) => (iso ? iso.slice(0, 16) : iso);
  return { policy: { ...policy, text: undefined }, tokens: tokens.map((t) => ({ ...t, last_used_at: minute(t.last_used_at) })), audit };
}

export function header(ctx) {
  ui.revoking = null;
  if (!ctx.who?.platform_admin) {
    return [h("h1", {}, "Administration")];
  }
  return [h("h1", {}, "Administration"), policySection(ctx), tokenForm(ctx)];
}

function policySection(ctx) {
  const status = h("p", { class: "action-status", role: "status", "aria-live": "polite", id: "policy-status" });
  const text = h("textarea", { id: "f-proposed", name: "proposed", rows: 14, spellcheck: "false", "aria-describedby": "f-proposed-hint" });
  const out = h("div", { id: "policy-diff", class: "policy-diff" });
  const apply = h("button", { type: "button", class: "danger-outline", id: "apply-button", hidden: true, onclick: onApply }, "Apply this policy");
  const confirm = h(
    "span",
    { class: "confirm", hidden: true, id: "apply-confirm-box" },
    "Apply it now? Running tasks keep running; the next cycle uses the new quotas. ",
    h("button", { type: "button", class: "danger", id: "apply-confirm", onclick: doApply }, "Yes, apply"),
    " ",
    h("button", { type: "button", class: "secondary", onclick: () => toggle(false) }, "Not yet"),
  );
  loadPolicy(ctx.api)
    .then((p) => {
      if (!text.value) text.value = p.text || "";
    })
    .catch(() => null);

  function toggle(open) {
    apply.hidden = open;
    confirm.hidden = !open;
    (open ? confirm.querySelector("button") : apply).focus();
  }

  async function showDiff(event) {
    event.preventDefault();
    status.textContent = "Comparing…";
    apply.hidden = true;
    confirm.hidden = true;
    try {
      const d = await diffPolicy(ctx.api, text.value);
      out.replaceChildren(...diffView(d));
      status.textContent = d.valid ? `Compared with version ${d.current_version}.` : "The proposed policy would be refused.";
      apply.hidden = !d.valid || d.diff.length === 0;
    } catch (e) {
      status.textContent = `Could not compare: ${e instanceof ApiError ? e.explanation : e}`;
    }
  }

  function onApply() {
    toggle(true);
  }

  async function doApply() {
    confirm.querySelectorAll("button").forEach((b) => (b.disabled = true));
    try {
      const info = await applyPolicy(ctx.api, text.value);
      status.textContent = `Applied: version ${info.version}.`;
      ctx.announce(`Policy version ${info.version} applied.`);
      confirm.hidden = true;
      out.replaceChildren();
      forgetHistory();
      ctx.refresh();
    } catch (e) {
      status.textContent = `Not applied: ${e instanceof ApiError ? e.explanation : e}`;
      toggle(false);
    } finally {
      confirm.querySelectorAll("button").forEach((b) => (b.disabled = false));
    }
  }

  return h(
    "section",
    { "aria-labelledby": "policy-heading" },
    h("h2", { id: "policy-heading" }, "Policy"),
    h(
      "form",
      { onsubmit: showDiff, id: "policy-form" },
      h("div", { class: "field wide" }, h("label", { for: "f-proposed" }, "Proposed policy (YAML)"), text, h("p", { class: "hint muted", id: "f-proposed-hint" }, "Starts as the current file. Edit it or load a file, compare, then apply.")),
      h("div", { class: "field" }, h("label", { for: "f-proposed-file" }, "Load a proposed file"), policyFileInput("f-proposed-file", text, (name) => (status.textContent = `Loaded ${name}; compare it with the current policy.`))),
      h("div", { class: "form-actions" }, h("button", { type: "submit", class: "primary", id: "diff-button" }, "Show the difference"), " ", apply, confirm),
      status,
    ),
    out,
  );
}

function diffView(d) {
  const parts = [];
  if (!d.valid) {
    parts.push(
      h(
        "div",
        { class: "form-error", role: "alert", id: "policy-issues" },
        h("p", {}, "The server would refuse this file:"),
        h("ul", {}, d.issues.map((i) => h("li", {}, `${i.path ? `${i.path}: ` : ""}${i.message}${i.line ? ` (line ${i.line})` : ""}`))),
      ),
    );
  }
  if (d.quota_changes.length || d.teams_added.length || d.teams_removed.length) {
    parts.push(
      h(
        "ul",
        { class: "changes", id: "quota-changes" },
        d.quota_changes.map((c) => h("li", { dataset: { team: c.team, pool: c.pool } }, `${c.team} in ${c.pool}: ${c.before} → ${c.after}`)),
        d.teams_added.map((t) => h("li", {}, `new team ${t}`)),
        d.teams_removed.map((t) => h("li", {}, `team ${t} removed`)),
      ),
    );
  }
  parts.push(
    d.diff.length
      ? h(
          "pre",
          { class: "diff", id: "diff-text", tabindex: 0, "aria-label": "Unified diff of the current policy against the proposed one" },
          d.diff.map((line) => h("span", { class: line.startsWith("+") && !line.startsWith("+++") ? "add" : line.startsWith("-") && !line.startsWith("---") ? "del" : line.startsWith("@@") ? "hunk" : null }, `${line}\n`)),
        )
      : h("p", { class: "empty" }, "No difference: the proposed file is the current one."),
  );
  return parts;
}

function tokenForm(ctx) {
  const status = h("div", { class: "action-status", role: "status", "aria-live": "polite", id: "token-status" });
  const form = h(
    "form",
    { onsubmit: onCreate, id: "token-form", class: "inline-form", "aria-labelledby": "new-token-heading" },
    h("h3", { id: "new-token-heading" }, "New token"),
    h("div", { class: "field" }, h("label", { for: "f-token-name" }, "Name"), h("input", { id: "f-token-name", name: "name", required: true, maxlength: 128, autocomplete: "off" })),
    h("div", { class: "field" }, h("label", { for: "f-token-role" }, "Role"), h("select", { id: "f-token-role", name: "role" }, ROLES.map((r) => h("option", { value: r }, r.replace("_", " "))))),
    h("div", { class: "field" }, h("label", { for: "f-token-team" }, "Team (team roles)"), h("input", { id: "f-token-team", name: "team", maxlength: 63, autocomplete: "off" })),
    h("div", { class: "form-actions" }, h("button", { type: "submit", class: "primary", id: "token-create" }, "Create token")),
    status,
  );

  async function onCreate(event) {
    event.preventDefault();
    const els = form.elements;
    const body = { name: els.name.value.trim(), role: els.role.value };
    if (els.team.value.trim()) body.team = els.team.value.trim();
    try {
      const made = await createToken(ctx.api, body);
      status.replaceChildren(
        h("p", {}, `Token ${made.name} created. Copy it now: it is shown only once.`),
        h("code", { class: "secret", id: "new-token" }, made.token),
      );
      ctx.announce(`Token ${made.name} created.`);
      ctx.refresh();
    } catch (e) {
      status.replaceChildren(h("p", { class: "form-error" }, `Not created: ${e instanceof ApiError ? e.explanation : e}`));
    }
  }

  return h("section", { "aria-labelledby": "tokens-form-heading" }, h("h2", { id: "tokens-form-heading" }, "API tokens"), form);
}

function auditFilters(ctx) {
  const value = (k) => ctx.params.get(k) || "";
  const go = (event) => {
    event.preventDefault();
    const els = event.target.closest("form").elements;
    const query = new URLSearchParams();
    for (const key of FILTERS) if (els[key].value.trim()) query.set(key, els[key].value.trim());
    ctx.navigate(`#/admin${query.toString() ? `?${query}` : ""}`);
  };
  return h(
    "form",
      { class: "filters", id: "audit-filters", onsubmit: go, "aria-label": "Filter the audit log" },
      h("label", {}, "Actor ", h("input", { name: "actor", value: value("actor"), size: 12, autocomplete: "off" })),
      h("label", {}, "Action ", h("input", { name: "action", value: value("action"), size: 14, placeholder: "policy.* or token.create", autocomplete: "off" })),
      h(
        "label",
        {},
        "Outcome ",
        h("select", { name: "outcome" }, ["", "ok", "denied", "error"].map((o) => h("option", { value: o, selected: o === value("outcome") }, o || "any"))),
      ),
      h("label", {}, "From ", h("input", { type: "date", name: "since", value: value("since") })),
      h("label", {}, "Until ", h("input", { type: "date", name: "until", value: value("until") })),
      h("button", { type: "submit", class: "secondary", id: "audit-filter-button" }, "Filter"),
  );
}

export function render(data, ctx) {
  return [
    h("p", { class: "muted", id: "policy-version" }, `Current policy: version ${data.policy.version}, applied ${formatTime(data.policy.applied_at)} by ${data.policy.applied_by || "–"}; teams ${data.policy.teams.join(", ")}.`),
    tokensTable(data.tokens, ctx),
    h(
      "section",
      { "aria-labelledby": "audit-heading" },
      h("h2", { id: "audit-heading" }, "Audit log"),
      auditFilters(ctx),
      auditTable(data.audit),
    ),
  ];
}

function tokensTable(tokens, ctx) {
  return table({
    cls: "tokens stack",
    caption: "Live API tokens (sign-in sessions included)",
    showCaption: true,
    columns: [["Name"], ["Kind"], ["Subject"], ["Role"], ["Team"], ["Created"], ["Last used"], ["Revoke"]],
    rows: tokens.map((t) =>
      h(
        "tr",
        { dataset: { tokenId: t.id } },
        h("th", { scope: "row" }, t.name),
        h("td", {}, t.kind),
        h("td", {}, t.subject),
        h("td", {}, t.role || "as the user"),
        h("td", {}, t.team || "–"),
        h("td", { class: "nowrap" }, formatTime(t.created_at)),
        h("td", { class: "nowrap" }, t.last_used_at ? `${t.last_used_at.replace("T", " ")} UTC` : "never"),
        h("td", {}, revokeControl(t, ctx)),
      ),
    ),
  });
}

function revokeControl(t, ctx) {
  const open = ui.revoking === t.id;
  const status = h("span", { class: "action-status", role: "status" });
  const start = h("button", { type: "button", class: "danger-outline small", id: `revoke-${t.id}`, hidden: open, "aria-label": `Revoke token ${t.name}`, onclick: () => toggle(true) }, "Revoke");
  const confirm = h(
    "span",
    { class: "confirm", hidden: !open },
    h("button", { type: "button", class: "danger small", id: `revoke-confirm-${t.id}`, onclick: doRevoke, "aria-label": `Yes, revoke token ${t.name}` }, "Yes, revoke"),
    " ",
    h("button", { type: "button", class: "secondary small", onclick: () => toggle(false) }, "Keep"),
  );
  function toggle(opening) {
    ui.revoking = opening ? t.id : null;
    start.hidden = opening;
    confirm.hidden = !opening;
    (opening ? confirm.querySelector("button") : start).focus();
  }
  async function doRevoke() {
    try {
      await revokeToken(ctx.api, t.id);
      ui.revoking = null;
      ctx.announce(`Token ${t.name} revoked.`);
      ctx.refresh();
    } catch (e) {
      status.textContent = `Not revoked: ${e instanceof ApiError ? e.explanation : e}`;
    }
  }
  return [start, confirm, status];
}

function auditTable(entries) {
  if (!entries.length) return h("p", { class: "empty", id: "audit-empty" }, "No audit entry matches these filters.");
  return table({
    cls: "audit stack",
    caption: `The newest ${entries.length} audit entries matching the filters`,
    showCaption: true,
    columns: [["When"], ["Actor"], ["Action"], ["Team"], ["Target"], ["Outcome"], ["Status", "num"]],
    rows: entries.map((e) =>
      h(
        "tr",
        { dataset: { auditId: e.id, action: e.action, outcome: e.outcome } },
        h("td", { class: "nowrap" }, formatTime(e.at)),
        h("td", {}, e.actor || "–"),
        h("td", {}, e.action),
        h("td", {}, e.team || "–"),
        h("td", { class: "note" }, e.target || "–"),
        h("td", {}, e.outcome),
        h("td", { class: "num" }, String(e.status_code)),
      ),
    ),
  });
}
