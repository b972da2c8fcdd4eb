// The garbage-collection guard (src/core/gc-guard.ts) runs in both processes that serve: the
// foreground proxy and the managed daemon. V8's thrashing during bulk transfers cannot be brought
// about on demand (whether a process falls into it is chance), so a preloaded fixture stands in
// for it: once the file named by PROXYOUT_TEST_GC_TRIGGER exists (a file, not a signal, so it
// works on Windows too) it runs six full collections at once, which is what thrashing looks like
// to the guard. The real CLI must then log that it turned incremental marking off, and keep
// serving. Also the other memory setting a daemon starts with: its C allocator's environment
// (src/managed/allocator-env.ts).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { once } from 'node:events';
import os from 'node:os';
import path from 'node:path';
import { eventually, startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { runCli, startProxyProcess } from '../helpers/proxy-process.js';
import { socks5Connect } from '../helpers/socks-client.js';

let cluster: TestCluster;
let dir: string;
let env: NodeJS.ProcessEnv;

before(async () => {
  cluster = await startTestCluster();
  dir = await mkdtemp(path.join(os.tmpdir(), 'proxyout-gc-'));
  const fixture = path.join(dir, 'six-full-gcs-on-trigger.cjs');
  await writeFile(
    fixture,
    [
      "const fs = require('node:fs');",
      "const v8 = require('node:v8');",
      "const vm = require('node:vm');",
      "v8.setFlagsFromString('--expose-gc');",
      "const gc = vm.runInNewContext('gc');",
      'const trigger = process.env.PROXYOUT_TEST_GC_TRIGGER;',
      'if (trigger) {',
      '  const poll = setInterval(() => {',
      '    if (!fs.existsSync(trigger)) return;',
      '    clearInterval(poll);',
      '    for (let i = 0; i < 6; i++) gc();',
      '  }, 50);',
      '  poll.unref();',
      '}',
    ].join('\n'),
  );
  // JSON quoting: NODE_OPTIONS takes a double-quoted value with backslash escapes (Windows paths).
  env = { NODE_OPTIONS: `--require ${JSON.stringify(fixture)}`, KUBECTL_PROXYOUT_STATE_DIR: path.join(dir, 'state') };
});

after(async () => {
  await runCli(['quit'], { env }).catch(() => undefined);
  await cluster?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const ENGAGED = /V8 keeps marking the whole heap while data flows; incremental marking off/;

/**
 * Wakes the proxy's event loop with a connection that closes at once. Node hands 'gc' entries to
 * observers from the event loop without waking it: in an idle proxy they waited for its next
 * timer (seconds); traffic, which is when thrashing happens, wakes it all the time.
 */
async function wake(hostPort: string): Promise<void> {
  const i = hostPort.lastIndexOf(':');
  const socket = net.connect(Number(hostPort.slice(i + 1)), hostPort.slice(0, i));
  await once(socket, 'connect').catch(() => undefined);
  socket.destroy();
}

/** GET /bytes/N from web.shop through the proxy: the number of body bytes that came back. */
async function download(socks: string, bytes: number): Promise<number> {
  const { reply, socket, rest } = await socks5Connect(socks, 'web.shop.svc.cluster.local', 8080);
  assert.equal(reply, 0);
  socket.write(`GET /bytes/${bytes} HTTP/1.1\r\nHost: web\r\nConnection: close\r\n\r\n`);
  const chunks: Buffer[] = [Buffer.from(rest)];
  socket.on('data', (c: Buffer) => chunks.push(c));
  socket.resume(); // socks5Connect hands the socket over paused
  await new Promise((resolve, reject) => socket.on('end', resolve).on('error', reject));
  const all = Buffer.concat(chunks);
  return all.length - (all.indexOf('\r\n\r\n') + 4);
}

test('the foreground proxy turns incremental marking off when major collections pile up, and keeps serving', async () => {
  const trigger = path.join(dir, 'foreground-trigger');
  const proxy = await startProxyProcess(['--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--log-level', 'debug', '--log-format', 'json'], {
    env: { ...env, PROXYOUT_TEST_GC_TRIGGER: trigger },
  });
  try {
    assert.equal(await download(proxy.socks!, 1 << 20), 1 << 20);
    assert.ok(!proxy.logs.some((l) => ENGAGED.test(String(l.msg))), 'no thrashing, no guard');
    await writeFile(trigger, '');
    await eventually(
      async () => {
        await wake(proxy.socks!);
        return proxy.logs.some((l) => ENGAGED.test(String(l.msg)));
      },
      10_000,
      50,
    );
    assert.equal(await download(proxy.socks!, 8 << 20), 8 << 20);
  } finally {
    assert.equal(await proxy.stop(), 0);
  }
});

test('so does the managed daemon', async () => {
  const trigger = path.join(dir, 'daemon-trigger');
  const r = await runCli(
    ['connect', '--socks', '--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--log-level', 'debug', '--no-proxy-auth', '--json'],
    { env: { ...env, PROXYOUT_TEST_GC_TRIGGER: trigger } },
  );
  assert.equal(r.code, 0, r.stderr);
  const { id, socks, logFile } = JSON.parse(r.stdout) as { id: string; socks: string; logFile: string };
  try {
    assert.ok(!ENGAGED.test(readFileSync(logFile, 'utf8')), 'no thrashing, no guard');
    await writeFile(trigger, '');
    await eventually(
      async () => {
        await wake(socks);
        return ENGAGED.test(readFileSync(logFile, 'utf8'));
      },
      10_000,
      50,
    );
    assert.equal(await download(socks, 8 << 20), 8 << 20);
  } finally {
    const d = await runCli(['disconnect', id], { env });
    assert.equal(d.code, 0, d.stderr);
  }
});

test('a daemon on Linux starts with a fixed malloc trim threshold; one the user set is kept', { skip: process.platform !== 'linux' }, async () => {
  const environOf = (pid: number) => readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
  for (const [extra, expected] of [
    [{}, 'MALLOC_TRIM_THRESHOLD_=1048576'],
    [{ MALLOC_ARENA_MAX: '2' }, undefined],
  ] as const) {
    const r = await runCli(['connect', '--socks', '--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--no-proxy-auth', '--json'], {
      env: { ...env, ...extra },
    });
    assert.equal(r.code, 0, r.stderr);
    const { id, pid } = JSON.parse(r.stdout) as { id: string; pid: number };
    try {
      const trim = environOf(pid).find((kv) => kv.startsWith('MALLOC_TRIM_THRESHOLD_='));
      assert.equal(trim, expected, JSON.stringify(extra));
    } finally {
      const d = await runCli(['disconnect', id], { env });
      assert.equal(d.code, 0, d.stderr);
    }
  }
});
