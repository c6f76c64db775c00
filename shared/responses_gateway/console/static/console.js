// The console's one module: sign-in, hash routing and the pages (Requests, Response,
// Conversations, Traces, Usage, Keys, Playground). It talks only to the gateway's API with the
// key kept in this tab's sessionStorage; it renders text with textContent (never innerHTML of
// data) and loads nothing from elsewhere.

const KEY = "rg.apiKey";
const TENANT = "rg.tenant";
const page = document.getElementById("page");
const nav = document.getElementById("nav");
const who = document.getElementById("who");
const signin = document.getElementById("signin");
let me = null;
let tail = null;

class ApiError extends Error {
  constructor(status, body) {
    super((body && body.error && body.error.message) || `HTTP ${status}`);
    this.status = status;
  }
}

async function api(path, params = {}, init = {}) {
  const url = new URL(path, location.origin);
  for (const [k, v] of Object.entries(params)) if (v) url.searchParams.set(k, v);
  const headers = { authorization: `Bearer ${sessionStorage.getItem(KEY)}` };
  if (init.body !== undefined) headers["content-type"] = "application/json";
  const answer = await fetch(url, {
    method: init.method || "GET", headers,
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const body = await answer.json().catch(() => null);
  if (!answer.ok) throw new ApiError(answer.status, body);
  return body;
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const child of children.flat(Infinity)) {
    if (child !== null && child !== undefined) node.append(child);
  }
  return node;
}

const utc = (seconds) => new Date(seconds * 1000).toISOString().replace("T", " ").slice(0, 19) + " UTC";
const tenantParam = () => (me && me.operator ? sessionStorage.getItem(TENANT) || me.tenant : undefined);
const clientId = (r) => {
  const c = r.client || {};
  return c.thread_id || c.session_id || c.trace_id || c.client_request_id || "";
};

function show(...nodes) {
  if (tail) { clearInterval(tail); tail = null; }
  page.replaceChildren(...nodes);
}

function failure(err) {
  if (err instanceof ApiError && err.status === 401) { signOut(); return; }
  show(el("p", { class: "error", role: "alert", text: err.message }));
}

// --- Requests -------------------------------------------------------------------------------

const COLUMNS = [
  ["Time (UTC)", (r) => utc(r.ended_at)],
  ["Model", (r) => r.model],
  ["Status", (r) => r.status],
  ["Wire", (r) => `${r.provider || ""}/${r.wire || ""}`, "wide"],
  ["Duration ms", (r) => (r.duration_ms ?? ""), "num"],
  ["TTFT ms", (r) => (r.ttft_ms ?? ""), "num"],
  ["Tokens", (r) => String(r.usage.total_tokens), "num"],
  ["Tools gw/client", (r) => `${r.usage.tool_calls}/${r.client_tool_calls ?? 0}`, "num"],
  ["Key", (r) => r.api_key_id, "wide"],
  ["Client id", clientId, "wide"],
  ["Error", (r) => r.error_code || r.incomplete_reason || (r.http_status ? `HTTP ${r.http_status}` : ""), "wide"],
];

function requestRow(r) {
  const link = r.status === "refused" ? el("span", { text: r.id })
    : el("a", { href: `#/response/${encodeURIComponent(r.id)}`, text: r.id });
  const cells = COLUMNS.map(([, value, cls]) => {
    const text = value(r);
    const extra = cls === "num" ? "num" : cls || "";
    const status = value === COLUMNS[2][1] ? ` status-${text}` : "";
    return el("td", { class: (extra + status).trim() || null, text });
  });
  return el("tr", { "data-id": r.id }, el("td", {}, link), cells, el("td", { text: r.stored ? "yes" : "no" }));
}

async function requestsPage(query) {
  const filters = Object.fromEntries(query);
  const form = el("form", { class: "filters", role: "search", "aria-label": "Filter requests" });
  const field = (name, label) => el("label", {}, label, el("input", { name, value: filters[name] || "", size: 16 }));
  form.append(field("model", "Model"), field("status", "Status"), field("api_key_id", "Key id"),
    field("session", "Client session / thread"));
  if (me.operator) form.append(field("tenant", "Tenant"));
  const live = el("input", { type: "checkbox", id: "live" });
  form.append(el("button", { type: "submit", text: "Apply" }),
    el("label", { class: "inline" }, live, " Live tail"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const data = new FormData(form);
    if (me.operator) sessionStorage.setItem(TENANT, data.get("tenant") || me.tenant);
    data.delete("tenant");
    const params = new URLSearchParams([...data].filter(([, v]) => v));
    location.hash = `#/requests?${params}`;
  });
  if (me.operator) form.querySelector("[name=tenant]").value = tenantParam();
  const body = el("tbody");
  const table = el("table", { "aria-label": "Requests, newest first" },
    el("thead", {}, el("tr", {}, el("th", { scope: "col", text: "Response" }),
      COLUMNS.map(([label, , cls]) => el("th", { scope: "col", class: cls || null, text: label })),
      el("th", { scope: "col", text: "Stored" }))), body);
  const more = el("button", { type: "button", text: "Older", hidden: true });
  const count = el("p", { class: "muted", id: "request-count" });
  show(el("h2", { text: "Requests" }), form, count, el("div", { class: "table-wrap" }, table), more);
  const params = { ...filters, tenant: tenantParam(), limit: "100" };
  let cursor = null;
  const seen = new Set();
  const load = async (before, prepend) => {
    const answer = await api("/v1/console/requests", { ...params, before });
    const rows = answer.data.filter((r) => !seen.has(r.id));
    rows.forEach((r) => seen.add(r.id));
    if (prepend) body.prepend(...rows.map(requestRow));
    else body.append(...rows.map(requestRow));
    if (!prepend) { cursor = answer.next_cursor; more.hidden = !cursor; }
    count.textContent = `${seen.size} request${seen.size === 1 ? "" : "s"} shown (tenant ${answer.tenant})`;
  };
  more.addEventListener("click", () => load(cursor, false).catch(failure));
  live.addEventListener("change", () => {
    if (tail) { clearInterval(tail); tail = null; }
    if (live.checked) tail = setInterval(() => load(undefined, true).catch(failure), 2000);
  });
  await load(undefined, false);
  page.dataset.ready = "requests";
}

// --- Response timeline ----------------------------------------------------------------------

const text = (value) => (typeof value === "string" ? value : JSON.stringify(value, null, 2));

function contentText(content) {
  if (typeof content === "string") return content;
  return (content || []).map((part) => part.text ?? part.refusal ?? `[${part.type}]`).join("\n");
}

const STEPS = {
  message: (i) => [`${i.role} message`, contentText(i.content)],
  reasoning: (i) => ["reasoning", (i.summary || []).map((s) => s.text).join("\n") || "(encrypted)"],
  function_call: (i) => [`tool call ${i.name}`, i.arguments],
  function_call_output: (i) => [`tool output ${i.call_id}`, text(i.output)],
  custom_tool_call: (i) => [`tool call ${i.name}`, i.input],
  custom_tool_call_output: (i) => [`tool output ${i.call_id}`, text(i.output)],
  mcp_list_tools: (i) => [`MCP listing ${i.server_label}`, (i.tools || []).map((t) => t.name).join(", ")],
  mcp_approval_request: (i) => [`approval requested ${i.server_label}.${i.name}`, i.arguments],
  mcp_approval_response: (i) => [`approval ${i.approve ? "granted" : "denied"}`, i.approval_request_id],
  mcp_call: (i) => [`MCP call ${i.server_label}.${i.name}`, `${i.arguments}\n→ ${i.error ? `error: ${text(i.error)}` : i.output}`],
  web_search_call: (i) => ["web search", text(i.action || {})],
  compaction: () => ["compaction", "(earlier context summarized)"],
};

function step(item, side) {
  const describe = STEPS[item.type] || ((i) => [i.type, text(i)]);
  const [kind, detail] = describe(item);
  return el("li", { "data-type": item.type, "data-side": side },
    el("span", { class: "step-kind", text: kind }),
    el("span", { class: "step-side", text: side }),
    detail ? el("pre", { text: detail }) : null);
}

function facts(pairs) {
  return el("dl", { class: "facts" }, pairs.filter(([, v]) => v !== undefined && v !== null && v !== "")
    .map(([k, v]) => [el("dt", { text: k }), el("dd", {}, v instanceof Node ? v : String(v))]));
}

async function responsePage(id) {
  const view = await api(`/v1/console/responses/${encodeURIComponent(id)}`, { tenant: tenantParam() });
  const stored = view.stored;
  const record = view.request;
  const r = stored ? stored.response : {};
  const usage = (record && record.usage) || {};
  const prev = r.previous_response_id;
  const parts = [el("h2", { text: `Response ${id}` }), facts([
    ["Status", r.status || (record && record.status)],
    ["Model", r.model || (record && record.model)],
    ["Created (UTC)", r.created_at ? utc(r.created_at) : undefined],
    ["Duration ms", record && record.duration_ms],
    ["Time to first token ms", record && record.ttft_ms],
    ["Transport", record && record.transport],
    ["Deployment", record && record.deployment],
    ["Model calls", usage.model_calls],
    ["Tokens in/out", usage.total_tokens !== undefined ? `${usage.input_tokens}/${usage.output_tokens}` : undefined],
    ["Client id", record ? clientId(record) : undefined],
    ["Previous", prev ? el("a", { href: `#/response/${encodeURIComponent(prev)}`, text: prev }) : undefined],
    ["Conversation", stored && stored.conversation_id
      ? el("a", { href: `#/conversation/${encodeURIComponent(stored.conversation_id)}`, text: stored.conversation_id })
      : undefined],
  ])];
  if (stored && stored.chain.length) {
    parts.push(el("h3", { text: "Chain (oldest first)" }), el("ol", {}, stored.chain.map((c) =>
      el("li", {}, el("a", { href: `#/response/${encodeURIComponent(c)}`, text: c })))));
  }
  const logged = record && record.content;
  if (!stored && logged) {
    parts.push(el("p", { class: "muted", text: "Not stored (store: false): content from the request log"
      + (logged.truncated ? " (truncated to fit)." : ".") }),
    el("h3", { text: "Timeline" }), el("ol", { class: "timeline", "aria-label": "Agent loop timeline" },
      logged.input.map((i) => step(i, "input")), logged.output.map((i) => step(i, "output"))));
  } else if (!stored) {
    parts.push(el("p", { class: "muted", text: "Not stored (store: false): only the request-log record exists." }));
  } else {
    parts.push(el("h3", { text: "Timeline" }), el("ol", { class: "timeline", "aria-label": "Agent loop timeline" },
      stored.input_items.map((i) => step(i, "input")), (r.output || []).map((i) => step(i, "output"))));
  }
  show(...parts);
  page.dataset.ready = "response";
}

// --- Conversations --------------------------------------------------------------------------

async function conversationsPage() {
  const body = el("tbody");
  const table = el("table", { "aria-label": "Conversations, newest first" },
    el("thead", {}, el("tr", {}, ["Conversation", "Created (UTC)", "Metadata"].map((h, i) =>
      el("th", { scope: "col", class: i === 2 ? "wide" : null, text: h })))), body);
  const more = el("button", { type: "button", text: "Older", hidden: true });
  let cursor;
  const load = async () => {
    const answer = await api("/v1/console/conversations", { tenant: tenantParam(), limit: "50", before: cursor });
    body.append(...answer.data.map((c) => el("tr", { "data-id": c.id },
      el("td", {}, el("a", { href: `#/conversation/${encodeURIComponent(c.id)}`, text: c.id })),
      el("td", { text: utc(c.created_at) }),
      el("td", { class: "wide", text: Object.entries(c.metadata).map(([k, v]) => `${k}=${v}`).join(", ") }))));
    cursor = answer.next_cursor;
    more.hidden = !cursor;
    if (!body.children.length) {
      body.append(el("tr", {}, el("td", { colspan: "3", class: "muted", text: "No conversations." })));
    }
  };
  more.addEventListener("click", () => load().catch(failure));
  show(el("h2", { text: "Conversations" }), el("div", { class: "table-wrap" }, table), more);
  await load();
  page.dataset.ready = "conversations";
}

async function conversationPage(id) {
  const items = el("ol", { class: "timeline", "aria-label": "Conversation items, oldest first" });
  const head = el("div");
  let after;
  const more = el("button", { type: "button", text: "Later items", hidden: true });
  const load = async () => {
    const answer = await api(`/v1/console/conversations/${encodeURIComponent(id)}/items`,
      { tenant: tenantParam(), limit: "100", after });
    if (!head.children.length) {
      const c = answer.conversation;
      head.append(facts([["Created (UTC)", utc(c.created_at)],
        ["Metadata", Object.entries(c.metadata).map(([k, v]) => `${k}=${v}`).join(", ")]]));
    }
    items.append(...answer.data.map((i) => step(i, i.role || "item")));
    after = answer.last_id || after;
    more.hidden = !answer.has_more;
  };
  more.addEventListener("click", () => load().catch(failure));
  show(el("h2", { text: `Conversation ${id}` }), head, items, more);
  await load();
  page.dataset.ready = "conversation";
}

// --- Traces -------------------------------------------------------------------------------

async function tracesPage() {
  const answer = await api("/v1/console/traces", { tenant: tenantParam(), limit: "100" });
  const rows = answer.data.map((t) => el("tr", { "data-id": t.id },
    el("td", {}, el("a", { href: `#/trace/${encodeURIComponent(t.id)}`, text: t.id })),
    el("td", { text: t.workflow_name || "" }),
    el("td", { text: t.group_id || "", class: "wide" }),
    el("td", { text: utc(Math.floor(t.received_ms / 1000)) })));
  show(el("h2", { text: "Traces" }), el("div", { class: "table-wrap" },
    el("table", { "aria-label": "Traces, newest first" }, el("thead", {}, el("tr", {},
      ["Trace", "Workflow", "Group", "Received (UTC)"].map((h) => el("th", { scope: "col", text: h })))),
    el("tbody", {}, rows))));
  page.dataset.ready = "traces";
}

const spanName = (s) => {
  const d = s.span_data || {};
  return `${d.type || "span"}${d.name ? ` ${d.name}` : ""}${d.response_id ? ` ${d.response_id}` : ""}`;
};

function spanDetail(s) {
  const d = s.span_data || {};
  const g = s.gateway;
  if (g && g.input_items) {
    return el("div", { class: "joined" },
      el("p", { class: "muted", text: "Model call input" }),
      el("ol", { class: "timeline" }, g.input_items.map((i) => step(i, "input"))),
      el("p", { class: "muted", text: "Model call output" }),
      el("ol", { class: "timeline" }, g.output.map((i) => step(i, "output"))));
  }
  if (g && g.request) return el("p", { class: "muted", text: `Not stored; ${g.request.usage.total_tokens} tokens, ${g.request.status}` });
  if (d.type === "function") return el("pre", { text: `${d.input ?? ""}\n→ ${d.output ?? ""}` });
  return null;
}

async function tracePage(id) {
  const view = await api(`/v1/console/traces/${encodeURIComponent(id)}`, { tenant: tenantParam() });
  const times = view.spans.flatMap((s) => [Date.parse(s.started_at), Date.parse(s.ended_at || s.started_at)]).filter((t) => !Number.isNaN(t));
  const t0 = Math.min(...times);
  const total = Math.max(1, Math.max(...times) - t0);
  const rows = view.spans.map((s) => {
    const start = Date.parse(s.started_at) - t0;
    const end = Date.parse(s.ended_at || s.started_at) - t0;
    const bar = el("div", { class: "bar", style: `margin-left:${(100 * start) / total}%;width:${Math.max(0.5, (100 * (end - start)) / total)}%` });
    return el("li", { "data-span": s.id, "data-type": (s.span_data || {}).type || "" },
      el("div", { class: "span-head" }, el("span", { class: "step-kind", text: spanName(s) }),
        el("span", { class: "step-side", text: `${end - start} ms` })),
      el("div", { class: "track", "aria-hidden": "true" }, bar), spanDetail(s));
  });
  const trace = view.trace || {};
  show(el("h2", { text: `Trace ${id}` }), facts([["Workflow", trace.workflow_name], ["Group", trace.group_id], ["Spans", view.spans.length]]),
    el("ol", { class: "waterfall", "aria-label": "Spans in start order" }, rows));
  page.dataset.ready = "trace";
}

// --- Playground ---------------------------------------------------------------------------

async function* sse(answer) {  // the events of a text/event-stream body, as they arrive
  const reader = answer.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const data = frame.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
      if (data && data !== "[DONE]") yield JSON.parse(data);
    }
  }
}

