// The /status page in a real browser: Debian's chromium, headless, driven by playwright-core
// with JavaScript off (the page must be readable without it). Run by status_page.py inside the
// fleet's bridge namespace, so the replicas' listeners are reachable as they are to a person.
//
// usage: node status_page.cjs CHROMIUM URL USER_DATA_DIR
// Prints one JSON line when the page first loaded ({"event":"loaded", ...}), then answers each
// command read from stdin with one JSON line:
//   poll MEMBER STATE TIMEOUT_MS [SHOT.png]   reload until MEMBER's state cell reads STATE
//                                             -> {"event":"seen"|"timeout", "states":[...], ...}
//                                             (MEMBER "redis": the Redis store's badge)
//   quit
// Every request the browser makes is recorded: the page may fetch nothing but itself.
'use strict';
const readline = require('readline');
const { chromium } = require('playwright-core');

const [chromiumPath, url, userDataDir] = process.argv.slice(2);

function out(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

// What the rendered page shows: member -> state, the limits, N, the charts drawn.
async function read(page) {
  return page.evaluate(() => {
    const members = {};
    for (const tr of document.querySelectorAll('#members tr[data-member]'))
      members[tr.getAttribute('data-member')] = tr.querySelector('td.state').textContent.trim();
    const limits = [...document.querySelectorAll('#limits tr[data-limit]')].map((tr) => ({
      id: tr.getAttribute('data-limit'),
      cells: [...tr.querySelectorAll('td')].map((td) => td.textContent.trim()),
      charts: tr.querySelectorAll('svg polyline').length,
    }));
    const n = /N = (\d+)/.exec(document.body.innerText);
    const redisDt = [...document.querySelectorAll('dt')].find((dt) => dt.textContent === 'Redis');
    const redisBadge = redisDt && redisDt.nextElementSibling.querySelector('.st');
    return { members, limits, n: n ? Number(n[1]) : null, title: document.title,
             redis: redisBadge ? redisBadge.textContent.trim() : null,
             styled: getComputedStyle(document.querySelector('table')).borderCollapse };
  });
}

(async () => {
  // page.evaluate runs in the inspector's world, which javaScriptEnabled: false leaves alone:
  // the page's own scripts (it has none) would not run.
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: chromiumPath,
    headless: true,
    javaScriptEnabled: false,
    viewport: { width: 1180, height: 760 },
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const page = context.pages()[0] || (await context.newPage());
  const requests = [];
  const violations = [];
  page.on('request', (r) => requests.push(r.url()));
  page.on('console', (m) => { if (/Content.Security.Policy|Refused/i.test(m.text())) violations.push(m.text()); });
  let res = await page.goto(url, { waitUntil: 'load' });
  const first = await read(page);
  out({ event: 'loaded', status: res.status(), csp: res.headers()['content-security-policy'] || '',
        requests: [...new Set(requests)], violations, ...first });
  const rl = readline.createInterface({ input: process.stdin });
  for await (const line of rl) {
    const [cmd, member, state, timeoutMs, shot] = line.trim().split(/\s+/);
    if (cmd === 'quit') break;
    if (cmd !== 'poll') { out({ event: 'error', message: `unknown command ${cmd}` }); continue; }
    const end = Date.now() + Number(timeoutMs);
    const states = [];
    let view;
    for (;;) {
      requests.length = 0;
      res = await page.goto(url, { waitUntil: 'load' });
      view = await read(page);
      const s = member === 'redis' ? view.redis : view.members[member];
      if (states[states.length - 1] !== s) states.push(s);
      if (s === state || Date.now() > end) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    const seen = (member === 'redis' ? view.redis : view.members[member]) === state;
    if (seen && shot) await page.screenshot({ path: shot, fullPage: true });
    out({ event: seen ? 'seen' : 'timeout', states, requests: [...new Set(requests)], violations,
          ...view });
  }
  await context.close();
})().catch((e) => { out({ event: 'error', message: String(e && e.stack || e) }); process.exit(1); });
