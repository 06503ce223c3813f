// dsse-check.mjs: an independent JavaScript verification of a narwhal DSSE
// envelope (ADR-006 signing; docs/evidence.md "Signing").
//
// It reads internal/evidence/sign/testdata/dsse-vector.json (written by the
// Go test TestDSSEVector), rebuilds the DSSE pre-authentication encoding
// itself, verifies the Ed25519 signature with @noble/ed25519 (pinned in
// scripts/node/package.json) and again with Node's own crypto, recomputes
// the key id, and checks the signed in-toto Statement's subject is the
// SHA-256 of the record's RFC 8785 form (computed with `canonicalize`).
// A one-byte change to the payload must fail. Exits 1 on any difference.
import { createRequire } from 'node:module';
import { createHash, createPublicKey, verify as nodeVerify } from 'node:crypto';
import { readFileSync } from 'node:fs';

const require = createRequire(new URL('./node/package.json', import.meta.url));
const canonicalize = require('canonicalize');
const ed = await import(require.resolve('@noble/ed25519'));

const url = new URL('../internal/evidence/sign/testdata/dsse-vector.json', import.meta.url);
const v = JSON.parse(readFileSync(url, 'utf8'));
const failures = [];
const check = (ok, what) => { if (!ok) failures.push(what); };

const pae = (type, body) => Buffer.concat([
  Buffer.from(`DSSEv1 ${Buffer.byteLength(type)} ${type} ${body.length} `, 'utf8'), body]);

const env = v.envelope;
const payload = Buffer.from(env.payload, 'base64');
const sig = Buffer.from(env.signatures[0].sig, 'base64');
const key = createPublicKey(v.public_key_pem);
const spki = key.export({ format: 'der', type: 'spki' });
const raw = spki.subarray(spki.length - 32); // Ed25519 SPKI ends with the 32-byte key

check(env.payloadType === 'application/vnd.in-toto+json', `payloadType ${env.payloadType}`);
check(await ed.verifyAsync(sig, pae(env.payloadType, payload), raw), '@noble/ed25519 rejects the signature');
check(nodeVerify(null, pae(env.payloadType, payload), key, sig), 'node:crypto rejects the signature');
check(createHash('sha256').update(spki).digest('hex') === v.keyid && env.signatures[0].keyid === v.keyid, 'key id differs');

const tampered = Buffer.from(payload);
tampered[tampered.length - 2] ^= 1;
check(!(await ed.verifyAsync(sig, pae(env.payloadType, tampered), raw)), 'a tampered payload verified');

const st = JSON.parse(payload.toString('utf8'));
const recordDigest = createHash('sha256').update(Buffer.from(canonicalize(st.predicate.record), 'utf8')).digest('hex');
check(st._type === 'https://in-toto.io/Statement/v1', `_type ${st._type}`);
check(st.subject[0].digest.sha256 === recordDigest, `subject ${st.subject[0].digest.sha256} is not the record's SHA-256 ${recordDigest}`);
check('1220' + recordDigest === v.record_digest && canonicalize(JSON.parse(v.record)) === v.record, 'record digest or canonical form differs');

if (failures.length > 0) {
  for (const f of failures) console.error(`dsse-check: ${url.pathname}: ${f}`);
  process.exit(1);
}
console.log(`dsse-check: envelope by key ${v.keyid.slice(0, 16)}… verified with @noble/ed25519 and node:crypto; subject = record digest ${v.record_digest.slice(0, 20)}…`);
