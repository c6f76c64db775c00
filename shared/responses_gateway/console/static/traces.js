// The Traces pages: the list (duration, spans, errors, tokens; paged by cursor) and one trace as
// a tree of spans nested by parent, each with a bar to scale, its duration, errors and triggered
// guardrails marked, and for model calls the gateway's tokens, cost and a link to the response.

import {
  api, el, show, ready, tenantParam, allTenants, objectTenant, recordHref, utc, ms, int, usd, shortId, facts,
  emptyState, code, table, td,
} from "./console.js";

const WINDOWS = [["", "Any time"], ["3600", "Last hour"], ["86400", "Last 24 hours"], ["604800", "Last 7 days"]];
const FILTERS = ["workflow", "errors", "window", "since", "until"];

function filterForm(filters) {
  const form = el("form", { class: "filters", role: "search", "aria-label": "Filter traces" },
    el("label", {}, "Workflow", el("input", { name: "workflow", type: "search", value: filters.workflow || "", size: 16 })),
    el("label", { class: "inline" }, el("input", { type: "checkbox", name: "errors", value: "1", checked: filters.errors === "1" }), " With errors only"),
    el("label", {}, "Received", el("select", { name: "window" }, WINDOWS.map(([v, label]) => el("option", { value: v, text: label, selected: (filters.window || "") === v })))),
    el("button", { type: "submit", text: "Apply" }),
    el("button", { type: "button", text: "Clear", onclick: () => { location.hash = "#/traces"; } }));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const params = new URLSearchParams([...new FormData(form)].filter(([, v]) => v));
    location.hash = `#/traces?${params}`;
  });
  return form;
}
import { timeline } from "./items.js";

function howToSend() {
  return emptyState("No traces yet.",
    el("p", { text: "Point the openai-agents SDK's trace exporter at this gateway; each run then shows here as a tree:" }),
    code(`from agents import set_tracing_export_api_key\nfrom agents.tracing.processors import default_exporter\n\nset_tracing_export_api_key("<this gateway's API key>")\ndefault_exporter().endpoint = "${location.origin}/v1/traces/ingest"`));
}

export async function tracesPage(match) {
  const query = new URLSearchParams(match[1] || "");
  const filters = Object.fromEntries([...query].filter(([k]) => FILTERS.includes(k)));
  const filtered = Object.keys(filters).length > 0;
  const everyTenant = allTenants();
  const more = el("button", { type: "button", text: "Older", hidden: true });
  const box = el("div");
  const count = el("p", { class: "muted", id: "trace-count" });
  show(el("h2", { text: "Traces" }), filterForm(filters), count, box, more);
  const params = { ...filters, tenant: tenantParam(), limit: "50" };
  delete params.window;
  if (filters.window) params.since = String(Math.floor(Date.now() / 1000) - Number(filters.window));
  let cursor;
  let body = null;
  let shown = 0;
  const load = async () => {
    const answer = await api("/v1/console/traces", { ...params, before: cursor });
    shown += answer.data.length;
    count.textContent = `${shown} trace${shown === 1 ? "" : "s"} shown (${answer.tenant === "*" ? "all tenants" : `tenant ${answer.tenant}`})${filtered ? ", filtered" : ""}`;
    const rows = answer.data.map((t) => el("tr", { "data-id": t.id, "data-tenant": t.tenant },
      td(el("a", { href: recordHref("trace", t.id, t.tenant), title: t.id, text: t.workflow_name || shortId(t.id) }), "clip"),
      everyTenant ? td(t.tenant, "clip tenant") : null,
      td(utc(Math.floor(t.received_ms / 1000)).slice(5, 16), "wide"),
      td(ms(t.duration_ms), "num"),
      td(int(t.spans), "num"),
      td(t.errors ? el("span", { class: "bad", text: int(t.errors) }) : "0", "num"),
      td(int(t.tokens), "num")));
    if (body) body.append(...rows);
    else if (rows.length) {
      box.replaceChildren(table("Traces, most recent first",
        ["Workflow", ...(everyTenant ? ["Tenant"] : []), ["Received (UTC)", "wide"], ["Duration", "num"], ["Spans", "num"], ["Errors", "num"], ["Tokens", "num"]], rows));
      body = box.querySelector("tbody");
    } else if (filtered) {
      box.replaceChildren(emptyState("No trace matches these filters.", el("p", { text: answer.next_cursor ? "Older traces are left to search." : "Every trace was searched." })));
    } else box.replaceChildren(howToSend());
    cursor = answer.next_cursor;
    more.hidden = !cursor;
  };
  more.addEventListener("click", () => load().catch(() => {}));
  await load();
  ready("traces");
}

const spanTitle = (s) => {
  const d = s.span_data || {};
  return `${d.type || "span"}${d.name ? ` ${d.name}` : ""}`;
};

function failed(s) {
  const d = s.span_data || {};
  if (s.error) return `error: ${s.error.message || JSON.stringify(s.error)}`;
  if (d.type === "guardrail" && d.triggered) return "guardrail triggered";
  return "";
}

