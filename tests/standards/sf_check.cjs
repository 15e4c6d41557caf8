// Reads rate headers and checks them with an RFC 9651 parser nobody here wrote (npm's
// structured-headers), against draft-ietf-httpapi-ratelimit-headers-11 and our own rules
// (docs/engine.md, "Disclosure"). Exits 1 naming every case and header that fails.
//
//   node sf_check.cjs vectors FILE   the shared header table (tests/vectors/headers.txt)
//   node sf_check.cjs headers FILE   captured `Name: value` lines; a line `## NAME [k=v ...]`
//                                    starts a case, and each k=v is an expectation on the
//                                    parsed policy: q=6, w=3, qu=tokens (qu=- : no qu), id=...
//                                    or on the parsed RateLimit: r=0, t=12.
'use strict';
const fs = require('fs');
const sf = require('structured-headers');

const [mode, file] = process.argv.slice(2);
if (!['vectors', 'headers'].includes(mode) || !file) {
  console.error('usage: sf_check.cjs vectors|headers FILE');
  process.exit(2);
}

// cases: [{name, expect: {k: v}, type, headers: [[name, value]]}]
function read(text) {
  const cases = [];
  let c = null;
  for (const line of text.split('\n')) {
    if (mode === 'vectors') {
      let m;
      if ((m = /^case (\S+)$/.exec(line))) cases.push((c = { name: m[1], expect: {}, headers: [] }));
      else if ((m = /^policy (\S+) (rpm|tpm) /.exec(line))) c.type = m[2];
      else if ((m = /^> ([A-Za-z-]+): (.*)$/.exec(line))) c.headers.push([m[1], m[2]]);
    } else {
      let m;
      if ((m = /^## (\S+)(.*)$/.exec(line))) {
        const expect = {};
        for (const kv of m[2].trim().split(/\s+/).filter(Boolean)) {
          const [k, v] = kv.split('=');
          expect[k] = v;
        }
        cases.push((c = { name: m[1], expect, headers: [] }));
      } else if (c && (m = /^([A-Za-z][A-Za-z-]*): (.*)$/.exec(line))) {
        c.headers.push([m[1], m[2]]);
      }
    }
  }
  return cases;
}

const GO_DURATION = /^(0s|[1-9][0-9]*ms|([1-9][0-9]*h)?([0-9]+m)?[0-9]+(\.[0-9]*[1-9])?s)$/;
const DIGITS = /^(0|[1-9][0-9]*)$/;

// One service-limit or policy List: one String item with Integer parameters where given.
function item(value, required, optional) {
  const list = sf.parseList(value); // throws on anything RFC 9651 does not allow
  if (list.length !== 1) throw new Error(`${list.length} items, want 1`);
  const [id, params] = list[0];
  if (typeof id !== 'string') throw new Error(`the item is a ${typeof id}, want a String`);
  const p = Object.fromEntries(params);
  for (const k of required) if (!(k in p)) throw new Error(`no ${k}`);
  for (const k of [...required, ...optional]) {
    if (k in p && k !== 'qu' && !(Number.isInteger(p[k]) && p[k] >= 0))
      throw new Error(`${k}=${p[k]} is not a non-negative Integer`);
  }
  return { id, p };
}

let failed = 0, fields = 0;
const cases = read(fs.readFileSync(file, 'utf8'));
for (const c of cases) {
  const h = Object.fromEntries(c.headers);
  const fail = (what) => {
    failed++;
    console.error(`FAIL ${c.name}: ${what}`);
  };
  let policy = null, limit = null;
  try {
    if ('Ratelimit-Policy' in h) {
      fields++;
      policy = item(h['Ratelimit-Policy'], ['q'], ['w', 'qu']);
      if ('w' in policy.p && policy.p.w === 0) throw new Error('w=0 (the draft: non-zero)');
      if ('qu' in policy.p && typeof policy.p.qu !== 'string')
        throw new Error(`qu is a ${typeof policy.p.qu}, want a String`);
    }
  } catch (e) {
    fail(`Ratelimit-Policy: ${h['Ratelimit-Policy']}: ${e.message}`);
  }
  try {
    if ('RateLimit' in h) {
      fields++;
      limit = item(h.RateLimit, ['r'], ['t']);
    }
  } catch (e) {
    fail(`RateLimit: ${h.RateLimit}: ${e.message}`);
  }
  if (policy && limit && policy.id !== limit.id)
    fail(`RateLimit names "${limit.id}", the policy "${policy.id}"`);
  // the draft's default unit is requests: a tpm policy must name its own
  if (policy && c.type && (c.type === 'tpm') !== (policy.p.qu === 'tokens'))
    fail(`${c.type} policy with qu=${policy.p.qu}`);
  for (const [k, v] of Object.entries(c.expect)) {
    const got = k === 'r' || k === 't' ? limit && limit.p[k] : k === 'id' ? policy && policy.id
      : policy && policy.p[k];
    if (String(got === undefined ? '-' : got) !== v) fail(`${k}=${got}, want ${v}`);
  }
  if ('Retry-After' in h) {
    if (!DIGITS.test(h['Retry-After'])) fail(`Retry-After: ${h['Retry-After']}`);
    // the draft: Retry-After SHOULD NOT point earlier than the end of the effective window
    else if (limit && 't' in limit.p && Number(h['Retry-After']) < limit.p.t)
      fail(`Retry-After ${h['Retry-After']} is before the end of t=${limit.p.t}`);
  }
  for (const kind of ['Requests', 'Tokens']) {
    for (const n of [`X-Ratelimit-Limit-${kind}`, `X-Ratelimit-Remaining-${kind}`])
      if (n in h && !DIGITS.test(h[n])) fail(`${n}: ${h[n]}`);
    const n = `X-Ratelimit-Reset-${kind}`;
    if (n in h && !GO_DURATION.test(h[n])) fail(`${n}: ${h[n]} is not a Go duration`);
  }
}
if (cases.length === 0) {
  console.error(`no cases in ${file}`);
  process.exit(1);
}
console.log(`${file}: ${cases.length} cases, ${fields} structured fields parsed, ${failed} failures`);
process.exit(failed ? 1 : 0);
