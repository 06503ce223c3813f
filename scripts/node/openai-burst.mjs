// Sends N chat completions at once through a narwhal router with the
// official OpenAI JavaScript SDK at its default retries (maxRetries 2), as a
// new user's code would, and counts what the client saw. Usage:
//   node scripts/node/openai-burst.mjs <base-url ending in /v1> <model> <N>
// Prints one JSON line: calls, ok, failed by status, the HTTP attempts the
// SDK made (counted in its fetch), and TTFT percentiles of the calls that
// succeeded (seconds from the call to its first streamed token).
import OpenAI from 'openai';

const [baseURL, model, nArg] = process.argv.slice(2);
const n = Number(nArg);
if (!baseURL || !model || !(n > 0)) {
  console.error('usage: openai-burst.mjs <base-url ending in /v1> <model> <N>');
  process.exit(2);
}
let attempts = 0;
const countingFetch = (url, init) => { attempts++; return fetch(url, init); };
const client = new OpenAI({ baseURL, apiKey: 'unused-by-narwhal', timeout: 120_000, fetch: countingFetch });

async function one(i) {
  const t0 = performance.now();
  try {
    const stream = await client.chat.completions.create({
      model, stream: true, max_tokens: 16,
      messages: [{ role: 'user', content: `Burst call ${i}: say something short.` }],
    });
    let ttft = null;
    for await (const chunk of stream) {
      if (ttft === null && chunk.choices[0]?.delta?.content) ttft = (performance.now() - t0) / 1000;
    }
    return { ok: true, ttft };
  } catch (e) {
    return { ok: false, status: e?.status ?? 'none', headers: e?.headers };
  }
}

const results = await Promise.all(Array.from({ length: n }, (_, i) => one(i)));
const ttfts = results.filter((r) => r.ok && r.ttft !== null).map((r) => r.ttft).sort((a, b) => a - b);
const q = (p) => (ttfts.length ? ttfts[Math.min(ttfts.length - 1, Math.floor(p * ttfts.length))] : null);
const failed = {};
let retryAfterMissing = 0;
for (const r of results) {
  if (r.ok) continue;
  failed[r.status] = (failed[r.status] ?? 0) + 1;
  if (r.status === 429 && !r.headers?.get?.('retry-after')) retryAfterMissing++;
}
console.log(JSON.stringify({
  calls: n, ok: results.filter((r) => r.ok).length, failed, attempts,
  retry_after_missing: retryAfterMissing, ttft_p50_s: q(0.5), ttft_p99_s: q(0.99),
}));
