// The Overview page: is the gateway healthy, and who spends what. Request rate, error rate,
// latency and time to first token (p50/p95/p99), tokens and cost over a range, each a chart with
// its figure beside it, then the same broken down by tenant, key, model and deployment (with the
// deployments' cooldowns). One API call per load; the figures come from pre-aggregated rows.

import { timeChart, legend } from "./chart.js";
import {
  api, el, show, ready, every, figuresTenant, isOperator, int, ms, usd, pct,
  table, td, emptyState, code, badge,
} from "./console.js";

const RANGES = [["1h", "Last hour"], ["6h", "Last 6 hours"], ["24h", "Last 24 hours"], ["7d", "Last 7 days"], ["30d", "Last 30 days"]];

function rate(perMinute) {
  if (perMinute >= 10) return `${Math.round(perMinute)}/min`;
  if (perMinute >= 0.1) return `${perMinute.toFixed(1)}/min`;
  return `${(perMinute * 60).toFixed(perMinute * 60 >= 10 ? 0 : 1)}/h`;
}

const tickUsd = (v) => (v === 0 ? "$0" : `$${Number(v.toPrecision(2))}`);

function card(title, figure, detail, spec, series) {
  const chart = el("div", { class: "chart", role: "img", "aria-label": `${title} per bucket` });
  const box = el("section", { class: "card", "aria-label": title },
    el("div", { class: "card-head" }, el("h3", { text: title }),
      el("p", { class: "figure" }, el("span", { class: "big", text: figure }), el("span", { class: "muted", text: detail }))),
    chart, series.length > 1 ? legend(series) : null);
  return [box, () => timeChart(chart, { ...spec, series })];
}

function breakdown(name, rows, linkFor) {
  return table(`${name}: requests, errors, latency, tokens and cost`,
    [name, ["Requests", "num"], ["Errors", "num"], ["p95", "num wide"], ["Tokens", "num wide"], ["Cost", "num"]],
    rows.map((r) => el("tr", { "data-key": r.key },
      td(linkFor && r.key !== "(others)" ? linkFor(r.key) : r.key || "(none)"),
      td(int(r.requests), "num"),
      td(r.errors ? `${int(r.errors)} (${pct(r.error_rate)})` : "0", r.errors ? "num bad" : "num"),
      td(ms(r.latency_ms.p95), "num wide"),
      td(int(r.input_tokens + r.output_tokens), "num wide"),
      td(usd(r.cost_usd), "num"))));
}

/** The Requests page showing exactly the rows a figure counted: its filter, the overview's
 * range (the buckets' start to end) and its tenant scope ("*": every tenant). */
function requestsHref(o, filter) {
  const params = new URLSearchParams(filter);
  if (isOperator()) params.set("tenant", o.tenant || "*");
  params.set("since", String(o.start));
  params.set("until", String(o.end));
  return `#/requests?${params}`;
}

function deployments(o, rows) {
  return table("Deployments: calls answered and failed, health",
    ["Deployment", ["Answered", "num"], ["Failed", "num"], "Health"],
    rows.map((d) => el("tr", { "data-deployment": d.id },
      td(el("a", { href: requestsHref(o, { deployment: d.id }), text: d.id })),
      td(int(d.answered), "num"), td(int(d.failed), d.failed ? "num bad" : "num"),
      td(d.cooldown_until ? el("span", { class: "bad", text: `cooldown until ${new Date(d.cooldown_until * 1000).toISOString().slice(11, 19)} UTC` })
        : d.recent_failures ? `${d.recent_failures} recent failure${d.recent_failures === 1 ? "" : "s"}`
          : d.configured ? "ok" : ""))));
}

function firstRequest() {
  return emptyState("No requests in this range yet.",
    el("p", { text: "Send a first request, or open the Playground:" }),
    code(`curl ${location.origin}/v1/responses \\\n  -H "authorization: Bearer $KEY" -H 'content-type: application/json' \\\n  -d '{"model": "<a model>", "input": "Hello"}'`),
    el("p", {}, el("a", { href: "#/playground", text: "Open the Playground" })));
}

export async function overviewPage(match) {
  const params = new URLSearchParams(match[1] || "");
  const range = params.get("range") || "24h";
  const select = el("select", { id: "range", name: "range" }, RANGES.map(([value, label]) => el("option", { value, text: label, selected: value === range })));
  select.addEventListener("change", () => { location.hash = `#/overview?range=${select.value}`; });
  const refresh = el("button", { type: "button", text: "Refresh" });
  const auto = el("input", { type: "checkbox", id: "auto-refresh" });
  const head = el("div", { class: "toolbar" }, el("h2", { text: "Overview" }),
    el("label", {}, "Range ", select), refresh, el("label", { class: "inline" }, auto, " Refresh every 30 s"));
  const body = el("div", { id: "overview" });
  show(head, body);

  const load = async () => {
    const answer = await api("/v1/console/overview", { range, tenant: figuresTenant() });
    render(body, answer);
    ready("overview");
  };
  refresh.addEventListener("click", () => load().catch(() => {}));
  let stop = null;
  auto.addEventListener("change", () => {
    if (stop) { stop(); stop = null; }
    if (auto.checked) stop = every(30000, () => load().catch(() => {}));
  });
  await load();
}

