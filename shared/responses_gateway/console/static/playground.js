// The Playground: create a response and follow it. The form is kept (in this tab's session
// storage, and on screen when a request fails: the error shows under it); the model list comes
// from the configuration; a streamed answer shows as it arrives; a background response is polled
// to its end; an approval request gets Approve / Deny; a function call can be answered by hand;
// and a reply continues the response (previous_response_id).

import { api, el, show, ready, every, authHeaders, ApiError } from "./console.js";
import { step, contentText } from "./items.js";

const SAVED = "rg.playground";
const TERMINAL = new Set(["completed", "incomplete", "failed", "cancelled"]);
const CLIENT_CALLS = { function_call: "function_call_output", custom_tool_call: "custom_tool_call_output" };

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

function saved() {
  try { return JSON.parse(sessionStorage.getItem(SAVED) || "{}"); } catch { return {}; }
}

export async function playgroundPage() {
  const keep = saved();
  const models = await api("/v1/console/models").catch(() => ({ data: [], any_name: true }));
  const form = el("form", { class: "playground", "aria-label": "Create a response" });
  const field = (label, input, hint) => el("label", { class: "block" }, label, input, hint ? el("span", { class: "muted hint", text: hint }) : null);
  const model = el("input", { name: "model", required: true, size: 30, list: "play-models", value: keep.model || (models.data[0] && models.data[0].id) || "" });
  const list = el("datalist", { id: "play-models" }, models.data.map((m) => el("option", { value: m.id, label: m.provider })));
  const instructions = el("textarea", { name: "instructions", rows: 2, cols: 60 });
  const input = el("textarea", { name: "input", rows: 3, cols: 60, required: true });
  const tools = el("textarea", { name: "tools", rows: 4, cols: 60, placeholder: '[{"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}]' });
  const stream = el("input", { type: "checkbox", name: "stream" });
  const background = el("input", { type: "checkbox", name: "background" });
  instructions.value = keep.instructions || "";
  input.value = keep.input || "";
  tools.value = keep.tools || "";
  stream.checked = keep.stream ?? true;
  background.checked = Boolean(keep.background);
  const send = el("button", { type: "submit", text: "Send" });
  form.append(field("Model", model, models.any_name ? "Configured names are listed; any other name is sent on." : null), list,
    field("Instructions", instructions), field("Input", input),
    field("Tools (JSON array: function tools, MCP servers...)", tools),
    el("div", { class: "checks" }, el("label", {}, stream, " Stream"), el("label", {}, background, " Background")), send);
  const error = el("div", { id: "play-error", role: "alert" });
  const text = el("pre", { id: "play-text", "aria-live": "polite", "data-deltas": "0" });
  const steps = el("ol", { class: "timeline", id: "play-steps", "aria-label": "Output items" });
  const status = el("p", { id: "play-status", class: "muted" });
  const actions = el("div", { id: "play-approvals" });
  const calls = el("div", { id: "play-calls" });
  const reply = el("form", { id: "play-reply", class: "playground", hidden: true, "aria-label": "Reply" },
    el("label", { class: "block" }, "Reply (continues this response)", el("textarea", { name: "reply", rows: 2, cols: 60, required: true })),
    el("button", { type: "submit", text: "Send reply" }));
  show(el("h2", { text: "Playground" }), form, error, status, text, actions, calls, steps, reply);
  ready("playground");

  const remember = () => sessionStorage.setItem(SAVED, JSON.stringify({
    model: model.value, instructions: instructions.value, input: input.value, tools: tools.value,
    stream: stream.checked, background: background.checked,
  }));
  form.addEventListener("input", remember);
  form.addEventListener("change", remember);
  let previous = null;
  let stopPoll = null;

  const fail = (message) => {
    error.replaceChildren(el("div", { class: "alert" }, el("strong", { text: "The request failed: " }), message));
    status.textContent = "";
    send.disabled = false;
    ready("play-error");
  };

  const finish = (final) => {
    previous = final.id;
    steps.replaceChildren(...(final.output || []).map((i) => step(i, "output")));
    if (!text.textContent) {
      text.textContent = (final.output || []).filter((i) => i.type === "message").map((i) => contentText(i.content)).join("\n");
    }
    const reason = final.incomplete_details && final.incomplete_details.reason;
    status.replaceChildren(`${final.status}${reason ? ` (${reason})` : ""} · `,
      el("a", { href: `#/response/${encodeURIComponent(final.id)}`, text: final.id }));
    if (final.status === "failed" && final.error) fail(`${final.error.code}: ${final.error.message}`);
    for (const item of final.output || []) {
      if (item.type === "mcp_approval_request") {
        const answer = (approve) => () => run([{ type: "mcp_approval_response", approval_request_id: item.id, approve }]);
        actions.append(el("div", { role: "group", "aria-label": `Approval for ${item.name}` },
          el("span", { text: `${item.server_label}.${item.name} ${item.arguments} ` }),
          el("button", { type: "button", text: "Approve", onclick: answer(true) }),
          el("button", { type: "button", text: "Deny", onclick: answer(false) })));
      }
      if (CLIENT_CALLS[item.type]) {
        const output = el("textarea", { name: `output-${item.call_id}`, rows: 2, cols: 50, required: true });
        const answerCall = el("form", { class: "call", "aria-label": `Answer the call ${item.name}`, "data-call": item.call_id },
          el("label", { class: "block" }, `Output of ${item.name}(${item.arguments ?? item.input ?? ""})`, output),
          el("button", { type: "submit", text: "Send output" }));
        answerCall.addEventListener("submit", (event) => {
          event.preventDefault();
          run([{ type: CLIENT_CALLS[item.type], call_id: item.call_id, output: output.value }]);
        });
        calls.append(answerCall);
      }
    }
    reply.hidden = final.status !== "completed";
    send.disabled = false;
    if (final.status !== "failed") ready("played");
  };

  const poll = (id) => new Promise((resolve) => {
    const check = async () => {
      try {
        const current = await api(`/v1/responses/${encodeURIComponent(id)}`);
        status.textContent = `Background response ${id}: ${current.status}…`;
        if (TERMINAL.has(current.status)) { stopPoll(); stopPoll = null; resolve(current); }
      } catch (err) {
        stopPoll(); stopPoll = null;
        fail(err.message);
        resolve(null);
      }
    };
    stopPoll = every(1000, check);
    check();
  });

  const run = async (continuation) => {
    delete document.getElementById("page").dataset.ready;
    let parsedTools;
    try {
      parsedTools = tools.value.trim() ? JSON.parse(tools.value) : undefined;
      if (parsedTools !== undefined && !Array.isArray(parsedTools)) throw new Error("expected a JSON array");
    } catch (err) {
      fail(`Tools: ${err.message}. Fix the JSON and send again: nothing was sent.`);
      return;
    }
    const body = { model: model.value, input: continuation || input.value, stream: stream.checked };
    if (instructions.value) body.instructions = instructions.value;
    if (parsedTools) body.tools = parsedTools;
    if (background.checked) { body.background = true; body.store = true; }
    if (continuation && previous) body.previous_response_id = previous;
    error.replaceChildren();
    status.textContent = "Running…";
    actions.replaceChildren();
    calls.replaceChildren();
    reply.hidden = true;
    text.textContent = "";
    text.dataset.deltas = "0";
    steps.replaceChildren();
    send.disabled = true;
    if (stopPoll) { stopPoll(); stopPoll = null; }
    let answer;
    try {
      answer = await fetch("/v1/responses", {
        method: "POST", headers: authHeaders({ "content-type": "application/json" }), body: JSON.stringify(body),
      });
    } catch (err) {
      fail(err.message);
      return;
    }
    if (!answer.ok) {
      const problem = new ApiError(answer.status, await answer.json().catch(() => null));
      fail(`HTTP ${answer.status}${problem.code ? ` ${problem.code}` : ""}: ${problem.message}`);
      return;
    }
    let final = null;
    try {
      if (body.stream) {
        for await (const event of sse(answer)) {
          if (event.type === "response.output_text.delta") {
            text.textContent += event.delta;
            text.dataset.deltas = String(Number(text.dataset.deltas) + 1);
          } else if (event.type === "response.output_item.done") {
            steps.append(step(event.item, "output"));
          } else if (event.type === "response.queued" || event.type === "response.in_progress") {
            status.textContent = `${event.response.status}…`;
          } else if (["response.completed", "response.incomplete", "response.failed"].includes(event.type)) {
            final = event.response;
          } else if (event.type === "error") {
            fail(event.error ? event.error.message : event.message || "stream error");
            return;
          }
        }
      } else {
        final = await answer.json();
        if (final.background && !TERMINAL.has(final.status)) final = await poll(final.id);
      }
    } catch (err) {
      fail(err.message);
      return;
    }
    if (!final) { if (!error.children.length) fail("The stream ended without a final response."); return; }
    finish(final);
  };
  form.addEventListener("submit", (event) => { event.preventDefault(); run(null); });
  reply.addEventListener("submit", (event) => {
    event.preventDefault();
    const message = reply.querySelector("textarea").value;
    reply.querySelector("textarea").value = "";
    run(message);
  });
}
