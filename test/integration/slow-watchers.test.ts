// Watchers that stop reading cost a proxy bounded memory and nothing else: a `watch` on a managed
// proxy's control socket (src/managed/control.ts) and a browser's event stream on the `ui`
// command's page (src/ui/page-server.ts) are both cut once 4 MiB wait unsent, while the proxy —
// flooded with refusals whose long names make every event big — keeps serving curl, and a new
// watcher gets a fresh snapshot.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { once } from 'node:events';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readlinkSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startClusters, addWhich, type MultiCluster } from '../helpers/multi-cluster.js';
import { curl } from '../helpers/curl.js';
import { socks5Connect } from '../helpers/socks-client.js';
import { managedCli, startUi, type Connected, type UiCommand } from '../helpers/managed-proxies.js';
import { layout } from '../../src/state/paths.js';
import { MAX_UNSENT_FEED_BYTES } from '../../src/ui/feed.js';

/** What the proxy lets a watcher fall behind by (the control socket's and the page's alike). */
const CAP = MAX_UNSENT_FEED_BYTES;
/**
 * Enough feed to pass the cap and what the kernel holds on the way: a loopback TCP connection
 * takes several MiB before the sender sees its own buffer grow (a unix socket, a few hundred KiB).
 */
const REFUSALS = 40_000;
/** Refusals are sent in batches this big until both watchers are cut off (or REFUSALS are sent). */
const BATCH = 2_000;

let multi: MultiCluster;
let stateDir: string;
let managed: ReturnType<typeof managedCli>;
let proxy: Connected;
let ui: UiCommand | undefined;

before(async () => {
  multi = await startClusters(['prod']);
  await addWhich(multi.clusters[0]!);
  stateDir = mkdtempSync(path.join(os.tmpdir(), 'proxyout-state-'));
  managed = managedCli(stateDir);
  proxy = await managed.connect(multi.kubeconfig, 'prod');
  ui = await startUi(managed.env);
});

after(async () => {
  await ui?.stop();
  await managed?.cli(['quit']);
  rmSync(stateDir, { recursive: true, force: true });
  await multi?.close();
});

/**
 * Whether the proxy has closed its end of a connection we read nothing from, as the kernel sees
 * it (the close itself waits behind the unread bytes): a unix socket's peer is gone, a TCP
 * connection's far end has left ESTABLISHED. Undefined when `ss` (iproute2) cannot tell.
 */
