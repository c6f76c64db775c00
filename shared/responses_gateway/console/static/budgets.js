// The Budgets page: every tenant's day and month spend against the limits in effect for it,
// those over a limit (refused while budgets are enforced) or near one (80%) first and flagged,
// each with a bar to scale. Limits are per tenant; a tenant is edited on the Keys page. One API
// call (operators only; a tenant's key sees its own budget on the Keys page).

import { api, el, show, ready, isOperator, int, usd, pct, table, td, emptyState } from "./console.js";

const LABELS = { daily_tokens: "Daily tokens", monthly_tokens: "Monthly tokens",
  daily_cost_usd: "Daily cost", monthly_cost_usd: "Monthly cost" };
const amount = (name, value) => (name.endsWith("_usd") ? usd(value) : int(Number(value)));

function meter(row) {
  const bar = el("div", { class: `bar budget-${row.state}` });
  bar.style.width = `${Math.min(100, 100 * row.share)}%`;  // CSSOM: the CSP allows no style attribute
  return el("div", { class: "track", "aria-hidden": "true" }, bar);
}

function limits(t) {
  if (!t.limits.length) return el("span", { class: "muted", text: "no limit" });
  return el("ul", { class: "budget-limits" }, t.limits.map((l) => el("li", { "data-limit": l.name, "data-state": l.state },
    el("span", { text: `${LABELS[l.name]}: ${amount(l.name, l.spent)} of ${amount(l.name, l.limit)} (${pct(l.share)})` }),
    l.state !== "ok" ? el("span", { class: `badge budget-flag budget-${l.state}`, text: l.state }) : null,
    meter(l))));
}

export async function budgetsPage() {
  if (!isOperator()) {
    show(el("h2", { text: "Budgets" }), emptyState("Only operators see every tenant's budget.",
      el("p", {}, "Your tenant's budget and spend are on the ", el("a", { href: "#/keys", text: "Keys page" }), ".")));
    ready("budgets");
    return;
  }
  const answer = await api("/v1/console/budgets/all");
  const over = answer.data.filter((t) => t.state === "over").length;
  const near = answer.data.filter((t) => t.state === "near").length;
  const rows = answer.data.map((t) => el("tr", { "data-tenant": t.tenant, "data-state": t.state, class: t.state === "ok" ? null : `budget-row-${t.state}` },
    td(t.tenant, "clip"),
    el("td", {}, el("span", { class: `badge budget-${t.state}`, text: t.state === "ok" ? "ok" : t.state })),
    el("td", { class: "budget-cell" }, limits(t)),
    td(`${int(t.spend.day_tokens)} · ${usd(t.spend.day_cost_usd)}`, "num wide"),
    td(`${int(t.spend.month_tokens)} · ${usd(t.spend.month_cost_usd)}`, "num wide"),
    td(el("a", { href: `#/keys?tenant=${encodeURIComponent(t.tenant)}`, text: t.own ? "edit (own limits)" : "set limits" }), "wide")));
  show(el("h2", { text: "Budgets" }),
    answer.enforced ? el("p", { class: "ok", id: "budgets-enforced", text: "Budgets are enforced: a tenant at or over a limit is refused (429) until the period ends." })
      : el("div", { class: "alert warn", role: "note", id: "budgets-enforced" }, el("strong", { text: "Not enforced. " }), answer.enforcement),
    el("p", { id: "budgets-summary", class: over ? "bad" : "muted",
      text: `${answer.data.length} tenant${answer.data.length === 1 ? "" : "s"}: ${over} over a limit, ${near} near one (80% or more).` }),
    el("p", { class: "muted hint", text: "Limits are per tenant (input + output tokens, and cost, per UTC day and month). A tenant that needs limits per key gives each key a tenant of its own." }),
    table("Budgets of every tenant, over and near first", ["Tenant", "State", "Spend against limits", ["Today", "num wide"], ["This month", "num wide"], ["", "wide"]], rows));
  ready("budgets");
}
