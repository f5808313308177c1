// colibri chat: two turns through a pipe; the second reuses the first's KV.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { MODEL_PATH, GOLDEN } from './server.mjs';

test('colibri chat keeps the conversation KV between turns', { skip: GOLDEN ? false : 'golden models not found' }, async () => {
  const p = spawn(process.env.COLIBRI_BIN, ['chat', '-m', MODEL_PATH, '-n', '6', '--temp', '0', '-c', '512', '-t', '2'],
    { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  p.stdout.on('data', (d) => { out += d; });
  p.stderr.on('data', (d) => { err += d; });
  p.stdin.end('Hello there\nAnd a second question\n/exit\n');
  const code = await new Promise((r) => p.on('exit', r));
  assert.equal(code, 0, err);
  const turns = [...err.matchAll(/\[prompt (\d+) tok, (\d+) reused from the previous turns \| (\d+) tok/g)]
    .map((m) => m.slice(1).map(Number));
  assert.equal(turns.length, 2, err);
  const [[p1, , g1], [p2, r2]] = turns;
  assert.ok(g1 >= 1 && g1 <= 6);
  assert.ok(p2 > p1);
  // The first turn's prompt is in the KV, and so is most of the reply.
  assert.ok(r2 >= p1, JSON.stringify(turns));
  assert.ok(out.length > 0);
});