function farEndClosed(socket: net.Socket): boolean | undefined {
  const ss = (args: string[]) => spawnSync('ss', ['-H', ...args], { encoding: 'utf8' });
  if (socket.remotePort === undefined) {
    const fd = (socket as unknown as { _handle?: { fd?: number } })._handle?.fd;
    const inode = fd === undefined ? undefined : /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/self/fd/${fd}`))?.[1];
    const out = ss(['-x']);
    if (inode === undefined || out.status !== 0) return undefined;
    // u_str ESTAB recv-q send-q * <our inode> * <peer inode, 0 once the peer is closed>
    const row = out.stdout
      .split('\n')
      .map((line) => line.trim().split(/\s+/))
      .find((cols) => cols[5] === inode);
    return row === undefined ? undefined : row[7] === '0';
  }
  const out = ss(['-tn', 'src', `${socket.remoteAddress}:${socket.remotePort}`, 'dst', `${socket.localAddress}:${socket.localPort}`]);
  if (out.status !== 0) return undefined;
  return !out.stdout.split('\n').some((line) => line.startsWith('ESTAB'));
}

/**
 * A connection that sends `request` and then reads nothing until told to; counts what it then
 * reads and whether the far end ended it. `cut()` asks the kernel whether the far end closed it.
 */
async function stalledReader(
  connect: () => net.Socket,
  request: string,
): Promise<{ cut(): boolean | undefined; drain(maxMs: number): Promise<{ bytes: number; ended: boolean }> }> {
  const socket = connect();
  await once(socket, 'connect');
  socket.write(request);
  socket.pause();
  return {
    cut: () => farEndClosed(socket),
    drain: (maxMs) =>
      new Promise((resolve) => {
        let bytes = 0;
        const timer = setTimeout(() => {
          socket.destroy();
          resolve({ bytes, ended: false });
        }, maxMs);
        socket.on('data', (c: Buffer) => (bytes += c.length));
        socket.on('error', () => undefined);
        socket.on('close', () => {
          clearTimeout(timer);
          resolve({ bytes, ended: true });
        });
        socket.resume();
      }),
  };
}

/**
 * Refusals with long names through the SOCKS listener: each makes a feed event of over half a
 * kilobyte. The counter has a label of its own: every name stays a valid one (labels ≤ 63 bytes,
 * names ≤ 255), refused as not allowed with the name in the event — not as a bad request.
 */
async function refusals(first: number, count: number, concurrency = 16): Promise<void> {
  const label = (c: string) => c.repeat(62);
  let next = first;
  const worker = async () => {
    while (next < first + count) {
      const i = next++;
      const host = `n${i}.${label('a')}.${label('b')}.${label('c')}.example`;
      const r = await socks5Connect(proxy.socks, host, 80);
      assert.notEqual(r.reply, 0, 'refused');
      r.socket.destroy();
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
}

test('a control-socket watcher and an event-stream reader that stop reading are cut off; the proxy keeps serving', async () => {
  const control = await stalledReader(() => net.connect(layout(stateDir).controlSocket(proxy.id)), `${JSON.stringify({ cmd: 'watch' })}\n`);
  const events = await stalledReader(
    () => net.connect(Number(ui!.url.port), ui!.url.hostname),
    `GET /ui/events${ui!.url.search} HTTP/1.1\r\nHost: ${ui!.url.host}\r\n\r\n`,
  );
  // About 600 bytes of feed per refusal (the long name is in its target and its message): sent
  // until both watchers are cut off, as the kernel sees it; at most REFUSALS.
  const started = Date.now();
  let sent = 0;
  while (sent < REFUSALS && !(control.cut() && events.cut())) {
    await refusals(sent, BATCH);
    sent += BATCH;
  }
  console.log(`# ${sent} refusals in ${Date.now() - started} ms`);

  const r = await curl(['-sS', '-x', `http://${proxy.http}`, 'http://which.shop.svc/']);
  assert.equal(r.code, 0, `the proxy serves while its watchers lag: ${r.stderr}`);

  const failures = JSON.parse((await managed.cli(['status', proxy.id, '--json'])).stdout).items[0].failuresByReason as Record<string, number>;
  assert.deepEqual(failures, { 'not-allowed': sent }, 'each refusal a full-size event');
  const [watched, streamed] = await Promise.all([control.drain(20_000), events.drain(20_000)]);
  console.log(`# the watcher read ${watched.bytes} bytes, the event stream ${streamed.bytes}`);
  assert.ok(watched.ended, `the control-socket watcher was cut off (read ${watched.bytes} bytes, then nothing ended it)`);
  assert.ok(watched.bytes < CAP * 2, `a cut watcher got at most its cap and the socket buffers: ${watched.bytes}`);
  assert.ok(streamed.ended, `the event-stream reader was cut off (read ${streamed.bytes} bytes, then nothing ended it)`);

  const again = await curl(['-sS', '-x', `http://${proxy.http}`, 'http://which.shop.svc/']);
  assert.equal(again.code, 0, again.stderr);
  assert.match(again.stdout, /which-prod/);
  const status = await managed.cli(['status', '--json']);
  assert.equal(status.code, 0, status.stderr);
  assert.equal(ui!.process.exitCode, null, 'the ui command runs on');

  // A new watcher starts from a fresh snapshot.
  const fresh = net.connect(layout(stateDir).controlSocket(proxy.id));
  fresh.write(`${JSON.stringify({ cmd: 'watch' })}\n`);
  fresh.setEncoding('utf8');
  let first = '';
  for await (const chunk of fresh) {
    first += chunk as string;
    if (first.includes('\n')) break;
  }
  fresh.destroy();
  assert.equal((JSON.parse(first.slice(0, first.indexOf('\n'))) as { type: string }).type, 'snapshot');
});
