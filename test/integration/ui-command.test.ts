// `kubectl proxyout ui`: one page for every managed proxy of the user. Two daemons (one per
// cluster) appear with their routes, each followed over its control socket (`watch`); a stream
// through one shows there with its pod; a proxy that disconnects is reported gone, and one
// connected while the page is open joins it. The command prints the URL and, with --no-open,
// opens nothing.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startClusters, addWhich, type MultiCluster } from '../helpers/multi-cluster.js';
import { curl } from '../helpers/curl.js';
import { startProxyProcess } from '../helpers/proxy-process.js';
import { managedCli, startUi, type Connected, type UiCommand } from '../helpers/managed-proxies.js';
import { THIS_PROXY } from '../../src/proxy/live.js';
import type { PageMessage } from '../../src/ui/page-server.js';

let multi: MultiCluster;
let stateDir: string;
let managed: ReturnType<typeof managedCli>;
let ui: UiCommand | undefined;
const ids: Record<string, Connected> = {};
const connect = (context: string) => managed.connect(multi.kubeconfig, context);

before(async () => {
  multi = await startClusters(['prod', 'staging']);
  await addWhich(multi.clusters[0]!);
  stateDir = mkdtempSync(path.join(tmpdir(), 'proxyout-state-'));
  managed = managedCli(stateDir);
  ids.prod = await connect('prod');
});

after(async () => {
  await ui?.stop();
  await managed?.cli(['quit']);
  rmSync(stateDir, { recursive: true, force: true });
  await multi?.close();
});

/** Follows the page's event stream; `until` is asked after each message. */
function follow(url: URL): { messages: PageMessage[]; until(check: (all: PageMessage[]) => boolean, ms: number, what: string): Promise<void>; close(): void } {
  const messages: PageMessage[] = [];
  const waiters = new Set<() => void>();
  let partial = '';
  const req = http.get({ host: url.hostname, port: url.port, path: `/ui/events${url.search}` }, (res) => {
    assert.equal(res.statusCode, 200);
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => {
      partial += chunk;
      let end: number;
      while ((end = partial.indexOf('\n\n')) >= 0) {
        const block = partial.slice(0, end);
        partial = partial.slice(end + 2);
        const data = /^data: (.*)$/m.exec(block);
        if (data) messages.push(JSON.parse(data[1]!) as PageMessage);
      }
      for (const w of waiters) w();
    });
  });
  req.on('error', () => undefined);
  return {
    messages,
    until: (check, ms, what) =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.delete(look);
          reject(new Error(`${what}: not within ${ms} ms; got ${JSON.stringify(messages.map((m) => [m.proxy, m.type]))}`));
        }, ms);
        const look = () => {
          if (!check(messages)) return;
          clearTimeout(timer);
          waiters.delete(look);
          resolve();
        };
        waiters.add(look);
        look();
      }),
    close: () => req.destroy(),
  };
}

test('ui prints its URL, and its page follows every managed proxy: snapshots, streams with their pod, proxies that leave and join', async () => {
  ui = await startUi(managed.env);
  const url = ui.url;
  const feed = follow(url);
  try {
    const snapshotOf = (id: string) => (all: PageMessage[]) => all.some((m) => m.proxy === id && m.type === 'snapshot');
    await feed.until(snapshotOf(ids.prod!.id), 10_000, 'the first proxy');
    const first = feed.messages.find((m) => m.type === 'snapshot')!;
    assert.ok(first.type === 'snapshot');
    assert.equal(first.info.context, 'prod');
    assert.deepEqual(
      first.routes.map((r) => [r.name, r.state]),
      [['prod', 'ready']],
    );
    assert.equal(first.info.http, ids.prod!.http);

    const r = await curl(['-sS', '-x', `http://${ids.prod!.http}`, 'http://which.shop.svc/']);
    assert.equal(r.code, 0, r.stderr);
    await feed.until(
      (all) => all.some((m) => m.proxy === ids.prod!.id && m.type === 'events' && m.opened.some((s) => s.via === 'shop/which-prod:8080')),
      2_000,
      'the stream with its pod',
    );

    ids.staging = await connect('staging');
    await feed.until(snapshotOf(ids.staging.id), 10_000, 'a proxy connected while the page is open');

    const gone = await managed.cli(['disconnect', ids.prod!.id]);
    assert.equal(gone.code, 0, gone.stderr);
    await feed.until((all) => all.some((m) => m.proxy === ids.prod!.id && m.type === 'gone'), 10_000, 'a proxy that disconnected');
  } finally {
    feed.close();
  }
  assert.equal(await ui.stop(), 0);
});

test("a foreground proxy's own page shows the user's managed proxies beside it", async () => {
  const own = await startProxyProcess(
    ['--kubeconfig', multi.kubeconfig, '--context', 'prod', '--listen-socks', '127.0.0.1:0', '--listen-http', '127.0.0.1:0', '--shutdown-grace', '0'],
    { env: managed.env },
  );
  const line = own.stdout.find((l) => l.includes('live page at'));
  assert.ok(line, own.stdout.join('\n'));
  const feed = follow(new URL(/live page at (\S+)/.exec(line)![1]!));
  try {
    const snapshotOf = (proxy: string) => (all: PageMessage[]) => all.some((m) => m.proxy === proxy && m.type === 'snapshot');
    await feed.until(snapshotOf(THIS_PROXY), 5_000, 'the proxy serving the page');
    await feed.until(snapshotOf(ids.staging!.id), 10_000, 'the managed proxy still running');
    assert.ok(!feed.messages.some((m) => m.proxy === ids.prod!.id && m.type === 'snapshot'), 'not the one disconnected before');
  } finally {
    feed.close();
    await own.stop();
  }
});
