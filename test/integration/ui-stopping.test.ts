// A managed proxy that stops keeps its live feed going while its open streams finish: a watcher
// (the `ui` page) sees each of them close, with its bytes, before the feed ends — not a stream
// that vanishes with the proxy. One that dies instead (SIGKILL, out of memory) is gone on the
// page with that said, and where to look, not as if it had closed its feed.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startClusters, addWhich, type MultiCluster } from '../helpers/multi-cluster.js';
import { runCli } from '../helpers/proxy-process.js';
import { socks5Connect } from '../helpers/socks-client.js';
import type { Connected } from '../helpers/managed-proxies.js';
import { watchProxy } from '../../src/managed/control.js';
import { managedHub } from '../../src/managed/ui.js';
import { layout } from '../../src/state/paths.js';
import type { PageMessage } from '../../src/ui/page-server.js';
import type { FeedMessage } from '../../src/ui/feed.js';

let multi: MultiCluster;
let stateDir: string;
const env = () => ({ KUBECTL_PROXYOUT_STATE_DIR: stateDir });

before(async () => {
  multi = await startClusters(['prod']);
  await addWhich(multi.clusters[0]!);
  stateDir = mkdtempSync(path.join(tmpdir(), 'proxyout-state-'));
});

after(async () => {
  await runCli(['quit'], { env: env() });
  rmSync(stateDir, { recursive: true, force: true });
  await multi?.close();
});

async function connect(): Promise<Connected & { pid: number }> {
  const connected = await runCli(
    ['connect', '--kubeconfig', multi.kubeconfig, '--context', 'prod', '--listen-socks', '127.0.0.1:0', '--no-proxy-auth', '--shutdown-grace', '20s', '--json'],
    { env: env(), timeoutMs: 60_000 },
  );
  assert.equal(connected.code, 0, connected.stderr);
  return JSON.parse(connected.stdout) as Connected & { pid: number };
}

test('a stream that ends while its proxy stops is sent as closed before the feed ends', async () => {
  const { id, socks } = await connect();

  const messages: FeedMessage[] = [];
  let heard = (): void => undefined;
  const watch = watchProxy(path.join(stateDir, 'proxies', id, 'control.sock'), (m) => {
    messages.push(m);
    heard();
  });
  const until = (check: () => boolean, ms: number, what: string) =>
    new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms; got ${messages.map((m) => m.type).join(',')}`)), ms);
      heard = () => check() && (clearTimeout(timer), resolve());
      heard();
    });
  await until(() => messages.some((m) => m.type === 'snapshot'), 10_000, 'the snapshot');

  const stream = await socks5Connect(socks, 'which.shop.svc', 80);
  assert.equal(stream.reply, 0);
  const opened = () => messages.flatMap((m) => (m.type === 'events' ? m.opened : []));
  await until(() => opened().length === 1, 5_000, 'the stream opened');
  const streamId = opened()[0]!.id;

  const disconnect = runCli(['disconnect', id], { env: env(), timeoutMs: 60_000 });
  await until(() => messages.some((m) => m.type === 'stopping'), 10_000, 'the proxy stopping');
  stream.socket.end('GET / HTTP/1.1\r\nHost: which\r\nConnection: close\r\n\r\n');
  stream.socket.resume();

  const why = await watch.ended;
  assert.equal((await disconnect).code, 0);
  const closed = messages.flatMap((m) => (m.type === 'events' ? m.closed : []));
  assert.ok(
    closed.some((s) => s.id === streamId && (s.bytesToClient ?? 0) > 0),
    `the stream's close, with its answer's bytes, reached the watcher before the feed ended (${why}); got ${messages.map((m) => m.type).join(',')}`,
  );
});

test('a daemon killed outright is gone on the page as one that died, with where to look', async () => {
  const { id, pid } = await connect();
  const messages: PageMessage[] = [];
  let heard = (): void => undefined;
  const stop = managedHub(layout(stateDir), 200).subscribe((m) => {
    messages.push(m);
    heard();
  });
  const gone = () => messages.find((m) => m.proxy === id && m.type === 'gone');
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no snapshot: ${messages.map((m) => m.type).join(',')}`)), 10_000);
      heard = () => messages.some((m) => m.type === 'snapshot') && (clearTimeout(timer), resolve());
      heard();
    });
    process.kill(pid, 'SIGKILL');
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('not gone within 5 s')), 5_000);
      heard = () => gone() !== undefined && (clearTimeout(timer), resolve());
      heard();
    });
  } finally {
    stop();
  }
  const last = gone();
  const reason = last?.type === 'gone' ? last.reason : '';
  assert.match(reason, new RegExp(`pid ${pid}\\) exited without stopping .*kubectl proxyout logs ${id}$`));
});
