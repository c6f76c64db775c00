// How the console shows Responses items (a response's input and output, a conversation, a
// model call in a trace): one table of item types, each giving a title and a detail text.
// Reasoning shows its summary, else its text (Chat Completions and harmony upstreams keep it as
// reasoning_text content), and says "encrypted" only when nothing else is there.

import { el } from "./console.js";

const text = (value) => (typeof value === "string" ? value : JSON.stringify(value, null, 2));

export function contentText(content) {
  if (typeof content === "string") return content;
  return (content || []).map((part) => part.text ?? part.refusal ?? part.transcript ?? `[${part.type}]`).join("\n");
}

export function reasoningText(item) {
  const summary = (item.summary || []).map((s) => s.text).filter(Boolean).join("\n");
  if (summary) return summary;
  const content = (item.content || []).map((c) => c.text).filter(Boolean).join("\n");
  if (content) return content;
  return item.encrypted_content ? "(encrypted: the model's reasoning is sealed)" : "(no text)";
}

const STEPS = {
  message: (i) => [`${i.role || "assistant"} message`, contentText(i.content)],
  reasoning: (i) => ["reasoning", reasoningText(i)],
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
  item_reference: (i) => ["item reference", i.id],
};

export function step(item, side) {
  const describe = STEPS[item.type] || ((i) => [i.type, text(i)]);
  const [kind, detail] = describe(item);
  return el("li", { "data-type": item.type, "data-side": side },
    el("span", { class: "step-kind", text: kind }),
    el("span", { class: "step-side", text: side }),
    detail ? el("pre", { text: detail }) : null);
}

export function timeline(label, input, output) {
  return el("ol", { class: "timeline", "aria-label": label },
    (input || []).map((i) => step(i, "input")), (output || []).map((i) => step(i, "output")));
}

const PARAMETERS = [
  "temperature", "top_p", "max_output_tokens", "max_tool_calls", "tool_choice", "parallel_tool_calls",
  "reasoning", "text", "truncation", "top_logprobs", "service_tier", "store", "background",
  "previous_response_id", "prompt", "prompt_cache_key", "safety_identifier", "user", "conversation",
];

function shown(value) {
  if (value === null || value === undefined) return null;
  if (typeof value === "object") {
    const kept = Object.fromEntries(Object.entries(value).filter(([, v]) => v !== null && v !== undefined));
    return Object.keys(kept).length ? JSON.stringify(kept) : null;
  }
  return String(value);
}

/** The request's parameters as facts (what was sent besides the input). */
export function parameterFacts(request) {
  return PARAMETERS.map((name) => [name, shown(request[name])]).filter(([, v]) => v !== null);
}

export function toolLabel(tool) {
  if (tool.type === "function") return `function ${tool.name}`;
  if (tool.type === "mcp") return `mcp ${tool.server_label}${tool.server_url ? ` (${tool.server_url})` : ""}`;
  if (tool.type === "custom") return `custom ${tool.name}`;
  if (tool.type === "namespace") return `namespace ${tool.name}`;
  return tool.type;
}
