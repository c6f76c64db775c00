// The Response page: what one response was asked, what it did and why it ended as it did.
// Status, the error with the HTTP status its client got, the incomplete reason, deployments
// tried and how they failed, tokens (input, cached, output, reasoning) and cost, key, metadata;
// the request's parameters, instructions and tools offered; links to its trace, conversation and
// chain; and its timeline. One API call.

import { api, el, show, ready, objectTenant, utc, ms, int, usd, clientId, badge, facts } from "./console.js";
import { timeline, parameterFacts, toolLabel } from "./items.js";

const STORAGE = {
  stored: null,
  not_stored: "Not stored (store: false): only the request-log record exists.",
  deleted: "Deleted: it was stored, and it has been deleted since, with what was logged of its content (the request-log record and its counters remain).",
  expired: "Expired: it was stored, and its record outlived the retention period.",
  refused: "Refused before it ran: no response exists, only the request-log record.",
  unknown: "No stored record.",
};

function section(title, ...body) {
  return el("section", { class: "panel", "aria-label": title }, el("h3", { text: title }), body);
}

export async function responsePage(match) {
  const id = decodeURIComponent(match[1]);
  const tenant = objectTenant(match[2]);
  const view = await api(`/v1/console/responses/${encodeURIComponent(id)}`, { tenant });
  const of = tenant ? `?tenant=${encodeURIComponent(tenant)}` : "";
  const stored = view.stored;
  const record = view.request;
  const r = stored ? stored.response : {};
  const usage = (record && record.usage) || {};
  const logged = record && record.content;
  const request = stored ? r : (logged && logged.request) || {};
  const status = r.status || (record && record.status);
  const error = r.error || (record && (record.error_code || record.error_message)
    ? { code: record.error_code, message: record.error_message, param: record.error_param } : null);
  const incomplete = (r.incomplete_details && r.incomplete_details.reason) || (record && record.incomplete_reason);
  const attempts = (record && record.attempts_failed) || [];
  const prev = r.previous_response_id;
  const link = (href, text) => el("a", { href, text });

  const parts = [el("div", { class: "toolbar" }, el("h2", { class: "id-title", text: `Response ${id}` }), status ? badge(status) : null)];
  if (error) {
    parts.push(el("div", { class: "alert", role: "alert" },
      el("strong", { text: `${record && record.http_status ? `HTTP ${record.http_status} · ` : ""}${error.code || "error"}: ` }),
      error.message || "(no message)", error.param ? el("span", { class: "muted", text: ` (param: ${error.param})` }) : null));
  } else if (incomplete) {
    parts.push(el("div", { class: "alert warn", role: "status" }, el("strong", { text: "Incomplete: " }), incomplete));
  }
  const storage = STORAGE[view.storage];
  if (storage && !(view.storage === "not_stored" && logged)) parts.push(el("p", { class: "muted", id: "storage", text: storage }));
  if (view.storage === "not_stored" && logged) {
    parts.push(el("p", { class: "muted", id: "storage", text: `Not stored (store: false): content from the request log${logged.truncated ? " (truncated to fit)." : "."}` }));
  }
  parts.push(section("Summary", facts([
    ["Status", status],
    ["Model", r.model || (record && record.model)],
    ["Created (UTC)", r.created_at ? utc(r.created_at) : undefined],
    ["Duration", record && record.duration_ms !== undefined ? ms(record.duration_ms) : undefined],
    ["Time to first token", record && record.ttft_ms !== undefined ? ms(record.ttft_ms) : undefined],
    ["HTTP status to the client", record && record.http_status],
    ["Transport", record && record.transport ? `${record.transport}${record.stream ? ", streamed" : ""}${record.background ? ", background" : ""}` : undefined],
    ["Provider / wire", record && record.provider ? `${record.provider} / ${record.wire}` : undefined],
    ["Deployments", record && record.deployment],
    ["Failed attempts", attempts.map((a) => `${a.deployment}: ${a.kind}${a.status ? ` (HTTP ${a.status})` : ""}`).join("; ")],
    ["Model calls", usage.model_calls],
    ["Tokens in", usage.input_tokens !== undefined ? `${int(usage.input_tokens)} (${int(usage.cached_tokens)} cached)` : undefined],
    ["Tokens out", usage.output_tokens !== undefined ? `${int(usage.output_tokens)} (${int(usage.reasoning_tokens)} reasoning)` : undefined],
    ["Cost", usage.cost_usd !== undefined ? usd(usage.cost_usd) : undefined],
    ["Tool calls", record ? `${usage.tool_calls} by the gateway, ${record.client_tool_calls ?? 0} by the client` : undefined],
    ["Key", record && record.api_key_id],
    ["Tenant", view.tenant],
    ["Client id", record ? clientId(record) : undefined],
    ["Trace", view.trace_id ? link(`#/trace/${encodeURIComponent(view.trace_id)}${of}`, view.trace_id) : undefined],
    ["Conversation", stored && stored.conversation_id ? link(`#/conversation/${encodeURIComponent(stored.conversation_id)}${of}`, stored.conversation_id) : undefined],
    ["Previous", prev ? link(`#/response/${encodeURIComponent(prev)}${of}`, prev) : undefined],
    ["Metadata", r.metadata && Object.keys(r.metadata).length ? Object.entries(r.metadata).map(([k, v]) => `${k}=${v}`).join(", ") : undefined],
  ])));
  if (request.instructions) parts.push(section("Instructions", el("pre", { text: request.instructions })));
  const tools = request.tools || [];
  if (tools.length) {
    const listed = tools.map((t) => el("li", {}, el("details", {},
      el("summary", { text: toolLabel(t) }), el("pre", { text: JSON.stringify(t, null, 2) }))));
    parts.push(section(`Tools offered (${tools.length})`, el("ul", { class: "tools" }, listed)));
  }
  const parameters = parameterFacts(request);
  if (parameters.length) parts.push(section("Parameters", facts(parameters)));
  if (stored && stored.chain.length) {
    const chain = stored.chain.map((c) => el("li", {}, link(`#/response/${encodeURIComponent(c)}${of}`, c)));
    parts.push(section("Chain (oldest first)", el("ol", { class: "chain" }, chain)));
  }
  if (stored) {
    parts.push(section("Timeline", timeline("Agent loop timeline", stored.input_items, r.output)));
  } else if (logged) {
    parts.push(section("Timeline", timeline("Agent loop timeline", logged.input, logged.output)));
  }
  show(...parts);
  ready("response");
}
