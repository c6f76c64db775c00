// The Requests page: the request log, newest first, filtered by the store over the whole log
// (a response id or text, status from a list, model, key, deployment, client session, time
// window or the Overview's range) and paged by cursor; in "All tenants", every tenant's rows,
// each naming its tenant. Compact columns; a row opens its details. The live tail asks only for
// what is newer than the newest row shown (every 3 s; every 15 s across all tenants).

import {
  api, el, show, ready, every, tenantParam, allTenants, recordHref, utcDay, utcTime, ms, int, usd, shortId,
  clientId, badge, facts, emptyState, code, td,
} from "./console.js";

const STATUSES = ["completed", "incomplete", "failed", "cancelled", "refused"];
const WINDOWS = [["", "Any time"], ["900", "Last 15 minutes"], ["3600", "Last hour"], ["86400", "Last 24 hours"], ["604800", "Last 7 days"]];
const FILTERS = ["status", "model", "api_key_id", "deployment", "session", "window", "since", "until", "q"];
const MAX_ROWS = 1000;

const cursorTime = (cursor) => Number(String(cursor).slice(0, 13));

function errorText(r) {
  const parts = [];
  if (r.http_status && r.http_status !== 200) parts.push(`HTTP ${r.http_status}`);
  if (r.error_code) parts.push(r.error_code);
  if (r.incomplete_reason) parts.push(r.incomplete_reason);
  return parts.join(" · ");
}

function details(r) {
  const u = r.usage;
  const attempts = (r.attempts_failed || []).map((a) => `${a.deployment} (${a.kind}${a.status ? ` ${a.status}` : ""})`).join(", ");
  const client = Object.entries(r.client || {}).map(([k, v]) => `${k}=${v}`).join(", ");
  return el("div", { class: "detail" }, facts([
    ["Response", r.status === "refused" ? r.id : el("a", { href: recordHref("response", r.id, r.tenant), text: r.id })],
    ["Tenant", r.tenant],
    ["Ended (UTC)", `${utcDay(r.ended_ms || r.ended_at * 1000)} ${utcTime(r.ended_ms || r.ended_at * 1000)}`],
    ["Error", [r.http_status ? `HTTP ${r.http_status}` : "", r.error_code, r.error_message, r.error_param ? `param: ${r.error_param}` : ""].filter(Boolean).join(" · ")],
    ["Incomplete", r.incomplete_reason],
    ["Key", r.api_key_id],
    ["Provider / wire", r.provider ? `${r.provider} / ${r.wire}` : undefined],
    ["Deployments", r.deployment],
    ["Failed attempts", attempts],
    ["Transport", r.transport ? `${r.transport}${r.stream ? ", streamed" : ""}${r.background ? ", background" : ""}` : undefined],
    ["Stored", r.stored === undefined ? undefined : r.stored ? "yes" : "no (store: false)"],
    ["Duration", r.duration_ms !== undefined ? ms(r.duration_ms) : undefined],
    ["Time to first token", r.ttft_ms !== undefined ? ms(r.ttft_ms) : undefined],
    ["Tokens", `${int(u.input_tokens)} in (${int(u.cached_tokens)} cached) · ${int(u.output_tokens)} out (${int(u.reasoning_tokens)} reasoning)`],
    ["Cost", usd(u.cost_usd)],
    ["Calls", `${u.model_calls} model · ${u.tool_calls} gateway tools · ${r.client_tool_calls ?? 0} client tools`],
    ["Client ids", client],
    ["Refusals not logged", r.refusals_dropped],
  ]));
}

function row(r, body, everyTenant) {
  const when = r.ended_ms || r.ended_at * 1000;
  const open = el("button", { type: "button", class: "disclose", "aria-expanded": "false", title: `${utcDay(when)} ${utcTime(when)} UTC`, text: utcTime(when) });
  const tr = el("tr", { "data-id": r.id, "data-status": r.status },
    el("td", {}, open),
    el("td", {}, badge(r.status)),
    everyTenant ? td(r.tenant, "clip tenant") : null,
    td(r.model || "–", "clip"),
    td(ms(r.duration_ms), "num wide"),
    td(int(r.usage.total_tokens), "num"),
    td(usd(r.usage.cost_usd), "num wide"),
    td(errorText(r), "wide clip"),
    td(r.status === "refused" ? shortId(r.id) : el("a", { href: recordHref("response", r.id, r.tenant), class: "id", title: r.id, text: shortId(r.id) }), "wide"));
  let panel = null;
  open.addEventListener("click", () => {
    if (panel) { panel.remove(); panel = null; open.setAttribute("aria-expanded", "false"); return; }
    panel = el("tr", { class: "detail-row" }, el("td", { colspan: everyTenant ? "9" : "8" }, details(r)));
    tr.after(panel);
    open.setAttribute("aria-expanded", "true");
  });
  return tr;
}

function filterForm(filters, models) {
  const form = el("form", { class: "filters", role: "search", "aria-label": "Filter requests" });
  const input = (name, label, extra = {}) => el("label", {}, label, el("input", { name, value: filters[name] || "", size: 14, ...extra }));
  const status = el("select", { name: "status" }, el("option", { value: "", text: "Any status" }),
    STATUSES.map((s) => el("option", { value: s, text: s, selected: (filters.status || "").toLowerCase() === s })));
  const windowSelect = el("select", { name: "window" }, WINDOWS.map(([v, label]) => el("option", { value: v, text: label, selected: (filters.window || "") === v })));
  const list = el("datalist", { id: "model-names" }, models.map((m) => el("option", { value: m })));
  const range = filters.since || filters.until
    ? [el("input", { type: "hidden", name: "since", value: filters.since || "" }), el("input", { type: "hidden", name: "until", value: filters.until || "" })] : [];
  form.append(input("q", "Response id or text", { type: "search", size: 18 }),
    el("label", {}, "Status", status), input("model", "Model", { list: "model-names" }), list,
    input("api_key_id", "Key id"), input("deployment", "Deployment"), input("session", "Client session / thread"),
    el("label", {}, "Time", windowSelect), ...range, el("button", { type: "submit", text: "Apply" }),
    el("button", { type: "button", text: "Clear", onclick: () => { location.hash = "#/requests"; } }));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const params = new URLSearchParams([...new FormData(form)].filter(([, v]) => v));
    location.hash = `#/requests?${params}`;
  });
  return form;
}

