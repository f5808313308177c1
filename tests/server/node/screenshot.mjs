// Takes docs/img/dashboard.png: the web page of `colibri serve` on a model
// while it generates (not a test; see docs/SERVER.md).
//   COLIBRI_BIN=build/colibri node tests/server/node/screenshot.mjs MODEL OUT.png [serve flags...]
import puppeteer from 'puppeteer-core';
import { startServer, until } from './server.mjs';

const [model, out, ...flags] = process.argv.slice(2);
const server = await startServer(flags, model);
const browser = await puppeteer.launch({ executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
                                         headless: true, args: ['--no-sandbox', '--disable-gpu'] });
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1400, height: 820 });
  page.on('pageerror', (e) => console.error('pageerror:', e.message));
  await page.goto(server.url + '/');
  await until(async () => (await page.$$('#expert-map .cell')).length > 0, 30000);
  await page.$eval('#max-tokens', (e) => { e.value = '400'; });
  await page.type('#input', 'Write a short story about a lighthouse keeper and the sea.');
  await page.keyboard.press('Enter');
  // Let the map fill for a while, then show one cell's tooltip.
  const seconds = Number(process.env.SHOT_AFTER_S ?? 40);
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const cell = await page.$('#expert-map .cell[data-layer="5"][data-expert="17"]');
  if (cell) await cell.hover();
  await new Promise((r) => setTimeout(r, 600));
  await page.screenshot({ path: out });
  console.log('wrote', out);
} finally {
  await browser.close();
  await server.stop();
}