function render(body, o) {
  const t = o.totals;
  const scope = o.tenant ? `tenant ${o.tenant}` : isOperator() ? "all tenants" : "";
  const summary = el("p", { class: "muted", id: "overview-scope", text: `${new Date(o.start * 1000).toISOString().slice(0, 16).replace("T", " ")} – ${new Date(o.end * 1000).toISOString().slice(0, 16).replace("T", " ")} UTC, ${o.width >= 3600 ? "hourly" : "5-minute"} buckets${scope ? `, ${scope}` : ""}` });
  if (!t.requests) {
    body.replaceChildren(summary, firstRequest());
    return;
  }
  const starts = o.buckets.map((b) => b.start);
  const perMin = (b) => b.requests * 60 / o.width;
  const spec = { starts, width: o.width };
  const cards = [
    card("Requests", rate(t.rate_per_min), `${int(t.requests)} in all`,
      { ...spec, kind: "bar", format: (v) => (Number.isInteger(v) ? String(v) : v.toFixed(1)) },
      [{ label: "requests/min", values: o.buckets.map(perMin) }]),
    card("Error rate", pct(t.error_rate), `${int(t.errors)} failed or refused`,
      { ...spec, kind: "line", format: (v) => `${Math.round(100 * v)}%` },
      [{ label: "errors", values: o.buckets.map((b) => b.error_rate), color: "#b42318" }]),
    card("Latency", `p50 ${ms(t.latency_ms.p50)}`, `p95 ${ms(t.latency_ms.p95)} · p99 ${ms(t.latency_ms.p99)}`,
      { ...spec, kind: "line", format: ms },
      ["p50", "p95", "p99"].map((p) => ({ label: p, values: o.buckets.map((b) => b.latency_ms[p]) }))),
    card("Time to first token", `p50 ${ms(t.ttft_ms.p50)}`, `p95 ${ms(t.ttft_ms.p95)} · p99 ${ms(t.ttft_ms.p99)}`,
      { ...spec, kind: "line", format: ms },
      ["p50", "p95", "p99"].map((p) => ({ label: p, values: o.buckets.map((b) => b.ttft_ms[p]) }))),
    card("Tokens", int(t.input_tokens + t.output_tokens), `${int(t.input_tokens)} in (${int(t.cached_tokens)} cached) · ${int(t.output_tokens)} out`,
      { ...spec, kind: "bar", stacked: true, format: (v) => int(v) },
      [{ label: "input", values: o.buckets.map((b) => b.input_tokens) }, { label: "output", values: o.buckets.map((b) => b.output_tokens) }]),
    card("Cost", usd(t.cost_usd), `${int(t.model_calls)} model calls`,
      { ...spec, kind: "bar", format: tickUsd },
      [{ label: "cost", values: o.buckets.map((b) => Number(b.cost_usd)), color: "#1a7f37" }]),
  ];
  const statuses = Object.entries(t.statuses).map(([s, n]) => el("li", {}, el("a", { href: requestsHref(o, { status: s }), class: "status-link" }, badge(s), ` ${int(n)}`)));
  const linkTenant = isOperator() && !o.tenant
    ? (key) => el("a", { href: requestsHref({ ...o, tenant: key }, {}), text: key }) : null;
  const sections = [
    ["By tenant", "Tenant", "tenant", linkTenant],
    ["By key", "Key", "api_key_id", (key) => el("a", { href: requestsHref(o, { api_key_id: key }), text: key || "(no key)" })],
    ["By model", "Model", "model", (key) => el("a", { href: requestsHref(o, { model: key }), text: key || "(none)" })],
  ].filter(([, , name]) => name !== "tenant" || (isOperator() && !o.tenant));
  body.replaceChildren(summary,
    el("ul", { class: "statuses", "aria-label": "Requests by status" }, statuses,
      t.failovers ? el("li", { text: `${int(t.failovers)} failed over` }) : null),
    el("div", { class: "cards" }, cards.map(([box]) => box)),
    el("div", { class: "breakdowns" },
      sections.map(([title, column, name, link]) => el("section", { "aria-label": title }, el("h3", { text: title }), breakdown(column, o.by[name], link))),
      o.deployments.length ? el("section", { "aria-label": "By deployment" }, el("h3", { text: "By deployment" }), deployments(o, o.deployments)) : null));
  for (const [, draw] of cards) draw();
}
