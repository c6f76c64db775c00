// More of WebSocket mode with the `openai` Node SDK's ResponsesWS: 20 tool round trips on one
// socket (store: false, only the tool output each turn), a stored response created over HTTP
// continued on the socket and back over HTTP, a client leaving mid-stream, and a handshake
// refused for a wrong key. Prints what it saw as one JSON object.
import OpenAI from "openai";
import { ResponsesWS } from "openai/resources/responses/ws";

const options = { baseURL: process.env.GATEWAY_URL, apiKey: process.env.GATEWAY_KEY, maxRetries: 0 };
const client = new OpenAI(options);
const model = process.env.MODEL;
const TERMINAL = new Set(["response.completed", "response.incomplete", "response.failed", "error"]);

function open(openaiClient) {
  const socket = new ResponsesWS(openaiClient);
  const waiting = [];
  const queued = [];
  socket.on("event", (event) => {
    const resolve = waiting.shift();
    if (resolve) resolve(event);
    else queued.push(event);
  });
  socket.on("error", () => {});
  const next = () =>
    queued.length ? Promise.resolve(queued.shift()) : new Promise((r) => waiting.push(r));
  const response = async () => {
    const events = [];
    do events.push(await next());
    while (!TERMINAL.has(events[events.length - 1].type));
    return events;
  };
  return { socket, next, response };
}

const tools = [
  {
    type: "function",
    name: "read_file",
    description: "Read a file.",
    parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
  },
];
const out = {};

// 20 tool round trips on one socket
{
  const { socket, response } = open(client);
  out.loop = [];
  socket.send({ type: "response.create", model, input: "Go", tools, store: false });
  let events = await response();
  out.loop.push(events);
  for (let turn = 0; turn < 20; turn += 1) {
    const last = events[events.length - 1].response;
    const call = last.output.find((item) => item.type === "function_call");
    socket.send({
      type: "response.create",
      model,
      previous_response_id: last.id,
      input: [{ type: "function_call_output", call_id: call.call_id, output: `r${turn}` }],
      tools,
      store: false,
    });
    events = await response();
    out.loop.push(events);
  }
  socket.close();
}

// HTTP -> socket -> HTTP
{
  const first = await client.responses.create({ model, input: "alpha" });
  const { socket, response } = open(client);
  socket.send({ type: "response.create", model, previous_response_id: first.id, input: "beta" });
  out.on_socket = await response();
  socket.close();
  const onSocket = out.on_socket[out.on_socket.length - 1].response;
  const back = await client.responses.create({ model, previous_response_id: onSocket.id, input: "gamma" });
  out.http = { first: first.id, back: back.output_text };
}

// a client leaving mid-stream
{
  const { socket, next } = open(client);
  socket.send({ type: "response.create", model, input: "count" });
  const created = await next();
  let event;
  do event = await next();
  while (event.type !== "response.output_text.delta");
  socket.close();
  out.left = created.response.id;
}

// a refused handshake
{
  const wrong = new OpenAI({ ...options, apiKey: "sk-wrong" });
  const socket = new ResponsesWS(wrong);
  out.refused = await new Promise((resolve) => {
    socket.on("error", (error) => resolve({ error: String(error.message) }));
    socket.on("close", (code) => resolve({ close: code }));
  });
}

// exit once stdout is flushed (a pipe is written asynchronously; the refused socket may linger)
process.stdout.write(JSON.stringify(out) + "\n", () => process.exit(0));
