// colibri serve over real HTTP on loopback, through the official openai
// client: chat, streaming, completions, models, errors, determinism across
// parallel slots, cancellation, the queue limit, timeouts.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import OpenAI from 'openai';
import { startServer, metric, until, MODEL, GOLDEN } from './server.mjs';

const skip = GOLDEN ? false : 'golden models not found';
let srv;
let client;

before(async () => {
  if (skip) return;
  srv = await startServer(['--parallel', '8', '-c', '512', '--max-body', '65536', '--timeout', '2']);
  client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'unused', maxRetries: 0 });
});

after(async () => {
  if (srv) assert.equal(await srv.stop(), 0, `the server must exit cleanly:\n${srv.log()}`);
});

const chat = (content, extra = {}) =>
  client.chat.completions.create({
    model: MODEL,
    messages: [{ role: 'system', content: 'You are terse.' }, { role: 'user', content }],
    max_tokens: 12,
    temperature: 0,
    ...extra,
  });

test('GET /v1/models lists the model', { skip }, async () => {
  const models = await client.models.list();
  assert.equal(models.data.length, 1);
  assert.equal(models.data[0].id, MODEL);
  assert.equal(models.data[0].object, 'model');
  const one = await client.models.retrieve(MODEL);
  assert.equal(one.id, MODEL);
});

test('chat completion', { skip }, async () => {
  const r = await chat('Hello there');
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.model, MODEL);
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  assert.ok(r.usage.prompt_tokens > 5);
  assert.ok(r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= 12);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
});

// llama.cpp's greedy continuation of each golden prompt (golden/README.md),
// up to the first step whose top-2 margin is small enough to flip.
test('completions match llama.cpp greedy output', { skip }, async () => {
  let checked = 0;
  for (const c of GOLDEN.cases) {
    let k = 0;
    while (k < c.gen.length && c.gen[k].margin >= 0.3 && !c.gen[k].eog) k++;
    if (k < 2) continue;
    const r = await client.completions.create({ model: MODEL, prompt: c.prompt, max_tokens: k, temperature: 0 });
    assert.equal(r.object, 'text_completion');
    assert.match(r.id, /^cmpl-/);
    assert.equal(r.usage.completion_tokens, k);
    assert.equal(r.usage.prompt_tokens, c.tokens.length);
    // A last token that ends inside a character shows as U+FFFD.
    const text = r.choices[0].text.replace(/\uFFFD+$/, '');
    assert.ok(text.length > 0);
    assert.ok(c.gen_text.startsWith(text), `case ${c.name}: ${JSON.stringify(text)} vs ${JSON.stringify(c.gen_text)}`);
    checked++;
  }
  assert.ok(checked >= 2);
});

test('chat stream: role first, one id, finish_reason last, then usage', { skip }, async () => {
  const whole = await chat('Tell me a story', { max_tokens: 16 });
  const stream = await chat('Tell me a story', { max_tokens: 16, stream: true, stream_options: { include_usage: true } });
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  assert.ok(chunks.length >= 3);
  const id = chunks[0].id;
  for (const c of chunks) {
    assert.equal(c.id, id);
    assert.equal(c.object, 'chat.completion.chunk');
    assert.equal(c.created, chunks[0].created);
  }
  assert.equal(chunks[0].choices[0].delta.role, 'assistant');
  const usage = chunks.at(-1);
  assert.deepEqual(usage.choices, []);
  assert.equal(usage.usage.completion_tokens, whole.usage.completion_tokens);
  const body = chunks.slice(0, -1);
  const finishes = body.map((c) => c.choices[0].finish_reason);
  assert.equal(finishes.at(-1), whole.choices[0].finish_reason);
  assert.ok(finishes.slice(0, -1).every((f) => f === null));
  for (const c of body) assert.equal(c.usage, null);
  const text = body.map((c) => c.choices[0].delta.content ?? '').join('');
  assert.equal(text, whole.choices[0].message.content);
});

test('completion stream joins to the same text', { skip }, async () => {
  const req = { model: MODEL, prompt: 'Once upon a time', max_tokens: 10, temperature: 0 };
  const whole = await client.completions.create(req);
  const stream = await client.completions.create({ ...req, stream: true });
  let text = '';
  let last;
  for await (const c of stream) {
    text += c.choices[0].text;
    last = c.choices[0].finish_reason;
  }
  assert.equal(text, whole.choices[0].text);
  assert.equal(last, whole.choices[0].finish_reason);
});

