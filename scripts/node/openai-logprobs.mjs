// Asks a narwhal router for logprobs through the official OpenAI
// JavaScript SDK: chat and completions, streamed and not. The SDK yields
// each stream event's JSON as parsed (openai-node src/core/streaming.ts,
// Stream.fromSSEResponse), so what it reads is what the router sent.
// Usage:
//   node scripts/node/openai-logprobs.mjs <base-url> <model>
// Prints one JSON line per case; exits non-zero when a case's logprobs do
// not have one entry per completion token with the asked candidates.
import OpenAI from 'openai';

const [baseURL, model] = process.argv.slice(2);
if (!baseURL || !model) {
  console.error('usage: openai-logprobs.mjs <base-url ending in /v1> <model>');
  process.exit(2);
}
const client = new OpenAI({ baseURL, apiKey: 'unused-by-narwhal', maxRetries: 0, timeout: 30_000 });
const maxTokens = 5;
const top = 2;

// entries folds a choice's logprobs into [token, candidates] pairs.
function entries(lp, chat) {
  if (!lp) return [];
  if (chat) return (lp.content ?? []).map((e) => [e.token, e.top_logprobs.length]);
  return lp.tokens.map((t, i) => [t, Object.keys(lp.top_logprobs[i] ?? {}).length]);
}

async function run(chat, stream) {
  const common = { model, max_tokens: maxTokens, stream };
  if (stream) common.stream_options = { include_usage: true };
  const req = chat
    ? { ...common, messages: [{ role: 'user', content: 'logprobs via the SDK' }], logprobs: true, top_logprobs: top }
    : { ...common, prompt: 'logprobs via the SDK', logprobs: top };
  const api = chat ? client.chat.completions : client.completions;
  let text = '';
  let got = [];
  let usage;
  if (stream) {
    for await (const chunk of await api.create(req)) {
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) {
        text += chat ? (c.delta?.content ?? '') : c.text;
        got = got.concat(entries(c.logprobs, chat));
      }
    }
  } else {
    const r = await api.create(req);
    usage = r.usage;
    const c = r.choices[0];
    text = chat ? c.message.content : c.text;
    got = entries(c.logprobs, chat);
  }
  const ok = usage?.completion_tokens === maxTokens && got.length === maxTokens &&
    got.map(([t]) => t).join('') === text && got.every(([, n]) => n === top);
  return { chat, stream, entries: got.length, completion_tokens: usage?.completion_tokens, ok };
}

let failed = false;
for (const chat of [true, false]) {
  for (const stream of [false, true]) {
    const r = await run(chat, stream);
    console.log(JSON.stringify(r));
    failed ||= !r.ok;
  }
}
if (failed) {
  console.error('logprobs through the router do not match the completion tokens');
  process.exit(1);
}
