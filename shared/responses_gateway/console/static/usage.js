// The Usage page: money and tokens per UTC day or hour, by tenant, key or model, over a date
// range; bars per bucket, a table of totals, and the per-bucket table as CSV. A tenant's key
// sees its own tenant's usage. One API call per load (and one for the CSV).

import { timeChart, legend } from "./chart.js";
import {
  api, el, show, ready, figuresTenant, isOperator, int, usd, table, td, emptyState, ApiError,
} from "./console.js";

const DAY = 86400;
const GROUPS = [["tenant", "Tenant"], ["api_key_id", "Key"], ["model", "Model"]];
const SHOWN = 6;

const dayOf = (seconds) => new Date(seconds * 1000).toISOString().slice(0, 10);
const secondsOf = (day) => Date.parse(`${day}T00:00:00Z`) / 1000;

function form(values) {
  const f = el("form", { class: "filters", "aria-label": "Usage range" });
  const input = (name, label, type) => el("label", {}, label, el("input", { name, type, value: values[name], required: true }));
  const select = (name, label, options) => el("label", {}, label, el("select", { name },
    options.map(([v, text]) => el("option", { value: v, text, selected: values[name] === v }))));
  const groups = GROUPS.filter(([v]) => v !== "tenant" || (isOperator() && !figuresTenant()));
  f.append(input("start", "From (UTC day)", "date"), input("end", "To (UTC day)", "date"),
    select("width", "Buckets", [["1d", "Days"], ["1h", "Hours"]]), select("group", "By", groups),
    select("metric", "Show", [["cost", "Cost"], ["tokens", "Tokens"]]), el("button", { type: "submit", text: "Apply" }));
  f.addEventListener("submit", (event) => {
    event.preventDefault();
    location.hash = `#/usage?${new URLSearchParams([...new FormData(f)])}`;
  });
  return f;
}

export async function usagePage(match) {
  const query = new URLSearchParams(match[1] || "");
  const today = Math.floor(Date.now() / 1000 / DAY) * DAY;
  const values = {
    start: query.get("start") || dayOf(today - 6 * DAY),
    end: query.get("end") || dayOf(today),
    width: query.get("width") || "1d",
    group: query.get("group") || (isOperator() && !figuresTenant() ? "tenant" : "model"),
    metric: query.get("metric") || "cost",
  };
  const params = {
    start: String(secondsOf(values.start)), end: String(secondsOf(values.end) + DAY),
    width: values.width, group: values.group, tenant: figuresTenant(),
  };
  const status = el("p", { role: "status", id: "usage-status", class: "muted" });
  const body = el("div", { id: "usage" });
  const csv = el("button", { type: "button", id: "usage-csv", text: "Download CSV" });
  show(el("div", { class: "toolbar" }, el("h2", { text: "Usage" }), csv), form(values), status, body);
  csv.addEventListener("click", async () => {
    try {
      const answer = await api("/v1/console/usage", { ...params, format: "csv" }, { raw: true });
      const link = el("a", { href: URL.createObjectURL(await answer.blob()), download: `usage-${values.start}-${values.end}-${values.width}.csv` });
      document.body.append(link);
      link.click();
      link.remove();
      status.textContent = "CSV downloaded.";
    } catch (err) {
      status.textContent = err.message;
    }
  });
  let usage;
  try {
    usage = await api("/v1/console/usage", params);
  } catch (err) {
    if (!(err instanceof ApiError) || err.status !== 400) throw err;
    body.replaceChildren(el("p", { class: "error", role: "alert", text: err.message }));
    ready("usage");
    return;
  }
  const scope = usage.tenant ? `tenant ${usage.tenant}` : "all tenants";
  status.textContent = `${values.start} to ${values.end} (UTC), ${scope}.`;
  const total = usage.total;
  if (!usage.keys.length) {
    body.replaceChildren(emptyState("No usage in this range.", el("p", { text: "Usage counts every response that ran, once it ends. Widen the range, or make a first request in the Playground." })));
    ready("usage");
    return;
  }
  const metric = values.metric === "tokens" ? (g) => g.input_tokens + g.output_tokens : (g) => Number(g.cost_usd);
  const shownKeys = usage.keys.slice(0, SHOWN);
  const series = shownKeys.map((key) => ({
    label: key || "(none)",
    values: usage.buckets.map((b) => metric(b.groups.find((g) => g.key === key) || { cost_usd: 0, input_tokens: 0, output_tokens: 0 })),
  }));
  if (usage.keys.length > SHOWN) {
    series.push({
      label: "others", values: usage.buckets.map((b) => b.groups.filter((g) => !shownKeys.includes(g.key)).reduce((s, g) => s + metric(g), 0)),
    });
  }
  const chart = el("div", { class: "chart tall", role: "img", "aria-label": `${values.metric === "tokens" ? "Tokens" : "Cost"} per ${values.width === "1h" ? "hour" : "day"} by ${values.group}` });
  const groupLabel = (GROUPS.find(([v]) => v === values.group) || [null, "Group"])[1];
  body.replaceChildren(
    el("ul", { class: "statuses" }, el("li", {}, el("strong", { text: usd(total.cost_usd) }), " cost"),
      el("li", {}, el("strong", { text: int(total.input_tokens + total.output_tokens) }), " tokens"),
      el("li", {}, el("strong", { text: int(total.requests) }), " responses"),
      el("li", { class: "muted", id: "usage-refusals", text: "Requests refused before they ran cost nothing and are not counted here (the Overview and Requests count them)." })),
    chart, legend(series),
    table(`Usage by ${values.group}`, [groupLabel, ["Requests", "num"], ["Input", "num"], ["Cached", "num wide"], ["Output", "num"], ["Reasoning", "num wide"], ["Cost", "num"]],
      usage.totals.map((g) => el("tr", { "data-key": g.key },
        td(g.key || "(none)", "clip"), td(int(g.requests), "num"), td(int(g.input_tokens), "num"), td(int(g.cached_tokens), "num wide"),
        td(int(g.output_tokens), "num"), td(int(g.reasoning_tokens), "num wide"), td(usd(g.cost_usd), "num")))));
  timeChart(chart, {
    starts: usage.buckets.map((b) => b.start), width: usage.width, series, kind: "bar", stacked: true, height: 200,
    format: values.metric === "tokens" ? (v) => int(v) : usd,
  });
  ready("usage");
}