function playgroundPage() {
  const form = el("form", { class: "playground", "aria-label": "Create a response" });
  const field = (label, input) => el("label", { class: "block" }, label, input);
  const model = el("input", { name: "model", required: true, size: 30 });
  const instructions = el("textarea", { name: "instructions", rows: 2, cols: 60 });
  const input = el("textarea", { name: "input", rows: 3, cols: 60, required: true });
  const tools = el("textarea", { name: "tools", rows: 4, cols: 60, placeholder: '[{"type": "mcp", "server_label": "...", "server_url": "..."}]' });
  const stream = el("input", { type: "checkbox", name: "stream", checked: true });
  const background = el("input", { type: "checkbox", name: "background" });
  form.append(field("Model", model), field("Instructions", instructions), field("Input", input),
    field("Tools (JSON array, MCP servers included)", tools),
    el("label", {}, stream, " Stream"), el("label", {}, background, " Background"),
    el("button", { type: "submit", text: "Send" }));
  const text = el("pre", { id: "play-text", "aria-live": "polite", "data-deltas": "0" });
  const steps = el("ol", { class: "timeline", id: "play-steps", "aria-label": "Output items" });
  const status = el("p", { id: "play-status", class: "muted" });
  const approvals = el("div", { id: "play-approvals" });
  show(el("h2", { text: "Playground" }), form, status, text, approvals, steps);
  let previous = null;

  const run = async (extraInput) => {
    const body = { model: model.value, input: extraInput || input.value, stream: stream.checked };
    if (instructions.value) body.instructions = instructions.value;
    if (tools.value.trim()) body.tools = JSON.parse(tools.value);
    if (background.checked) body.background = true;
    if (extraInput && previous) body.previous_response_id = previous;
    status.textContent = "Running…";
    approvals.replaceChildren();
    text.textContent = "";
    text.dataset.deltas = "0";
    steps.replaceChildren();
    const answer = await fetch("/v1/responses", {
      method: "POST",
      headers: { authorization: `Bearer ${sessionStorage.getItem(KEY)}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    if (!answer.ok) {
      const error = await answer.json().catch(() => null);
      throw new ApiError(answer.status, error);
    }
    let final = null;
    if (body.stream) {
      for await (const event of sse(answer)) {
        if (event.type === "response.output_text.delta") {
          text.textContent += event.delta;
          text.dataset.deltas = String(Number(text.dataset.deltas) + 1);
        } else if (event.type === "response.output_item.done") {
          steps.append(step(event.item, "output"));
        } else if (["response.completed", "response.incomplete", "response.failed"].includes(event.type)) {
          final = event.response;
        }
      }
    } else {
      final = await answer.json();
      for (const item of final.output || []) steps.append(step(item, "output"));
      text.textContent = (final.output || []).filter((i) => i.type === "message")
        .map((i) => contentText(i.content)).join("\n");
    }
    if (!final) { status.textContent = "The stream ended without a final response."; return; }
    previous = final.id;
    status.replaceChildren(`${final.status} · `, el("a", { href: `#/response/${encodeURIComponent(final.id)}`, text: final.id }));
    for (const item of final.output || []) {
      if (item.type !== "mcp_approval_request") continue;
      const answerWith = (approve) => () => (delete page.dataset.ready, run([{ type: "mcp_approval_response", approval_request_id: item.id, approve }]).catch(failure));
      approvals.append(el("div", { role: "group", "aria-label": `Approval for ${item.name}` },
        el("span", { text: `${item.server_label}.${item.name} ${item.arguments} ` }),
        el("button", { type: "button", text: "Approve", onclick: answerWith(true) }),
        el("button", { type: "button", text: "Deny", onclick: answerWith(false) })));
    }
    page.dataset.ready = "played";
  };
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    delete page.dataset.ready;
    run(null).catch(failure);
  });
  page.dataset.ready = "playground";
}

// --- Usage ----------------------------------------------------------------------------------

let chartLibrary = null;
function loadChartLibrary() {  // uPlot (vendored, one file) loads the first time a chart shows
  chartLibrary ??= new Promise((resolve, reject) => {
    const script = el("script", { src: "uPlot.iife.min.js" });
    script.addEventListener("load", () => resolve(window.uPlot));
    script.addEventListener("error", () => reject(new Error("could not load the chart library")));
    document.head.append(script);
  });
  return chartLibrary;
}

async function usagePage() {
  if (!me.operator) {
    show(el("h2", { text: "Usage" }), el("p", { text: "The usage report needs an operator key." }));
    page.dataset.ready = "usage";
    return;
  }
  const days = 7;
  const start = Math.floor(Date.now() / 86400000) * 86400 - (days - 1) * 86400;
  const [uPlot, answer] = await Promise.all([loadChartLibrary(), api("/v1/organization/usage/completions",
    { start_time: String(start), bucket_width: "1d", group_by: "model", limit: String(days) })]);
  const models = [...new Set(answer.data.flatMap((b) => b.results.map((x) => x.model)))].sort();
  const xs = answer.data.map((b) => b.start_time);
  const series = models.map((m) => answer.data.map((b) => b.results.filter((x) => x.model === m)
    .reduce((s, x) => s + x.input_tokens + x.output_tokens, 0)));
  const totals = answer.data.flatMap((b) => b.results).reduce((t, x) => ({
    input: t.input + x.input_tokens, output: t.output + x.output_tokens, requests: t.requests + x.num_model_requests,
  }), { input: 0, output: 0, requests: 0 });
  const chart = el("div", { class: "chart", role: "img", "aria-label": "Tokens per UTC day by model" });
  const body = el("tbody", {}, models.map((m, i) => el("tr", {}, el("td", { text: m }),
    el("td", { class: "num", text: String(series[i].reduce((a, b) => a + b, 0)) }))));
  show(el("h2", { text: "Usage (UTC days)" }), facts([
    ["Input tokens", totals.input], ["Output tokens", totals.output], ["Model requests", totals.requests],
  ]), chart, el("table", { "aria-label": "Tokens by model" },
    el("thead", {}, el("tr", {}, el("th", { scope: "col", text: "Model" }), el("th", { scope: "col", class: "num", text: "Tokens" }))), body));
  const palette = ["#0b5cad", "#1a7f37", "#9a6700", "#b42318", "#8250df", "#57606a"];
  const width = Math.min(900, page.clientWidth || 600);
  new uPlot({
    width, height: 260, tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), "Etc/UTC"),
    series: [{}, ...models.map((m, i) => ({ label: m, stroke: palette[i % palette.length], width: 2 }))],
    axes: [{}, { size: 60 }],
  }, [xs, ...series], chart);
  page.dataset.ready = "usage";
}

