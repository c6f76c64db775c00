// The Keys page: the gateway's API keys (created, last used, the signed-in one marked and never
// revocable from itself), creating a key (its value shown once) and revoking one; a tenant's
// budget limits and its day and month spend, saying plainly whether the gateway enforces them.

import { api, el, show, ready, state, objectTenant, isOperator, utc, usd, int, facts, table, td, ApiError } from "./console.js";

const LIMITS = [["daily_tokens", "Daily tokens"], ["monthly_tokens", "Monthly tokens"],
  ["daily_cost_usd", "Daily cost (USD)"], ["monthly_cost_usd", "Monthly cost (USD)"]];

function budgetSection() {
  const status = el("p", { id: "budget-status", role: "status" });
  const tenant = el("input", { id: "budget-tenant", name: "tenant", value: objectTenant(location.hash.split("?")[1]) || state.me.tenant, size: 18,
    readonly: !isOperator(), list: "tenant-names" });
  const inputs = LIMITS.map(([name]) => el("input", { id: `limit-${name}`, name, inputmode: "decimal", size: 12,
    readonly: !isOperator() }));
  const spend = el("div", { id: "budget-spend" });
  const enforcement = el("div", { id: "budget-enforcement" });
  const form = el("form", { class: "filters", id: "budget-form", "aria-label": "Budget of a tenant" },
    el("label", { for: "budget-tenant" }, "Tenant", tenant),
    LIMITS.map(([, label], i) => el("label", { for: inputs[i].id }, label, inputs[i])),
    el("button", { type: "button", id: "budget-load", text: "Show" }),
    isOperator() ? el("button", { type: "submit", text: "Save limits" }) : null);
  const fill = (view) => {
    LIMITS.forEach(([name], i) => { inputs[i].value = view.own && view.own[name] !== null ? view.own[name] : ""; });
    const eff = view.effective || {};
    enforcement.replaceChildren(view.enforced ? el("p", { class: "ok", text: "Budgets are enforced: a request over a limit is refused (429) before it reaches a model." })
      : el("div", { class: "alert warn", role: "note" }, el("strong", { text: "Not enforced. " }), view.enforcement));
    spend.replaceChildren(facts([
      ["Today (UTC)", `${int(view.spend.day_tokens)} tokens, ${usd(view.spend.day_cost_usd)}`],
      ["This month (UTC)", `${int(view.spend.month_tokens)} tokens, ${usd(view.spend.month_cost_usd)}`],
      ["Limits in effect", LIMITS.filter(([n]) => eff[n] !== null && eff[n] !== undefined)
        .map(([n, label]) => `${label}: ${eff[n]}`).join("; ") || (view.enforced ? "none" : "none (not enforced)")],
    ]));
  };
  const load = async () => fill(await api("/v1/console/budgets", { tenant: tenant.value }));
  form.querySelector("#budget-load").addEventListener("click", () => load().then(() => {
    status.textContent = `Budget of ${tenant.value}`;
  }).catch((err) => { status.textContent = err.message; }));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const limits = {};
    LIMITS.forEach(([name], i) => { if (inputs[i].value.trim()) limits[name] = inputs[i].value.trim(); });
    api("/v1/console/budgets", { tenant: tenant.value }, { method: "PUT", body: limits })
      .then((view) => {
        fill(view);
        status.textContent = view.enforced ? `Saved the limits of ${tenant.value}: enforced from the next request.`
          : `Saved the limits of ${tenant.value}, but they are not enforced (see below).`;
      })
      .catch((err) => { status.textContent = err.message; });
  });
  return [el("section", { "aria-labelledby": "budget-title" },
    el("h3", { id: "budget-title", text: "Budget" }), form, status, enforcement, spend), load];
}

function keysSection() {
  const note = el("p", { id: "keys-note", role: "status" });
  const created = el("div", { id: "new-key", role: "status", "aria-live": "polite" });
  const tenant = el("input", { id: "key-tenant", name: "tenant", required: true, size: 18, list: "tenant-names" });
  const name = el("input", { id: "key-name", name: "name", size: 16, pattern: "[A-Za-z0-9._@\\-]{1,64}", title: "1-64 of A-Z a-z 0-9 . _ @ -" });
  const form = el("form", { class: "filters", id: "key-form", "aria-label": "Create a key" },
    el("label", { for: "key-tenant" }, "Tenant", tenant), el("label", { for: "key-name" }, "Name (optional)", name),
    el("button", { type: "submit", text: "Create key" }));
  const box = el("div", { id: "keys-table" });
  const row = (k) => {
    const revoke = k.current
      ? el("span", { class: "muted", title: "The key this console is signed in with cannot revoke itself", text: "signed in" })
      : el("button", { type: "button", text: "Revoke", "aria-label": `Revoke key ${k.id}` });
    if (!k.current) {
      revoke.addEventListener("click", () => {
        if (revoke.dataset.armed !== "1") {  // a second click confirms
          revoke.dataset.armed = "1";
          revoke.textContent = "Confirm revoke";
          return;
        }
        api(`/v1/console/keys/${encodeURIComponent(k.id)}`, { tenant: k.tenant }, { method: "DELETE" })
          .then(() => { note.textContent = `Revoked ${k.id}`; return load(); })
          .catch((err) => { note.textContent = err.message; });
      });
    }
    return el("tr", { "data-id": k.id, class: k.current ? "current" : null },
      td(el("span", { class: "id", title: k.id, text: k.id }), "clip"), td(k.tenant, "clip"), td(k.name || "", "wide clip"),
      td(k.created_at ? utc(k.created_at).slice(0, 16) : "–", "wide"),
      td(k.last_used_at ? `${utc(k.last_used_at).slice(0, 13)}h` : "not in 7 days", "wide"),
      td(k.enabled ? "" : "disabled", "wide"), td(revoke));
  };
  const load = async () => {
    try {
      const answer = await api("/v1/console/keys");
      box.replaceChildren(table("API keys", ["Key id", "Tenant", ["Name", "wide"], ["Created (UTC)", "wide"], ["Last used (UTC hour)", "wide"], ["State", "wide"], "Action"],
        answer.data.map(row)));
    } catch (err) {
      if (!(err instanceof ApiError) || err.status !== 400) throw err;
      form.hidden = true;
      note.textContent = err.message;  // keys from GATEWAY_API_KEYS, or none at all
    }
  };
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const body = { tenant: tenant.value.trim() };
    if (name.value.trim()) body.name = name.value.trim();
    api("/v1/console/keys", {}, { method: "POST", body }).then((key) => {
      created.replaceChildren(el("p", { text: `New key ${key.id} for tenant ${key.tenant}. Copy it now: it is shown once.` }),
        el("code", { id: "new-key-value", text: key.value }));
      tenant.value = "";
      name.value = "";
      return load();
    }).catch((err) => { note.textContent = err.message; });
  });
  return [el("section", { "aria-labelledby": "keys-title" }, el("h3", { id: "keys-title", text: "API keys" }),
    form, created, note, box), load];
}

export async function keysPage() {
  const [budget, loadBudget] = budgetSection();
  const names = el("datalist", { id: "tenant-names" }, (state.tenants || []).map((t) => el("option", { value: t })));
  if (!isOperator()) {
    show(el("h2", { text: "Keys and budgets" }),
      el("p", { text: "Creating, listing and revoking keys needs an operator key; this is your tenant's budget." }), budget);
    await loadBudget();
  } else {
    const [keys, loadKeys] = keysSection();
    show(el("h2", { text: "Keys and budgets" }), names, keys, budget);
    await Promise.all([loadKeys(), loadBudget()]);
  }
  ready("keys");
}
