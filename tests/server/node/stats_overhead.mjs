// What an open page costs decoding: generation speed with the web page open
// in headless chromium (its stats stream at 2 Hz, the map redrawn) against
// no page, alternating rounds so that drift in a shared machine's load hits
// both alike, and the feed's own accounting of what it spent (feedCost).
// Not a test (timings); figures in docs/SERVER.md.
//   COLIBRI_BIN=build/colibri node tests/server/node/stats_overhead.mjs MODEL [rounds] [serve flags...]
import puppeteer from 'puppeteer-core';
import { startServer } from './server.mjs';

const [model, roundsArg, ...flags] = process.argv.slice(2);
const rounds = Number(roundsArg ?? 6);
const server = await startServer(['--parallel', '1', ...flags], model);
const browser = await puppeteer.launch({ executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
                                         headless: true, args: ['--no-sandbox', '--disable-gpu'] });
// Tokens per second of one greedy 256-token completion, timed by the client.
async function speed() {
  const t0 = performance.now();
  const r = await (await fetch(server.url + '/v1/completions', {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: MODEL_ID, prompt: 'It was a', max_tokens: 256, temperature: 0, ignore_eos: true }),
  })).json();
  return r.usage.completion_tokens / ((performance.now() - t0) / 1000);
}
// The feed's own accounting ("feed" in /v1/colibri/stats): CPU time the
// snapshots took, time in the store's counters call (which holds the lock
// expert acquires take) and the per-step copy of the usage counts, against
// the forward passes' time over the same stretch. An upper bound on what the
// feed takes from decoding, without the noise of timing two runs.
async function feedCost(fn) {
  const get = async () => (await fetch(server.url + '/v1/colibri/stats')).json();
  const a = await get();
  const r = await fn();
  const b = await get();
  const spent = (x) => x.feed.snapshot_cpu_s + x.feed.store_lock_s + x.feed.usage_copy_s;
  return { speed: r, share: (spent(b) - spent(a)) / (b.tokens.forward_s - a.tokens.forward_s),
           snapshots: b.feed.snapshots - a.feed.snapshots };
}
let MODEL_ID = null;
const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
try {
  const id = MODEL_ID = (await (await fetch(server.url + '/v1/models')).json()).data[0].id;
  const closed = [], open = [], stream = [], openCost = [], streamCost = [];
  await speed();  // warm: experts, page cache
  for (let i = 0; i < rounds; ++i) {
    closed.push(await speed());
    const page = await browser.newPage();
    await page.goto(server.url + '/');
    await page.waitForSelector('#expert-map .cell');
    const o = await feedCost(speed);
    open.push(o.speed);
    openCost.push(o);
    await page.close();
    // The server's side alone: a client reading the stats stream at the
    // page's rate, without a browser rendering on the same cores.
    const ctl = new AbortController();
    const r = await fetch(server.url + '/v1/colibri/stats/stream?interval_ms=500', { signal: ctl.signal });
    const reading = (async () => { try { for await (const _ of r.body); } catch {} })();
    const st = await feedCost(speed);
    stream.push(st.speed);
    streamCost.push(st);
    ctl.abort();
    await reading;
  }
  const c = median(closed), o = median(open), st = median(stream);
  const pct = (x) => `${(100 * (x - c) / c).toFixed(1)}%`;
  const all = (a) => a.map((x) => x.toFixed(0)).join(' ');
  console.log(`model ${id}, median tok/s of ${rounds} rounds: no page ${c.toFixed(1)}, ` +
              `page open ${o.toFixed(1)} (${pct(o)}), stats stream only ${st.toFixed(1)} (${pct(st)})`);
  console.log(`  no page: ${all(closed)}\n  page open: ${all(open)}\n  stream only: ${all(stream)}`);
  const share = (a) => `${(100 * median(a.map((x) => x.share))).toFixed(3)}% of forward time ` +
                       `(${median(a.map((x) => x.snapshots))} snapshots a round)`;
  console.log(`feed's own cost, median of rounds: page open ${share(openCost)}; stream only ${share(streamCost)}`);
} finally {
  await browser.close();
  await server.stop();
}
