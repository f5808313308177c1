// The web page of `colibri serve` in a real browser (Debian's chromium,
// headless, driven by puppeteer-core): chat through the text box with the
// reply streamed, the expert map filling as tokens are routed, tooltips, no
// script errors. Run by browser.sh (ctest server_browser), which skips where
// chromium or node_modules is missing.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import puppeteer from 'puppeteer-core';
import { startServer, until } from './server.mjs';

const ROOT = path.resolve(fileURLToPath(new URL('.', import.meta.url)), '../../..');
const DEMO = path.join(ROOT, 'models', 'colibri-demo-q8_0.gguf');
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const ARTIFACTS = process.env.COLIBRI_ARTIFACT_DIR ?? '.';
const PROMPT = 'Tell me about the prince.';

// Sum of data-uses over the map's cells, and their count.
const mapUses = (page) =>
  page.$$eval('#expert-map .cell', (cells) => ({
    n: cells.length,
    uses: cells.reduce((a, c) => a + Number(c.dataset.uses), 0),
  }));

test('the page chats, streams and maps the experts', async (t) => {
  // A budget well under the model's 9.9 MB of experts: they stream from
  // disk, so the map shows cached and on-disk experts and the hit rate moves.
  const server = await startServer(['--mem', '16M', '-c', '1024', '--no-history', '--parallel', '1'], DEMO);
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    // Root in a container: no user namespace for chromium's sandbox.
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  t.after(async () => {
    await browser.close();
    await server.stop();
  });
  const page = await browser.newPage();
  await page.setViewport({ width: 1400, height: 860 });
  const errors = [];
  page.on('console', (m) => { if (m.type() === 'error') errors.push('console: ' + m.text()); });
  page.on('pageerror', (e) => errors.push('pageerror: ' + e.message));
  page.on('requestfailed', (r) => {
    // The stats stream is cut when the page closes; anything else is a failure.
    if (!r.url().includes('/stats/stream')) errors.push('request failed: ' + r.url() + ' (' + (r.failure()?.errorText ?? '?') + ')');
  });

  await page.goto(server.url + '/', { waitUntil: 'domcontentloaded' });
  assert.equal(await page.title(), 'colibri');
  // The demo model: 4 MoE layers of 8 experts.
  assert.ok(await until(async () => (await mapUses(page)).n === 32), 'the map has 4 x 8 cells');
  const first = await page.$eval('#expert-map .cell', (c) => [c.dataset.layer, c.dataset.expert]);
  assert.deepEqual(first, ['0', '0']);
  const before = await mapUses(page);
  assert.ok(await until(async () => (await page.$eval('#conn', (e) => e.textContent)) === 'live'));
  assert.match(await page.$eval('#model', (e) => e.textContent), /colibri-demo-q8_0/);

  // Count the reply's visible updates: streamed text changes many times.
  await page.evaluate(() => {
    window.__updates = 0;
    new MutationObserver((records) => { window.__updates += records.length; })
      .observe(document.getElementById('messages'), { subtree: true, childList: true, characterData: true });
  });
  await page.$eval('#temperature', (e) => { e.value = '0'; });
  await page.$eval('#max-tokens', (e) => { e.value = '40'; });
  await page.type('#input', PROMPT);
  await page.keyboard.press('Enter');
  assert.ok(await until(() => page.$eval('#stop', (b) => !b.disabled), 5000) ||
            await page.$('.msg.assistant .meta'), 'the stop button is live while it streams');
  assert.ok(await until(async () => (await page.$('.msg.assistant .meta')) !== null, 60000), 'the reply ends');
  const reply = await page.$eval('.msg.assistant', (e) => e.firstChild.textContent);
  const meta = await page.$eval('.msg.assistant .meta', (e) => e.textContent);
  const updates = await page.evaluate(() => window.__updates);
  assert.match(meta, /finish: (length|stop)/);
  assert.ok(updates >= 10, `the reply arrived in ${updates} updates; streamed token by token it takes more`);
  assert.equal(await page.$eval('#input', (e) => e.value), '', 'the box is emptied on send');

  // The same request without streaming gives the same greedy text.
  const direct = await (await fetch(server.url + '/v1/chat/completions', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: 'colibri-demo-q8_0', messages: [{ role: 'user', content: PROMPT }],
                           temperature: 0, max_tokens: 40 }),
  })).json();
  assert.equal(reply, direct.choices[0].message.content);

  // The map caught up with the routing: every routed token counted, as the
  // server's own figures say, and far more than before.
  const stats = async () => (await (await fetch(server.url + '/v1/colibri/stats')).json());
  const served = async () => (await stats()).layers.reduce((a, l) => a + l.uses.reduce((x, y) => x + y, 0), 0);
  assert.ok(await until(async () => (await mapUses(page)).uses === await served(), 5000), 'the map shows the server\'s counts');
  const after = await mapUses(page);
  // 2 experts in each of 4 layers for every token of both requests.
  assert.ok(after.uses >= before.uses + 2 * 4 * 40, `data-uses went from ${before.uses} to ${after.uses}`);
  const s = await stats();
  assert.ok(s.cache.bytes_read > 0 && s.layers[0].where.length === 8, 'experts were read from disk');
  assert.ok(s.layers.every((l) => l.hits.length === 8 && l.bytes_read.length === 8));
  assert.notEqual(await page.$eval('#f-hit', (e) => e.textContent), '–');
  assert.match(await page.$eval('#plan', (e) => e.textContent), /cache slots/);

  // A stream interval out of range is a clear 400, not a busy loop.
  for (const bad of ['abc', '0', '49', '10001', '250ms', '-5']) {
    const r = await fetch(`${server.url}/v1/colibri/stats/stream?interval_ms=${bad}`);
    assert.equal(r.status, 400, bad);
    assert.equal((await r.json()).error.param, 'interval_ms');
  }

  // Hovering a used cell names it.
  const hot = await page.$('#expert-map .cell:not([data-uses="0"])');
  await hot.hover();
  const tip = await page.$eval('#tip', (e) => e.style.display === 'block' ? e.textContent : '');
  assert.match(tip, /layer\s*\d+/);
  assert.match(tip, /routed tokens\s*[1-9]/);
  assert.match(tip, /read from disk/);

  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const shot = path.join(ARTIFACTS, 'dashboard-test.png');
  await page.screenshot({ path: shot });
  assert.ok(fs.statSync(shot).size > 10000);

  // A second turn keeps the first; Clear forgets both.
  await page.type('#input', 'And then?');
  await page.keyboard.press('Enter');
  assert.ok(await until(async () => (await page.$$('.msg.assistant .meta')).length === 2, 60000));
  assert.equal((await page.$$('.msg.user')).length, 2);
  assert.ok((await stats()).tokens.cached > 0, 'the second turn reused the first one\'s KV');
  await page.click('#clear');
  assert.equal((await page.$$('.msg')).length, 0);

  assert.deepEqual(errors, []);
});

test('the page says what is wrong when the key is missing', async (t) => {
  const server = await startServer(['--api-key', 'sesame', '--parallel', '1', '--no-history'], DEMO);
  const browser = await puppeteer.launch({ executablePath: CHROMIUM, headless: true,
                                           args: ['--no-sandbox', '--disable-gpu'] });
  t.after(async () => {
    await browser.close();
    await server.stop();
  });
  const page = await browser.newPage();
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  // The page itself needs no key; the figures do.
  const res = await page.goto(server.url + '/');
  assert.equal(res.status(), 200);
  assert.ok(await until(async () => /key/i.test(await page.$eval('#conn', (e) => e.textContent)), 10000));
  await page.type('#api-key', 'sesame');
  await page.$eval('#api-key', (e) => e.dispatchEvent(new Event('change')));
  assert.ok(await until(async () => (await page.$eval('#conn', (e) => e.textContent)) === 'live', 10000));
  assert.ok(await until(async () => (await mapUses(page)).n === 32));
  assert.deepEqual(pageErrors, []);
});
