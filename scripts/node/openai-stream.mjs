// Streams a chat completion and runs a plain completion through a narwhal
// router with the official OpenAI JavaScript SDK. Usage:
//   node scripts/node/openai-stream.mjs <base-url> <model>
// Prints one JSON line with what it saw; exits non-zero on any failure.
import OpenAI from 'openai';

const [baseURL, model] = process.argv.slice(2);
if (!baseURL || !model) {
  console.error('usage: openai-stream.mjs <base-url ending in /v1> <model>');
  process.exit(2);
}
const client = new OpenAI({ baseURL, apiKey: 'unused-by-narwhal', maxRetries: 0, timeout: 30_000 });

const stream = await client.chat.completions.create({
  model,
  stream: true,
  max_tokens: 12,
  messages: [{ role: 'user', content: 'Say hello through the OpenAI SDK.' }],
});
let text = '';
let chunks = 0;
let finish = null;
for await (const chunk of stream) {
  chunks++;
  const choice = chunk.choices[0];
  if (choice?.delta?.content) text += choice.delta.content;
  if (choice?.finish_reason) finish = choice.finish_reason;
}
const completion = await client.completions.create({ model, prompt: 'The SDK says', max_tokens: 4 });

const result = {
  chunks, text, finish,
  completion_text: completion.choices[0].text,
  completion_tokens: completion.usage?.completion_tokens,
};
console.log(JSON.stringify(result));
if (chunks < 2 || text.length === 0 || finish !== 'length' || result.completion_tokens !== 4) {
  console.error('unexpected result from the router');
  process.exit(1);
}
