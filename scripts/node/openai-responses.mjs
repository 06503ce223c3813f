// Creates a Response through a narwhal router with the official OpenAI
// JavaScript SDK: once plain (a message-list input with instructions), once
// streamed through the SDK's ResponseStream, whose accumulator checks the
// event order (created first; items and parts added before their deltas).
// Usage:
//   node scripts/node/openai-responses.mjs <base-url ending in /v1> <model>
// Prints one JSON line with what it saw; exits non-zero on any failure.
import OpenAI from 'openai';

const [baseURL, model] = process.argv.slice(2);
if (!baseURL || !model) {
  console.error('usage: openai-responses.mjs <base-url ending in /v1> <model>');
  process.exit(2);
}
const client = new OpenAI({ baseURL, apiKey: 'unused-by-narwhal', maxRetries: 0, timeout: 30_000 });

const plain = await client.responses.create({
  model,
  instructions: 'answer briefly',
  max_output_tokens: 6,
  input: [{ role: 'user', content: [{ type: 'input_text', text: 'tell me about narwhals' }] }],
});

const stream = client.responses.stream({ model, max_output_tokens: 5, input: 'tell me about narwhals' });
const types = [];
let deltas = '';
for await (const event of stream) {
  types.push(event.type);
  if (event.type === 'response.output_text.delta') deltas += event.delta;
}
const final = await stream.finalResponse();
// The SDK adds output_text to a created Response, not to a stream's final
// one (ResponseStream's finalizeResponse): read the message part itself.
const finalText = final.output.filter((o) => o.type === 'message')
  .flatMap((o) => o.content).filter((c) => c.type === 'output_text').map((c) => c.text).join('');

let refused = null;
try {
  await client.responses.create({ model, input: 'hi', previous_response_id: 'resp_1' });
} catch (e) {
  refused = { status: e.status, param: e.param };
}

const result = {
  plain_text: plain.output_text, plain_status: plain.status, plain_output_tokens: plain.usage?.output_tokens,
  events: types.length, first: types[0], last: types[types.length - 1],
  deltas, final_text: finalText, final_output_tokens: final.usage?.output_tokens, refused,
};
console.log(JSON.stringify(result));
if (!plain.output_text || plain.object !== 'response' || result.plain_output_tokens !== 6 ||
    result.first !== 'response.created' || result.last !== 'response.completed' || result.events < 9 ||
    deltas.length === 0 || deltas !== finalText || result.final_output_tokens !== 5 ||
    refused?.status !== 400 || refused?.param !== 'previous_response_id') {
  console.error('unexpected result from the router');
  process.exit(1);
}