test('logprobs', { skip }, async () => {
  const r = await chat('Hi', { max_tokens: 4, logprobs: true, top_logprobs: 3, ignore_eos: true });
  const content = r.choices[0].logprobs.content;
  assert.equal(content.length, 4);
  for (const t of content) {
    assert.ok(t.logprob <= 0);
    assert.equal(t.top_logprobs.length, 3);
    // Greedy: the chosen token is the most likely one.
    assert.ok(Math.abs(t.top_logprobs[0].logprob - t.logprob) < 1e-5);
    assert.ok(t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob);
  }
});

test('the same seed gives the same output', { skip }, async () => {
  const req = { temperature: 1.0, top_p: 1, top_k: 0, min_p: 0, seed: 4242, max_tokens: 16, ignore_eos: true };
  const a = await chat('Surprise me', req);
  const b = await chat('Surprise me', req);
  assert.equal(a.choices[0].message.content, b.choices[0].message.content);
  const c = await chat('Surprise me', { ...req, seed: 4243 });
  assert.equal(c.usage.completion_tokens, 16);
});

test('temperature 0: the same tokens alone or among 7 others', { skip }, async () => {
  const alone = await chat('What is the capital of France?', { max_tokens: 20, ignore_eos: true });
  const others = [1, 2, 3, 4, 5, 6, 7].map((i) =>
    chat(`Another question number ${i}`, { max_tokens: 10 + i, temperature: i % 2 ? 0.8 : 0, ignore_eos: true }));
  const [together] = await Promise.all([
    chat('What is the capital of France?', { max_tokens: 20, ignore_eos: true }), ...others]);
  assert.equal(together.choices[0].message.content, alone.choices[0].message.content);
  // Eight identical requests in eight slots.
  const same = await Promise.all(Array.from({ length: 8 }, () => chat('What is the capital of France?', { max_tokens: 20, ignore_eos: true })));
  for (const r of same) assert.equal(r.choices[0].message.content, alone.choices[0].message.content);
});

test('prefix cache: a repeated conversation reuses its KV', { skip }, async () => {
  const messages = [{ role: 'system', content: 'A long shared system prompt '.repeat(8) }, { role: 'user', content: 'first' }];
  const a = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 4, temperature: 0 });
  messages.push({ role: 'assistant', content: a.choices[0].message.content }, { role: 'user', content: 'second' });
  const b = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 4, temperature: 0 });
  assert.ok(b.usage.prompt_tokens_details.cached_tokens > a.usage.prompt_tokens / 2,
    JSON.stringify([a.usage, b.usage]));
});

test('bad requests get 400 with an OpenAI error object', { skip }, async () => {
  const cases = [
    [{ model: 'no-such-model' }, 'model'],
    [{ temperature: 'hot' }, 'temperature'],
    [{ max_tokens: -3 }, 'max_tokens'],
    [{ messages: [] }, 'messages'],
    [{ messages: [{ role: 'user', content: 'x '.repeat(3000) }] }, 'messages'],
  ];
  for (const [patch, param] of cases) {
    await assert.rejects(
      client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], ...patch }),
      (e) => {
        assert.ok(e instanceof OpenAI.BadRequestError, String(e));
        assert.equal(e.status, 400);
        assert.equal(e.param, param);
        assert.equal(typeof e.error.message, 'string');
        assert.equal(e.type, 'invalid_request_error');
        return true;
      });
  }
  const long = await fetch(`${srv.url}/v1/completions`, {
    method: 'POST', body: JSON.stringify({ model: MODEL, prompt: 'word '.repeat(2000) }) });
  assert.equal(long.status, 400);
  assert.equal((await long.json()).error.code, 'context_length_exceeded');
});

test('malformed JSON, a body over the limit, an unknown path', { skip }, async () => {
  for (const body of ['{"model":', 'null', '[]', '{"model": "' + MODEL + '", "messages": 5}']) {
    const r = await fetch(`${srv.url}/v1/chat/completions`, { method: 'POST', body });
    assert.equal(r.status, 400, body);
    const j = await r.json();
    assert.equal(typeof j.error.message, 'string');
    assert.equal(typeof j.error.type, 'string');
    assert.ok('code' in j.error);
  }
  const big = await fetch(`${srv.url}/v1/completions`, {
    method: 'POST', body: JSON.stringify({ model: MODEL, prompt: 'x'.repeat(100000) }) });
  assert.equal(big.status, 400);
  assert.equal((await big.json()).error.code, 'request_too_large');
  const nf = await fetch(`${srv.url}/v2/nothing`);
  assert.equal(nf.status, 404);
  assert.equal(typeof (await nf.json()).error.message, 'string');
  assert.equal((await fetch(`${srv.url}/health`)).status, 200);
});

