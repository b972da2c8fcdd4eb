// Managed daemons against other commands at the worst moment: the real CLI and real detached
// daemons, with the simulated clusters' stalls and the state lock as the seams that hold one side
// at a known point (no sleeps deciding who wins).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { open, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startClusters, type MultiCluster } from '../helpers/multi-cluster.js';
import { runCli } from '../helpers/proxy-process.js';
import { controlRequest } from '../../src/state/control.js';
import { layout } from '../../src/state/paths.js';
import { readEntry } from '../../src/state/store.js';

let multi: MultiCluster;
let stateDir: string;
const daemons = new Set<number>();

const env = () => ({ KUBECTL_PROXYOUT_STATE_DIR: stateDir });
const cli = (args: string[], timeoutMs = 60_000) => runCli(args, { env: env(), timeoutMs });
const proxyDir = (id: string) => path.join(stateDir, 'proxies', id);
const TABLE = (withStaging: boolean) => `routes:
  - name: prod
    kind: cluster
    context: prod
${withStaging ? '  - name: staging\n    kind: cluster\n    context: staging\n' : ''}`;

async function connect(id: string, args: string[]): Promise<{ pid: number; socks: string }> {
  const r = await cli(['connect', '--kubeconfig', multi.kubeconfig, '--listen-socks', '127.0.0.1:0', '--no-auth', '--json', '--id', id, ...args]);
  assert.equal(r.code, 0, `connect failed: ${r.stderr}`);
  const out = JSON.parse(r.stdout) as { pid: number; socks: string };
  daemons.add(out.pid);
  return out;
}

async function routesOf(id: string): Promise<string[]> {
  const r = await cli(['status', id, '--json']);
  assert.equal(r.code, 0, r.stderr);
  return (JSON.parse(r.stdout) as { routes: Array<{ name: string }> }).routes.map((x) => x.name);
}

before(async () => {
  multi = await startClusters(['prod', 'staging']);
  stateDir = mkdtempSync(path.join(tmpdir(), 'proxyout-races-'));
});

after(async () => {
  await cli(['quit']).catch(() => undefined);
  for (const pid of daemons) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
  rmSync(stateDir, { recursive: true, force: true });
  await multi?.close();
});

test('reload of a proxy replaced while its table was made: refused, the new proxy and its files untouched', { skip: process.platform === 'win32' && 'needs a FIFO' }, async () => {
  const configFile = path.join(multi.dir, 'replaced.yaml');
  await writeFile(configFile, TABLE(false));
  const old = await connect('replaced', ['--config', configFile]);
  const oldCreatedAt = readEntry(layout(stateDir), 'replaced')!.createdAt;
  // The config file becomes a FIFO: reload, having looked at the entry, waits in its read of
  // the file until we write it — the time a slow disk or network home directory takes.
  await rm(configFile);
  execFileSync('mkfifo', ['-m', '600', configFile]);
  const reloading = cli(['reload', 'replaced']);
  const writer = await open(configFile, 'w'); // opens once reload opened the file to read it
  try {
    // Meanwhile the proxy is disconnected and connected again under its ID, from another file.
    assert.equal((await cli(['disconnect', 'replaced'])).code, 0);
    const other = path.join(multi.dir, 'replacement.yaml');
    await writeFile(other, TABLE(false));
    const now = await connect('replaced', ['--config', other]);
    assert.notEqual(now.pid, old.pid);
    await writer.write(TABLE(true));
  } finally {
    await writer.close();
  }
  const r = await reloading;
  assert.equal(r.code, 1, r.stdout);
  assert.match(r.stderr, /proxy replaced was replaced \(disconnected and connected again\) while its new routing table was made; nothing was reloaded/);
  assert.deepEqual(await routesOf('replaced'), ['prod'], 'the new proxy keeps its own table');
  assert.deepEqual(readdirSync(proxyDir('replaced')).filter((f) => f.startsWith('kubeconfig') || f.startsWith('table')), ['kubeconfig'], 'no files of the old table in its directory');

  // A request prepared for the old daemon that reaches the new one after all is refused by it.
  const answer = await controlRequest(path.join(proxyDir('replaced'), 'control.sock'), { cmd: 'reload', createdAt: oldCreatedAt }, 10_000);
  assert.equal(answer.ok, false);
  assert.match((answer as { error: string }).error, /another proxy under the ID replaced/);
  assert.equal((await cli(['disconnect', 'replaced'])).code, 0);
  assert.equal(existsSync(proxyDir('replaced')), false);
});
