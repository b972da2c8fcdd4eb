// `kubectl proxyout ui`: one page for every managed proxy of the user. Two daemons (one per
// cluster) appear with their routes, each followed over its control socket (`watch`); a stream
// through one shows there with its pod; a proxy that disconnects is reported gone, and one
// connected while the page is open joins it. The command prints the URL and, with --no-open,
// opens nothing.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startClusters, addWhich, type MultiCluster } from '../helpers/multi-cluster.js';
import { binPath, runCli } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';
import type { PageMessage } from '../../src/ui/page-server.js';

let multi: MultiCluster;
let stateDir: string;
let ui: ChildProcess | undefined;
const ids: Record<string, { id: string; http: string }> = {};
const env = () => ({ KUBECTL_PROXYOUT_STATE_DIR: stateDir });
const cli = (args: string[]) => runCli(args, { env: env(), timeoutMs: 60_000 });

async function connect(context: string): Promise<{ id: string; http: string }> {
  const r = await cli([
    'connect',
    '--kubeconfig',
    multi.kubeconfig,
    '--context',
    context,
    '--listen-socks',
    '127.0.0.1:0',
    '--listen-http',
    '127.0.0.1:0',
    '--no-proxy-auth',
    '--shutdown-grace',
    '0',
    '--json',
  ]);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout) as { id: string; http: string };
}

before(async () => {
  multi = await startClusters(['prod', 'staging']);
  await addWhich(multi.clusters[0]!);
  stateDir = mkdtempSync(path.join(tmpdir(), 'proxyout-state-'));
  ids.prod = await connect('prod');
});

after(async () => {
  if (ui && ui.exitCode === null) {
    ui.kill('SIGTERM');
    await once(ui, 'exit');
  }
  await cli(['quit']);
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
  ui = spawn(process.execPath, [binPath, 'ui', '--no-open'], { env: { ...process.env, ...env() }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  ui.stdout!.setEncoding('utf8');
  const url = await new Promise<URL>((resolve, reject) => {
    ui!.stdout!.on('data', (c: string) => {
      out += c;
      const m = /^kubectl-proxyout: live page at (http:\/\/127\.0\.0\.1:\d+\/\?token=[\w-]+) /m.exec(out);
      if (m) resolve(new URL(m[1]!));
    });
    ui!.once('exit', (code) => reject(new Error(`ui exited with ${code}: ${out}`)));
  });
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

    const gone = await cli(['disconnect', ids.prod!.id]);
    assert.equal(gone.code, 0, gone.stderr);
    await feed.until((all) => all.some((m) => m.proxy === ids.prod!.id && m.type === 'gone'), 10_000, 'a proxy that disconnected');
  } finally {
    feed.close();
  }
  ui.kill('SIGTERM');
  const [code] = (await once(ui, 'exit')) as [number | null];
  assert.equal(code, 0);
});
