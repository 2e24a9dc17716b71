// Usage and costs: each team's GPU-hours in a month from the ledger, and the month's chargeback (docs/design.md
// contract 5) per team with each team's invoice when the server computes costs. Signed in by the
// session cookie, an invoice is a plain link; with a pasted token it is fetched with the token and
// saved as a file, because a link cannot carry an Authorization header.

import { ApiError, session } from "../api.js";
import { invoiceUrl, loadUsage } from "../data.js";
import { quotaBar } from "../bars.js";
import { h, table } from "../dom.js";
import { formatHours, formatMoney, monthOf } from "../format.js";

export const title = "Usage and costs";
export const refreshMs = 30000;

function monthParam(ctx) {
  const m = ctx.params.get("month") || "";
  return /^\d{4}-\d{2}$/.test(m) ? m : monthOf(new Date(ctx.api.now()));
}

export async function load(ctx) {
  return { month: monthParam(ctx), ...(await loadUsage(ctx.api, monthParam(ctx))) };
}

export function header(ctx) {
  const month = monthParam(ctx);
  const go = (event) => {
    event.preventDefault();
    const value = event.target.closest("form").elements.month.value;
    if (/^\d{4}-\d{2}$/.test(value)) ctx.navigate(`#/usage?month=${value}`);
  };
  return [
    h("h1", {}, "Usage and costs"),
    h(
      "form",
      { class: "filters", onsubmit: go, onchange: go, "aria-label": "Choose the month" },
      h("label", {}, "Month ", h("input", { type: "month", name: "month", value: month, required: true })),
      h("button", { type: "submit", class: "secondary" }, "Show"),
    ),
  ];
}

export function render(data, ctx) {
  return [
    h(
      "section",
      { "aria-labelledby": "hours-heading" },
      h("h2", { id: "hours-heading" }, `GPU-hours in ${data.month}`),
      data.hours.length ? hoursTable(data.hours) : h("p", { class: "empty" }, "No GPU was used this month by the teams you may see."),
    ),
    h(
      "section",
      { "aria-labelledby": "costs-heading" },
      h("h2", { id: "costs-heading" }, "Costs"),
      data.chargeback
        ? costs(data.chargeback, data.month, ctx, data.rules)
        : h(
            "p",
            { class: "empty" },
            "This server does not compute costs yet; run ",
            h("code", {}, "commons chargeback"),
            " on ",
            h("code", {}, "commons usage export"),
            ".",
          ),
    ),
    data.budgets && data.budgets.length && data.month === monthOf(new Date(ctx.api.now()))
      ? h(
          "section",
          { "aria-labelledby": "budgets-heading" },
          h("h2", { id: "budgets-heading" }, "Budgets this month"),
          budgetsTable(data.budgets, data.chargeback?.currency || "USD"),
          data.rules ? h("p", { class: "note", id: "budget-note" }, data.rules.budget) : null,
        )
      : null,
  ];
}

function budgetsTable(budgets, currency) {
  const rows = [...budgets].sort((a, b) => a.team.localeCompare(b.team));
  return table({
    cls: "budgets stack",
    caption: "Direct cost so far against each team's monthly budget",
    columns: [["Team"], ["Direct cost vs budget", "bar-cell"], ["Direct cost so far", "num"], ["Budget", "num"], ["Status"]],
    rows: rows.map((b) => {
      const over = Math.max(0, b.spent_cents - b.budget_cents);
      const label = `${b.team}: ${formatMoney(b.spent_cents, currency)} direct cost so far of a ${formatMoney(b.budget_cents, currency)} budget`;
      return h(
        "tr",
        { dataset: { team: b.team } },
        h("th", { scope: "row" }, b.team),
        h(
          "td",
          { class: "bar-cell" },
          quotaBar({ used: b.spent_cents, borrowed: over, nominal: b.budget_cents, scale: Math.max(b.budget_cents, b.spent_cents, 1), label }),
        ),
        h("td", { class: "num" }, formatMoney(b.spent_cents, currency)),
        h("td", { class: "num" }, formatMoney(b.budget_cents, currency)),
        h("td", {}, budgetStatus(b)),
      );
    }),
  });
}

function budgetStatus(b) {
  if (b.holds_new_tasks) return h("strong", { class: "danger-text" }, "exhausted: new tasks are held");
  if (b.exhausted) return h("strong", {}, `exhausted (${b.enforce}: tasks still run)`);
  const crossed = b.thresholds_crossed || [];
  if (crossed.length) return `passed ${Math.max(...crossed)} % (${b.enforce})`;
  return `within budget (${b.enforce})`;
}

function hoursTable(rows) {
  const scale = Math.max(1e-9, ...rows.map((r) => r.gpuHours));
  return table({
    cls: "hours stack",
    caption: "GPU-hours per team this month, with the part above quota",
    columns: [["Team"], ["Own vs borrowed", "bar-cell"], ["GPU-hours", "num"], ["of which borrowed", "num"], ["Tasks", "num"]],
    rows: rows.map((r) =>
      h(
        "tr",
        { dataset: { team: r.team } },
        h("th", { scope: "row" }, r.team),
        h(
          "td",
          { class: "bar-cell" },
          quotaBar({
            used: r.gpuHours,
            borrowed: r.borrowedHours,
            nominal: 0,
            scale,
            label: `${r.team}: ${formatHours(r.gpuHours)} GPU-hours, ${formatHours(r.borrowedHours)} of them borrowed`,
          }),
        ),
        h("td", { class: "num", dataset: { col: "gpu-hours" } }, formatHours(r.gpuHours)),
        h("td", { class: "num", dataset: { col: "borrowed-hours" } }, formatHours(r.borrowedHours)),
        h("td", { class: "num" }, String(r.tasks)),
      ),
    ),
  });
}