// --- Keys and budgets -----------------------------------------------------------------------

const LIMITS = [["daily_tokens", "Daily tokens"], ["monthly_tokens", "Monthly tokens"],
  ["daily_cost_usd", "Daily cost (USD)"], ["monthly_cost_usd", "Monthly cost (USD)"]];

function budgetSection() {
  const status = el("p", { id: "budget-status", role: "status" });
  const tenant = el("input", { id: "budget-tenant", name: "tenant", value: tenantParam() || me.tenant, size: 20,
    readonly: !me.operator });
  const inputs = LIMITS.map(([name]) => el("input", { id: `limit-${name}`, name, inputmode: "decimal", size: 14,
    readonly: !me.operator }));
  const spend = el("div", { id: "budget-spend" });
  const form = el("form", { class: "filters", id: "budget-form", "aria-label": "Budget of a tenant" },
    el("label", { for: "budget-tenant" }, "Tenant", tenant),
    LIMITS.map(([, label], i) => el("label", { for: inputs[i].id }, label, inputs[i])),
    el("button", { type: "button", id: "budget-load", text: "Show" }),
    me.operator ? el("button", { type: "submit", text: "Save limits" }) : null);
  const fill = (view) => {
    LIMITS.forEach(([name], i) => { inputs[i].value = view.own && view.own[name] !== null ? view.own[name] : ""; });
    const eff = view.effective || {};
    spend.replaceChildren(facts([
      ["Budgets enforced", view.enforced ? "yes" : "no (the configuration sets no budgets)"],
      ["Today (UTC)", `${view.spend.day_tokens} tokens, $${view.spend.day_cost_usd}`],
      ["This month (UTC)", `${view.spend.month_tokens} tokens, $${view.spend.month_cost_usd}`],
      ["Limits in effect", LIMITS.filter(([n]) => eff[n] !== null && eff[n] !== undefined)
        .map(([n, label]) => `${label}: ${eff[n]}`).join("; ") || "none"],
    ]));
  };
  const load = async () => fill(await api("/v1/console/budgets", { tenant: tenant.value }));
  form.querySelector("#budget-load").addEventListener("click", () => load().then(() => {
    status.textContent = `Budget of ${tenant.value}`;
  }).catch(failure));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const limits = {};
    LIMITS.forEach(([name], i) => { if (inputs[i].value.trim()) limits[name] = inputs[i].value.trim(); });
    api("/v1/console/budgets", { tenant: tenant.value }, { method: "PUT", body: limits })
      .then((view) => { fill(view); status.textContent = `Saved the limits of ${tenant.value}`; })
      .catch((err) => { status.textContent = err.message; });
  });
  return [el("section", { "aria-labelledby": "budget-title" },
    el("h3", { id: "budget-title", text: "Budget" }), form, status, spend), load];
}

