// Load test: 64 connections against `colibri serve` for 60 s (autocannon).
// Not part of ctest; run tests/server/load.sh. Prints requests/s, tokens/s,
// latency percentiles, status codes and the server's memory over time, and
// exits non-zero on any 5xx, a crash or memory growth.
import fs from 'node:fs';
import autocannon from 'autocannon';
import { startServer, metric, MODEL } from './server.mjs';

const connections = Number(process.env.CONNECTIONS ?? 64);
const duration = Number(process.env.DURATION ?? 60);
const parallel = process.env.PARALLEL ?? '8';
const maxTokens = Number(process.env.MAX_TOKENS ?? 32);

const rssKiB = (pid) => Number(fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+)/)[1]);

const srv = await startServer(['--parallel', parallel, '--queue', '64', '-c', '1024']);
const pid = srv.proc.pid;
const bodies = [0, 1, 2, 3, 4, 5, 6, 7].map((i) => JSON.stringify({
  model: MODEL,
  messages: [{ role: 'system', content: 'You are a helpful assistant.' },
    { role: 'user', content: `Question ${i}: tell me something about the number ${i * 17}.` }],
  max_tokens: maxTokens,
  temperature: 0.8,
  seed: i,
}));
let n = 0;
const tokens0 = await metric(srv.url, 'colibri_generated_tokens_total');
const rss = [];
const sampler = setInterval(() => rss.push(rssKiB(pid)), 5000);
const t0 = Date.now();
const result = await autocannon({
  url: `${srv.url}/v1/chat/completions`,
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  connections,
  duration,
  setupClient: (client) => client.setBody(bodies[n++ % bodies.length]),
});
const seconds = (Date.now() - t0) / 1000;
clearInterval(sampler);
const tokens = (await metric(srv.url, 'colibri_generated_tokens_total')) - tokens0;
const alive = srv.proc.exitCode === null && (await fetch(`${srv.url}/health`)).status === 200;
const codes = result.statusCodeStats ?? {};
const fivexx = Object.entries(codes).filter(([c]) => c >= 500).reduce((a, [, v]) => a + v.count, 0);
const exitCode = await srv.stop();

const settled = rss.slice(2);  // after the first 10 s
const growth = settled.length > 1 ? settled.at(-1) - settled[0] : 0;
const report = {
  connections, duration_s: seconds, parallel: Number(parallel), max_tokens: maxTokens,
  requests: result.requests.total, requests_per_s: result.requests.average,
  tokens_generated: tokens, tokens_per_s: tokens / seconds,
  latency_ms: { p50: result.latency.p50, p90: result.latency.p90, p99: result.latency.p99, max: result.latency.max },
  status_codes: Object.fromEntries(Object.entries(codes).map(([c, v]) => [c, v.count])),
  errors: result.errors, timeouts: result.timeouts, non2xx: result.non2xx, http_5xx: fivexx,
  rss_mib: rss.map((k) => Math.round(k / 102.4) / 10), rss_growth_after_10s_mib: growth / 1024,
  server_alive_at_end: alive, server_exit_code: exitCode,
};
console.log(JSON.stringify(report, null, 2));
const ok = fivexx === 0 && alive && exitCode === 0 && growth < 64 * 1024;
if (!ok) console.error('load test FAILED');
process.exit(ok ? 0 : 1);
