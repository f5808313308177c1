// Starts `colibri serve` on 127.0.0.1 with a free port and stops it.
import { spawn } from 'node:child_process';
import path from 'node:path';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';

export const SHARED = process.env.COLIBRI_SHARED_DIR ?? path.resolve(fileURLToPath(new URL('.', import.meta.url)), '../../../../shared');
export const MODEL_PATH = path.join(SHARED, 'golden', 'qwen3moe-q8_0.gguf');
export const MODEL = 'qwen3moe-q8_0';
export const GOLDEN = fs.existsSync(MODEL_PATH)
  ? JSON.parse(fs.readFileSync(path.join(SHARED, 'golden', 'qwen3moe-q8_0.json'), 'utf8'))
  : null;

export async function startServer(extraArgs = [], model = MODEL_PATH) {
  const bin = process.env.COLIBRI_BIN;
  if (!bin) throw new Error('set COLIBRI_BIN to the colibri binary');
  const args = ['serve', '-m', model, '--host', '127.0.0.1', '--port', '0', '-t', '2', ...extraArgs];
  const proc = spawn(bin, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start in 30 s:\n${log}`)), 30000);
    proc.stderr.on('data', (d) => {
      log += d;
      const m = log.match(/on (http:\/\/127\.0\.0\.1:\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    proc.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code}:\n${log}`));
    });
  });
  return {
    url,
    proc,
    log: () => log,
    async stop() {
      if (proc.exitCode !== null) return proc.exitCode;
      const exited = new Promise((r) => proc.on('exit', (code, sig) => r(code ?? sig)));
      proc.kill('SIGTERM');
      const t = setTimeout(() => proc.kill('SIGKILL'), 10000);
      const code = await exited;
      clearTimeout(t);
      return code;
    },
  };
}

export async function metric(url, name) {
  const text = await (await fetch(`${url}/metrics`)).text();
  const m = text.match(new RegExp(`^${name} (\\S+)$`, 'm'));
  return m ? Number(m[1]) : undefined;
}

export async function until(cond, ms = 10000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await cond()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return false;
}