test('a client that disconnects stops its sequence', { skip }, async () => {
  const before = await metric(srv.url, 'colibri_completions_cancelled_total');
  const stream = await chat('Go on forever', { max_tokens: 400, ignore_eos: true, stream: true });
  let n = 0;
  try {
    for await (const c of stream) {
      if (++n === 3) stream.controller.abort();
    }
  } catch {
    // an aborted stream may end quietly or with an AbortError
  }
  assert.ok(n >= 3 && n < 400);
  assert.ok(await until(async () => (await metric(srv.url, 'colibri_completions_cancelled_total')) > before),
    'the server did not notice the disconnect');
  assert.ok(await until(async () => (await metric(srv.url, 'colibri_slots_busy')) === 0));
});

test('a stalled client times out and the others are served', { skip }, async () => {
  const sock = net.connect(Number(new URL(srv.url).port), '127.0.0.1');
  await new Promise((r) => sock.on('connect', r));
  sock.write('POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"mod');
  let reply = '';
  sock.on('data', (d) => { reply += d; });
  const closed = new Promise((r) => sock.on('close', r));
  const r = await chat('still there?', { max_tokens: 3 });
  assert.equal(r.object, 'chat.completion');
  const t0 = Date.now();
  const timeout = new Promise((_, rej) => setTimeout(() => rej(new Error('not closed')), 10000));
  await Promise.race([closed, timeout]);
  assert.ok(Date.now() - t0 < 10000);
  assert.match(reply, /^HTTP\/1\.1 400 /);
});

test('/metrics speaks Prometheus', { skip }, async () => {
  const text = await (await fetch(`${srv.url}/metrics`)).text();
  for (const name of ['colibri_requests_total', 'colibri_generated_tokens_total', 'colibri_generation_tokens_per_second',
    'colibri_queue_depth', 'colibri_expert_cache_hit_ratio', 'colibri_expert_disk_bytes_read_total'])
    assert.match(text, new RegExp(`^# TYPE ${name} (counter|gauge)$`, 'm'));
  assert.match(text, /^colibri_requests_total\{path="\/v1\/chat\/completions",status="200"\} \d+$/m);
  assert.ok((await metric(srv.url, 'colibri_generated_tokens_total')) > 0);
});

test('--api-key: 401 without the key, served with it', { skip }, async () => {
  const s = await startServer(['--api-key', 'sekrit', '-c', '256']);
  try {
    const wrong = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: 'nope', maxRetries: 0 });
    await assert.rejects(wrong.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
    const none = await fetch(`${s.url}/v1/models`);
    assert.equal(none.status, 401);
    assert.equal(typeof (await none.json()).error.message, 'string');
    const right = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: 'sekrit', maxRetries: 0 });
    assert.equal((await right.models.list()).data[0].id, MODEL);
    assert.equal((await fetch(`${s.url}/health`)).status, 200);
  } finally {
    assert.equal(await s.stop(), 0);
  }
});

test('past the queue limit: 429 with Retry-After', { skip }, async () => {
  const s = await startServer(['--parallel', '1', '--queue', '0', '-c', '4096']);
  try {
    const c = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: 'x', maxRetries: 0 });
    // The demo model writes thousands of tokens a second, so on a loaded
    // machine the first request can end before the second arrives and the
    // second is rightly served: then both go again, a few times at most.
    let r;
    for (let attempt = 0; attempt < 5; ++attempt) {
      const stream = await c.completions.create({ model: MODEL, prompt: 'a', max_tokens: 4000, ignore_eos: true, stream: true });
      const it = stream[Symbol.asyncIterator]();
      await it.next();  // admitted and decoding
      r = await fetch(`${s.url}/v1/completions`, {
        method: 'POST', body: JSON.stringify({ model: MODEL, prompt: 'b', max_tokens: 2 }) });
      stream.controller.abort();
      if (r.status !== 200) break;
      await r.arrayBuffer();
    }
    assert.equal(r.status, 429);
    assert.equal(r.headers.get('retry-after'), '1');
    assert.equal((await r.json()).error.code, 'rate_limit_exceeded');
  } finally {
    assert.equal(await s.stop(), 0);
  }
});
