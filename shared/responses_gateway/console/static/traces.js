// The Traces pages: the list (duration, spans, errors, tokens; paged by cursor) and one trace as
// a tree of spans nested by parent, each with a bar to scale, its duration, errors and triggered
// guardrails marked, and for model calls the gateway's tokens, cost and a link to the response.

import {
  api, el, show, ready, tenantParam, utc, ms, int, usd, shortId, facts, emptyState, code, table, td,
} from "./console.js";
import { timeline } from "./items.js";

function howToSend() {
  return emptyState("No traces yet.",
    el("p", { text: "Point the openai-agents SDK's trace exporter at this gateway; each run then shows here as a tree:" }),
    code(`from agents import set_tracing_export_api_key\nfrom agents.tracing.processors import default_exporter\n\nset_tracing_export_api_key("<this gateway's API key>")\ndefault_exporter().endpoint = "${location.origin}/v1/traces/ingest"`));
}

export async function tracesPage() {
  const more = el("button", { type: "button", text: "Older", hidden: true });
  const box = el("div");
  show(el("h2", { text: "Traces" }), box, more);
  let cursor;
  let body = null;
  const load = async () => {
    const answer = await api("/v1/console/traces", { tenant: tenantParam(), limit: "50", before: cursor });
    const rows = answer.data.map((t) => el("tr", { "data-id": t.id },
      td(el("a", { href: `#/trace/${encodeURIComponent(t.id)}`, title: t.id, text: t.workflow_name || shortId(t.id) }), "clip"),
      td(utc(Math.floor(t.received_ms / 1000)).slice(5, 16), "wide"),
      td(ms(t.duration_ms), "num"),
      td(int(t.spans), "num"),
      td(t.errors ? el("span", { class: "bad", text: int(t.errors) }) : "0", "num"),
      td(int(t.tokens), "num")));
    if (body) body.append(...rows);
    else if (rows.length) {
      box.replaceChildren(table("Traces, most recent first",
        ["Workflow", ["Received (UTC)", "wide"], ["Duration", "num"], ["Spans", "num"], ["Errors", "num"], ["Tokens", "num"]], rows));
      body = box.querySelector("tbody");
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
  const view = await api(`/v1/console/traces/${encodeURIComponent(id)}`, { tenant: tenantParam() });
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
        d.response_id ? el("a", { href: `#/response/${encodeURIComponent(d.response_id)}`, class: "id", title: d.response_id, text: shortId(d.response_id) }) : null,
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
    facts([["Trace id", id], ["Workflow", trace.workflow_name], ["Group", trace.group_id], ["Spans", view.spans.length],
      ["Duration", times.length ? ms(total) : undefined], ["Errors", errors || "none"],
      ["Model tokens (gateway)", tokens ? int(tokens) : undefined], ["Cost", tokens ? usd(cost) : undefined]]),
    view.spans.length ? el("ol", { class: "waterfall", "aria-label": "Spans nested by parent, in start order" }, rows)
      : el("p", { class: "muted", text: "No span arrived for this trace yet." }));
  ready("trace");
}
