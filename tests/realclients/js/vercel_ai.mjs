// The Vercel AI SDK (`ai` + `@ai-sdk/openai`, the Responses model) against the gateway:
// generateText and streamText, each a two-step tool loop (stopWhen: stepCountIs(3)), and a
// follow-up turn sending the first one's messages back.
// STORE=false sends providerOptions.openai.store = false (the whole items, not references).
// Prints one JSON object on stdout for the Python test.
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, stepCountIs, streamText, tool } from "ai";
import { z } from "zod";

const provider = createOpenAI({ baseURL: process.env.GATEWAY_URL, apiKey: process.env.GATEWAY_KEY });
const model = provider.responses(process.env.MODEL);
const providerOptions = process.env.STORE === "false" ? { openai: { store: false } } : undefined;

const calls = [];
const tools = {
  get_weather: tool({
    description: "The weather in a city.",
    inputSchema: z.object({ city: z.string() }),
    execute: async ({ city }) => {
      calls.push(city);
      return `sunny in ${city}`;
    },
  }),
};
const prompt = (city) => `<<call get_weather>>{"city": "${city}"}<</call>>`;
const summary = (result) => ({
  text: result.text,
  steps: result.steps.length,
  finishReasons: result.steps.map((step) => step.finishReason),
  toolCalls: result.steps.flatMap((step) => step.toolCalls.map((c) => [c.toolName, c.input])),
});

const generated = await generateText({
  model,
  tools,
  prompt: prompt("Paris"),
  stopWhen: stepCountIs(3),
  providerOptions,
  maxRetries: 0,
});

// A chat app's next turn: the history as messages. With store: true the SDK sends the first
// turn's assistant text as an item_reference (its gateway item id), not as text.
const followUp = await generateText({
  model,
  tools,
  messages: [
    { role: "user", content: prompt("Paris") },
    ...generated.response.messages,
    { role: "user", content: "thanks" },
  ],
  providerOptions,
  maxRetries: 0,
});

const streamed = streamText({
  model,
  tools,
  prompt: prompt("Rome"),
  stopWhen: stepCountIs(3),
  providerOptions,
  maxRetries: 0,
  onError: ({ error }) => {
    console.error(String(error?.stack ?? error));
    process.exitCode = 2;
  },
});
const deltas = [];
for await (const delta of streamed.textStream) deltas.push(delta);
const streamedSummary = {
  text: await streamed.text,
  deltas,
  steps: (await streamed.steps).length,
  finishReasons: (await streamed.steps).map((step) => step.finishReason),
  toolCalls: (await streamed.steps).flatMap((step) => step.toolCalls.map((c) => [c.toolName, c.input])),
};

console.log(
  JSON.stringify({
    generated: summary(generated),
    followUp: summary(followUp),
    streamed: streamedSummary,
    calls,
  }),
);
