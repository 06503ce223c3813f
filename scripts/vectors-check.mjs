// vectors-check.mjs: the cross-language proof of ADR-006 / INV-43.
//
// "A digest is correct when an independent implementation in another
// language reproduces it." This recomputes every published vector in
// internal/canon/testdata/vectors/records.json with the RFC 8785 authors'
// JavaScript implementation (npm package `canonicalize`, pinned in
// scripts/node/package.json) and Node's own SHA-256, and exits 1 on any
// difference. Run it with `make node-checks`.
import { createRequire } from 'node:module';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';

const require = createRequire(new URL('./node/package.json', import.meta.url));
const canonicalize = require('canonicalize');

const vectorsURL = new URL('../internal/canon/testdata/vectors/records.json', import.meta.url);
const file = JSON.parse(readFileSync(vectorsURL, 'utf8'));

if (file.schema !== 'narwhal.canon-vectors' || file.schema_version !== 1) {
  console.error(`vectors-check: ${vectorsURL.pathname}: want schema narwhal.canon-vectors v1, got ${file.schema} v${file.schema_version}`);
  process.exit(1);
}

const digest = (text) => '1220' + createHash('sha256').update(Buffer.from(text, 'utf8')).digest('hex');

let checked = 0;
const failures = [];
for (const v of file.vectors) {
  if (v.input_hex !== undefined) continue; // rejections are checked by the Go tests only
  const canonical = canonicalize(JSON.parse(v.input));
  const d = digest(canonical);
  if (canonical !== v.canonical) {
    failures.push(`${v.name}: canonical form differs\n  js:   ${JSON.stringify(canonical)}\n  file: ${JSON.stringify(v.canonical)}`);
  } else if (d !== v.digest) {
    failures.push(`${v.name}: digest differs\n  js:   ${d}\n  file: ${v.digest}`);
  }
  checked++;
}

if (checked < 25) failures.push(`only ${checked} vectors found; the vector set must hold at least 25`);
for (const f of failures) console.error('vectors-check: ' + f);
if (failures.length > 0) {
  console.error(`vectors-check: ${failures.length} of ${checked} vectors differ between Go and JavaScript`);
  process.exit(1);
}
console.log(`vectors-check: ${checked} vectors reproduced by canonicalize (JavaScript) and node:crypto`);