function keysSection() {
  const body = el("tbody");
  const note = el("p", { id: "keys-note", role: "status" });
  const created = el("div", { id: "new-key", role: "status", "aria-live": "polite" });
  const tenant = el("input", { id: "key-tenant", name: "tenant", required: true, size: 20 });
  const form = el("form", { class: "filters", id: "key-form", "aria-label": "Create a key" },
    el("label", { for: "key-tenant" }, "Tenant", tenant), el("button", { type: "submit", text: "Create key" }));
  const table = el("table", { "aria-label": "API keys" }, el("thead", {}, el("tr", {},
    ["Key id", "Tenant", "Enabled", "Name", "Action"].map((h, i) =>
      el("th", { scope: "col", class: i === 3 ? "wide" : null, text: h })))), body);
  const row = (k) => {
    const revoke = el("button", { type: "button", text: "Revoke", "aria-label": `Revoke key ${k.id}` });
    revoke.addEventListener("click", () => {
      if (revoke.dataset.armed !== "1") {  // a second click confirms
        revoke.dataset.armed = "1";
        revoke.textContent = "Confirm revoke";
        return;
      }
      api(`/v1/console/keys/${encodeURIComponent(k.id)}`, { tenant: k.tenant }, { method: "DELETE" })
        .then(() => { note.textContent = `Revoked ${k.id}`; return load(); }).catch(failure);
    });
    return el("tr", { "data-id": k.id }, el("td", { text: k.id }), el("td", { text: k.tenant }),
      el("td", { text: k.enabled ? "yes" : "no" }), el("td", { class: "wide", text: k.name || "" }), el("td", {}, revoke));
  };
  const load = async () => {
    try {
      const answer = await api("/v1/console/keys");
      body.replaceChildren(...answer.data.map(row));
    } catch (err) {
      if (!(err instanceof ApiError) || err.status !== 400) throw err;
      form.hidden = true;
      note.textContent = err.message;  // keys from GATEWAY_API_KEYS or API Gateway
    }
  };
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    api("/v1/console/keys", {}, { method: "POST", body: { tenant: tenant.value.trim() } }).then((key) => {
      created.replaceChildren(el("p", { text: `New key ${key.id} for tenant ${key.tenant}. Copy it now: it is shown once.` }),
        el("code", { id: "new-key-value", text: key.value }));
      tenant.value = "";
      return load();
    }).catch((err) => { note.textContent = err.message; });
  });
  return [el("section", { "aria-labelledby": "keys-title" }, el("h3", { id: "keys-title", text: "API keys" }),
    form, created, note, el("div", { class: "table-wrap" }, table)), load];
}