function costs(r, month, ctx, rules) {
  const currency = r.currency || "USD";
  const teams = Object.entries(r.teams || {}).sort(([a], [b]) => a.localeCompare(b));
  const status = h("p", { class: "action-status", role: "status", "aria-live": "polite" });
  const sum = (key) => teams.reduce((acc, [, t]) => acc + (Number(t[key]) || 0), 0);
  // The API lists only the teams whose costs the caller may see; cluster and platform stay whole.
  const everyTeam = Boolean(ctx.who && (ctx.who.platform_admin || ctx.who.finance));
  return [
    h(
      "dl",
      { class: "stats wide" },
      h("div", { class: "stat" }, h("dt", {}, "Cluster cost"), h("dd", { dataset: { stat: "cluster" } }, formatMoney(r.cluster_cost_cents, currency))),
      h("div", { class: "stat" }, h("dt", {}, everyTeam ? "Charged to teams" : "Charged to your teams"), h("dd", {}, formatMoney(sum("total_cents"), currency))),
      h("div", { class: "stat" }, h("dt", {}, "Kept by the platform"), h("dd", {}, formatMoney(r.platform_cents, currency))),
    ),
    teams.length
      ? table({
          cls: "costs stack",
          caption: `Costs per team for ${month} (${currency})`,
          showCaption: true,
          columns: [
            ["Team"],
            ["GPU-hours", "num"],
            ["of which borrowed", "num"],
            ["Direct", "num"],
            ["Idle share", "num"],
            ["Admin share", "num"],
            ["Total", "num"],
            ["Invoice"],
          ],
          rows: teams.map(([name, t]) =>
            h(
              "tr",
              { dataset: { team: name } },
              h("th", { scope: "row" }, name),
              h("td", { class: "num" }, formatHours(t.gpu_hours)),
              h("td", { class: "num" }, formatHours(t.borrowed_gpu_hours)),
              h("td", { class: "num" }, formatMoney(t.direct_cents, currency)),
              h("td", { class: "num" }, formatMoney(t.idle_cents, currency)),
              h("td", { class: "num" }, formatMoney(t.admin_cents, currency)),
              h("td", { class: "num total" }, formatMoney(t.total_cents, currency)),
              h(
                "td",
                { class: "nowrap" },
                invoiceButton(ctx, month, name, "html", "HTML", status),
                " ",
                invoiceButton(ctx, month, name, "pdf", "PDF", status),
              ),
            ),
          ),
        })
      : h("p", { class: "empty" }, "No costs for this month."),
    rules
      ? h(
          "div",
          { class: "notes", id: "cost-notes" },
          h("p", { class: "note" }, rules.direct_cost),
          h("p", { class: "note" }, rules.idle_share),
          h("p", { class: "note" }, rules.kept_by_platform),
        )
      : null,
    status,
  ];
}

function invoiceButton(ctx, month, team, format, label, status) {
  const name = `${label} invoice for ${team}, ${month}`;
  if (!session.token) {
    // Signed in by the session cookie, which a plain link carries: the invoice opens in a new tab.
    const href = invoiceUrl(ctx.api.base, month, team, format);
    return h(
      "a",
      { href, target: "_blank", rel: "noopener", "aria-label": `${name} (opens in a new tab)`, id: `invoice-${team}-${format}` },
      label,
    );
  }
  return h(
    "button",
    {
      type: "button",
      class: "link",
      id: `invoice-${team}-${format}`,
      "aria-label": name,
      onclick: async () => {
        status.textContent = `Fetching the ${label} invoice for ${team}…`;
        try {
          const url = invoiceUrl(ctx.api.base, month, team, format);
          const response = await fetch(url, {
            headers: ctx.api.authHeaders(),
            credentials: "same-origin",
          });
          if (!response.ok) {
            const body = await response.json().catch(() => null);
            throw new ApiError(response.status, body?.error?.code || "error", body?.error?.message || `HTTP ${response.status}`);
          }
          const blob = await response.blob();
          const href = URL.createObjectURL(blob);
          // Downloaded rather than opened: a page made from a blob would run under this page's
          // Content-Security-Policy, which blocks the invoice's own styles.
          const a = h("a", { href, download: `invoice-${team}-${month}.${format}` });
          document.body.appendChild(a);
          a.click();
          a.remove();
          setTimeout(() => URL.revokeObjectURL(href), 60000);
          status.textContent = `${label} invoice for ${team} downloaded.`;
        } catch (e) {
          status.textContent = `Could not fetch the invoice: ${e instanceof ApiError ? e.explanation : e}`;
        }
      },
    },
    label,
  );
}
