// The `openai` Node SDK against the gateway: responses.create, then responses.stream with a
// function tool and its round trip. Prints one JSON object on stdout for the Python test.
import OpenAI from "openai";

const client = new OpenAI({
  baseURL: process.env.GATEWAY_URL,
  apiKey: process.env.GATEWAY_KEY,
  maxRetries: 0,
});
const model = process.env.MODEL;

const created = await client.responses.create({ model, input: "hello from node" });

const tools = [
  {
    type: "function",
    name: "get_weather",
    description: "The weather in a city.",
    parameters: {
      type: "object",
      properties: { city: { type: "string" } },
      required: ["city"],
      additionalProperties: false,
    },
    strict: true,
  },
];
const input = [
  { role: "user", content: '<<call get_weather>>{"city": "Paris"}<</call>>' },
];
const stream = client.responses.stream({ model, input, tools });
const events = [];
for await (const event of stream) events.push(event);
const first = await stream.finalResponse();
const call = first.output.find((item) => item.type === "function_call");

const second = await client.responses.create({
  model,
  input: [
    ...input,
    ...first.output,
    { type: "function_call_output", call_id: call.call_id, output: "sunny in Paris" },
  ],
  tools,
});

console.log(
  JSON.stringify({
    created: { id: created.id, status: created.status, text: created.output_text },
    streamed: { events, status: first.status, call: { name: call.name, arguments: call.arguments } },
    second: { status: second.status, text: second.output_text },
  }),
);