function spanDetail(s) {
  const d = s.span_data || {};
  const g = s.gateway;
  const parts = [];
  if (s.error) parts.push(el("pre", { class: "bad", text: JSON.stringify(s.error, null, 2) }));
  if (d.deleted) parts.push(el("p", { class: "muted deleted", text: "Deleted: the response this span names was deleted, and its content with it." }));
  if (g && g.input_items) {
    parts.push(el("p", { class: "muted", text: "Model call input and output" }), timeline("Model call", g.input_items, g.output));
  } else if (g && g.request) {
    parts.push(el("p", { class: "muted", text: `Not stored; ${g.request.usage.total_tokens} tokens, ${g.request.status}` }));
  }
  if (d.type === "function") parts.push(el("pre", { text: `${d.input ?? ""}\n→ ${d.output ?? ""}` }));
  if (d.type === "generation") parts.push(el("pre", { text: JSON.stringify({ model: d.model, input: d.input, output: d.output }, null, 2) }));
  if (d.type === "handoff") parts.push(el("p", { text: `${d.from_agent} → ${d.to_agent}` }));
  return parts.length ? el("div", { class: "span-detail" }, parts) : null;
}

function tree(spans) {  // spans nested by parent_id, each level in start order
  const ids = new Set(spans.map((s) => s.id));
  const children = new Map();
  for (const s of spans) {
    const parent = s.parent_id && ids.has(s.parent_id) ? s.parent_id : null;
    if (!children.has(parent)) children.set(parent, []);
    children.get(parent).push(s);
  }
  const ordered = [];
  const walk = (parent, depth) => {
    for (const s of children.get(parent) || []) {
      ordered.push([s, depth]);
      walk(s.id, depth + 1);
    }
  };
  walk(null, 0);
  return ordered;
}

export async function tracePage(match) {
  const id = decodeURIComponent(match[1]);
  const tenant = objectTenant(match[2]);
  const view = await api(`/v1/console/traces/${encodeURIComponent(id)}`, { tenant });
  const time = (s, name) => Date.parse(s[name] || s.started_at);
  const times = view.spans.flatMap((s) => [time(s, "started_at"), time(s, "ended_at")]).filter((t) => !Number.isNaN(t));
  const t0 = Math.min(...times);
  const total = Math.max(1, Math.max(...times) - t0);
  let tokens = 0;
  let cost = 0;
  let errors = 0;
  const rows = tree(view.spans).map(([s, depth]) => {
    const start = time(s, "started_at") - t0;
    const end = time(s, "ended_at") - t0;
    const bar = el("div", { class: "bar" });
    bar.style.marginLeft = `${(100 * start) / total}%`;  // CSSOM: the CSP allows no style attribute
    bar.style.width = `${Math.max(0.5, (100 * (end - start)) / total)}%`;
    const problem = failed(s);
    if (problem) { bar.classList.add("bar-bad"); errors += 1; }
    const d = s.span_data || {};
    const g = (s.gateway && s.gateway.request) || null;
    if (g) { tokens += g.usage.total_tokens; cost += Number(g.usage.cost_usd); }
    const spanTokens = g ? g.usage.total_tokens : d.usage ? (d.usage.input_tokens || 0) + (d.usage.output_tokens || 0) : null;
    const item = el("li", { "data-span": s.id, "data-type": d.type || "", "data-depth": String(depth), class: problem ? "span-bad" : null },
      el("div", { class: "span-head" },
        el("span", { class: `indent d${Math.min(depth, 8)}` }),
        el("span", { class: "step-kind", text: spanTitle(s) }),
        d.response_id ? el("a", { href: `#/response/${encodeURIComponent(d.response_id)}${tenant ? `?tenant=${encodeURIComponent(tenant)}` : ""}`, class: "id", title: d.response_id, text: shortId(d.response_id) }) : null,
        d.deleted ? el("span", { class: "badge status-cancelled", text: "deleted" }) : null,
        el("span", { class: "step-side", text: ms(end - start) }),
        spanTokens !== null ? el("span", { class: "step-side", text: `${int(spanTokens)} tokens${g ? ` · ${usd(g.usage.cost_usd)}` : ""}` }) : null,
        problem ? el("span", { class: "badge status-failed", text: problem.slice(0, 80) }) : null),
      el("div", { class: "track", "aria-hidden": "true" }, bar));
    const detail = spanDetail(s);
    if (detail) item.append(el("details", {}, el("summary", { text: "Details" }), detail));
    return item;
  });
  const trace = view.trace || {};
  show(el("h2", { class: "id-title", text: `Trace ${trace.workflow_name || id}` }),
    facts([["Trace id", id], ["Tenant", view.tenant], ["Workflow", trace.workflow_name], ["Group", trace.group_id], ["Spans", view.spans.length],
      ["Duration", times.length ? ms(total) : undefined], ["Errors", errors || "none"],
      ["Model tokens (gateway)", tokens ? int(tokens) : undefined], ["Cost", tokens ? usd(cost) : undefined]]),
    view.spans.length ? el("ol", { class: "waterfall", "aria-label": "Spans nested by parent, in start order" }, rows)
      : el("p", { class: "muted", text: "No span arrived for this trace yet." }));
  ready("trace");
}