async function keysPage() {
  const [budget, loadBudget] = budgetSection();
  if (!me.operator) {
    show(el("h2", { text: "Keys and budgets" }),
      el("p", { text: "Creating, listing and revoking keys needs an operator key; this is your tenant's budget." }), budget);
    await loadBudget();
  } else {
    const [keys, loadKeys] = keysSection();
    show(el("h2", { text: "Keys and budgets" }), keys, budget);
    await Promise.all([loadKeys(), loadBudget()]);
  }
  page.dataset.ready = "keys";
}

// --- Router and sign-in ---------------------------------------------------------------------

const ROUTES = [
  [/^#\/requests(?:\?(.*))?$/, (m) => requestsPage(new URLSearchParams(m[1] || "")), "requests"],
  [/^#\/response\/([^?]+)$/, (m) => responsePage(decodeURIComponent(m[1])), "requests"],
  [/^#\/usage$/, () => usagePage(), "usage"],
  [/^#\/traces$/, () => tracesPage(), "traces"],
  [/^#\/playground$/, async () => playgroundPage(), "playground"],
  [/^#\/trace\/([^?]+)$/, (m) => tracePage(decodeURIComponent(m[1])), "traces"],
  [/^#\/conversations$/, () => conversationsPage(), "conversations"],
  [/^#\/conversation\/([^?]+)$/, (m) => conversationPage(decodeURIComponent(m[1])), "conversations"],
  [/^#\/keys$/, () => keysPage(), "keys"],
];

async function route() {
  if (!sessionStorage.getItem(KEY)) { signOut(); return; }
  if (!me) {
    try { me = await api("/v1/console/me"); } catch (err) { signOut(err.message); return; }
  }
  signin.hidden = true;
  nav.hidden = false;
  who.replaceChildren(`tenant ${me.tenant}${me.operator ? " (operator)" : ""} `,
    el("button", { type: "button", text: "Sign out", onclick: () => signOut() }));
  const hash = location.hash || "#/requests";
  delete page.dataset.ready;
  for (const [pattern, render, tab] of ROUTES) {
    const match = hash.match(pattern);
    if (match) {
      for (const a of nav.querySelectorAll("a")) {
        if (a.dataset.page === tab) a.setAttribute("aria-current", "page");
        else a.removeAttribute("aria-current");
      }
      await render(match).catch(failure);
      return;
    }
  }
  location.hash = "#/requests";
}

function signOut(message) {
  sessionStorage.removeItem(KEY);
  sessionStorage.removeItem(TENANT);
  me = null;
  show();
  nav.hidden = true;
  who.replaceChildren();
  signin.hidden = false;
  document.getElementById("signin-error").textContent = message || "";
}

document.getElementById("signin-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const input = document.getElementById("api-key");
  sessionStorage.setItem(KEY, input.value.trim());
  input.value = "";
  route();
});
window.addEventListener("hashchange", route);
route();
