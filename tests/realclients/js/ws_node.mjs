// The `openai` Node SDK's WebSocket client (ResponsesWS, over the `ws` package) against the
// gateway's WebSocket mode. The Python test scripts the upstream; this script runs the steps in
// order and prints every server event it received, grouped by step, as one JSON object.
import OpenAI from "openai";
import { ResponsesWS } from "openai/resources/responses/ws";

const client = new OpenAI({
  baseURL: process.env.GATEWAY_URL,
  apiKey: process.env.GATEWAY_KEY,
  maxRetries: 0,
});
const model = process.env.MODEL;
const socket = new ResponsesWS(client);

const waiting = [];
const queued = [];
socket.on("event", (event) => {
  const resolve = waiting.shift();
  if (resolve) resolve(event);
  else queued.push(event);
});
socket.on("error", () => {}); // error events are read from "event" like every other one
const next = () =>
  queued.length ? Promise.resolve(queued.shift()) : new Promise((r) => waiting.push(r));

const TERMINAL = new Set(["response.completed", "response.incomplete", "response.failed", "error"]);
async function untilTerminal(count = 1) {
  const events = [];
  let ended = 0;
  while (ended < count) {
    const event = await next();
    events.push(event);
    if (TERMINAL.has(event.type)) ended += 1;
  }
  return events;
}
const last = (events) => events[events.length - 1];

const tools = [
  {
    type: "function",
    name: "get_weather",
    description: "The weather in a city.",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
];
const steps = {};

socket.send({ type: "response.create", model, input: "Say hello" });
steps.text = await untilTerminal();

socket.send({ type: "response.create", model, input: "Weather in Paris?", tools, store: false });
steps.tool_call = await untilTerminal();
const first = last(steps.tool_call).response;
const call = first.output.find((item) => item.type === "function_call");
socket.send({
  type: "response.create",
  model,
  previous_response_id: first.id,
  input: [{ type: "function_call_output", call_id: call.call_id, output: "sunny, 24C" }],
  tools,
  store: false,
});
steps.tool_answer = await untilTerminal();

socket.send({ type: "response.create", model, input: "alpha question", stream_id: "a", store: false });
socket.send({ type: "response.create", model, input: "beta question", stream_id: "b", store: false });
steps.parallel = await untilTerminal(2);
const alpha = steps.parallel.find((e) => e.type === "response.completed" && e.stream_id === "a");
socket.send({
  type: "response.create",
  model,
  input: "gamma follow-up",
  stream_id: "fork",
  previous_response_id: alpha.response.id,
  store: false,
});
steps.fork = await untilTerminal();

socket.send({ type: "response.create", model, input: "The code is 42", generate: false, store: false });
steps.warm = await untilTerminal();
socket.send({
  type: "response.create",
  model,
  previous_response_id: last(steps.warm).response.id,
  input: "What is the code?",
  store: false,
});
steps.warm_answer = await untilTerminal();

socket.send({ type: "response.create", model, input: "hi", previous_response_id: "resp_unknown" });
steps.unknown = await untilTerminal();

socket.close();
console.log(JSON.stringify(steps));