export async function requestsPage(match) {
  const query = new URLSearchParams(match[1] || "");
  const filters = Object.fromEntries([...query].filter(([k]) => FILTERS.includes(k)));
  const filtered = Object.keys(filters).length > 0;
  const models = await api("/v1/console/models").then((a) => a.data.map((m) => m.id)).catch(() => []);
  const live = el("input", { type: "checkbox", id: "live" });
  const body = el("tbody");
  const everyTenant = allTenants();
  const tableBox = el("div", { class: "table-wrap" }, el("table", { "aria-label": "Requests, newest first", class: "requests" },
    el("thead", {}, el("tr", {}, ["Time (UTC)", "Status", ...(everyTenant ? ["Tenant"] : []), "Model", ["Duration", "num wide"], ["Tokens", "num"], ["Cost", "num wide"], ["Error", "wide"], ["Response", "wide"]]
      .map((c) => { const [text, cls] = Array.isArray(c) ? c : [c, ""]; return el("th", { scope: "col", class: cls || null, text }); }))), body));
  const more = el("button", { type: "button", text: "Older", hidden: true });
  const count = el("p", { class: "muted", id: "request-count" });
  const searched = el("p", { class: "muted", id: "searched", hidden: true });
  const empty = el("div", { id: "requests-empty" });
  show(el("div", { class: "toolbar" }, el("h2", { text: "Requests" }), el("label", { class: "inline" }, live, " Live tail")),
    filterForm(filters, models), count, empty, tableBox, searched, more);

  const params = { ...filters, tenant: tenantParam(), limit: "100" };
  delete params.window;
  if (filters.window) params.since = String(Math.floor(Date.now() / 1000) - Number(filters.window));
  let cursor = null;
  let newest = null;
  let tenant = "";
  let shown = 0;
  const seen = new Set();
  const add = (records, prepend) => {
    const rows = records.filter((r) => !seen.has(r.id)).map((r) => { seen.add(r.id); return row(r, body, everyTenant); });
    if (prepend) body.prepend(...rows); else body.append(...rows);
    shown += rows.length;
    while (body.children.length > MAX_ROWS) body.lastElementChild.remove();
  };
  const summary = () => {
    const range = filters.since || filters.until
      ? `, ended ${filters.since ? `from ${utcDay(filters.since * 1000)} ${utcTime(filters.since * 1000)}` : ""}${filters.until ? ` before ${utcDay(filters.until * 1000)} ${utcTime(filters.until * 1000)}` : ""} UTC` : "";
    count.textContent = `${shown} request${shown === 1 ? "" : "s"} shown (${tenant === "*" ? "all tenants" : `tenant ${tenant}`})${filtered ? ", filtered" : ""}${range}`;
    if (!shown) {
      empty.replaceChildren(filtered
        ? emptyState("No request matches these filters.", el("p", { text: cursor ? "Older entries are left to search." : "The whole log was searched." }))
        : emptyState("No requests yet.", el("p", { text: "Requests appear here as they end. Send one:" }),
          code(`curl ${location.origin}/v1/responses -H "authorization: Bearer $KEY" \\\n  -H 'content-type: application/json' -d '{"model": "<a model>", "input": "Hi"}'`),
          el("p", {}, el("a", { href: "#/playground", text: "or open the Playground" }))));
    } else {
      empty.replaceChildren();
    }
    tableBox.hidden = !shown;
  };
  const load = async () => {
    const answer = await api("/v1/console/requests", { ...params, before: cursor });
    tenant = answer.tenant;
    add(answer.data, false);
    if (newest === null && answer.data.length) newest = answer.data[0].cursor;
    cursor = answer.next_cursor;
    more.hidden = !cursor;
    more.textContent = filtered && answer.data.length < 100 && cursor ? "Search older" : "Older";
    searched.hidden = !(filtered && cursor);
    if (cursor) searched.textContent = `Searched back to ${utcDay(cursorTime(cursor))} ${utcTime(cursorTime(cursor))} UTC (${int(answer.examined)} entries in this read).`;
    summary();
  };
  const tail = async () => {
    const fresh = [];
    let before;
    for (let round = 0; round < 5; round++) {  // a gap wider than a page is read in pages
      const answer = await api("/v1/console/requests", { ...params, after: newest || undefined, before });
      fresh.push(...answer.data);
      if (!answer.next_cursor) break;
      before = answer.next_cursor;
    }
    if (fresh.length) {
      newest = fresh[0].cursor;
      add(fresh, true);
      summary();
    }
  };
  more.addEventListener("click", () => load().catch(() => {}));
  let stop = null;
  live.addEventListener("change", () => {
    if (stop) { stop(); stop = null; }
    // Every tenant's tail reads every tenant's log: less often (see benchmarks/README.md)
    if (live.checked) stop = every(everyTenant ? 15000 : 3000, () => tail().catch(() => {}));
  });
  await load();
  ready("requests");
}
