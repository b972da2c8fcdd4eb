// A route's state is the truth: with two clusters in one managed proxy, the second one's API
// server stopped after start is shown within 5 s as degraded (why, since when) in `status`,
// `status --json` and `doctor`; requests for its names fail at once naming the route and its
// context (the other cluster has the same demo Service); the change is one log line, not one per
// request; and when the server is back the route serves again by itself, also one line.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startClusters, addWhich, type MultiCluster } from '../helpers/multi-cluster.js';
import { runCli } from '../helpers/proxy-process.js';
import { eventually } from '../helpers/cluster.js';
import { curl } from '../helpers/curl.js';
import { socks5Connect } from '../helpers/socks-client.js';
import { statusItems } from '../helpers/status-json.js';
import { connectManaged } from '../helpers/managed-proxies.js';

let multi: MultiCluster;
let stateDir: string;
let id = '';
let socks = '';
let httpProxy = '';

const cli = (args: string[], timeoutMs = 60_000) => runCli(args, { env: { KUBECTL_PROXYOUT_STATE_DIR: stateDir }, timeoutMs });
type JsonRoute = { name: string; state: string; reason?: string; since?: string };
const routesNow = async (): Promise<JsonRoute[]> => statusItems<{ routes: JsonRoute[] }>((await cli(['status', '--json'])).stdout)[0]!.routes;

before(async () => {
  multi = await startClusters(['prod', 'staging']);
  await addWhich(multi.clusters[0]!);
  await addWhich(multi.clusters[1]!);
  stateDir = mkdtempSync(path.join(tmpdir(), 'proxyout-state-'));
  ({ id, socks, http: httpProxy } = await connectManaged(stateDir, multi.kubeconfig, ['prod', 'staging']));
});

after(async () => {
  await cli(['quit']);
  rmSync(stateDir, { recursive: true, force: true });
  await multi?.close();
});

test('an API server stopped after start: degraded within 5 s everywhere, failures name the route, one log line each way', async () => {
  const staging = multi.clusters[1]!;
  assert.deepEqual(
    (await routesNow()).map((r) => [r.name, r.state]),
    [
      ['prod', 'ready'],
      ['staging', 'ready'],
    ],
  );
  let bringUp!: () => void;
  const stoppedAt = Date.now();
  const down = staging.sim.restartApiServer(new Promise<void>((r) => (bringUp = r)));
  try {
    const routes = await eventually(
      async () => {
        const now = await routesNow();
        return now.find((r) => r.name === 'staging')?.state === 'degraded' && now;
      },
      8_000,
      200,
    );
    assert.ok(Date.now() - stoppedAt <= 5_000, `shown degraded ${Date.now() - stoppedAt} ms after the stop (target ≤ 5000)`);
    const st = routes.find((r) => r.name === 'staging')!;
    assert.match(st.reason ?? '', /^the API server https:\/\/127\.0\.0\.1:\d+ does not answer: .*ECONNREFUSED/);
    assert.ok(st.since && Math.abs(Date.parse(st.since) - stoppedAt) < 5_000, `since ${st.since}`);
    assert.equal(routes.find((r) => r.name === 'prod')?.state, 'ready', 'the other cluster is untouched');

    const table = await cli(['status']);
    assert.match(
      table.stdout,
      new RegExp(`${id}: route staging \\(cluster staging\\): [^\\n]*; degraded since \\d\\d:\\d\\d:\\d\\d: the API server \\S+ does not answer`),
    );
    const doctor = await cli(['doctor', '--kubeconfig', multi.kubeconfig, '--context', 'prod', '--json', '--listen-socks', '127.0.0.1:0']);
    const daemon = (JSON.parse(doctor.stdout) as { checks: Array<{ name: string; status: string; detail: string }> }).checks.find((c) => c.name === 'daemon');
    assert.equal(daemon?.status, 'warn', doctor.stdout);
    assert.match(daemon!.detail, /route staging degraded since \S+: the API server \S+ does not answer/);

    // Several requests, through both listeners: each fails at once, naming the route.
    for (let i = 0; i < 4; i++) {
      const started = Date.now();
      const viaHttp = await curl(['-sS', '-w', '\n%{http_code}', '-x', `http://${httpProxy}`, 'http://which.shop.staging/']);
      assert.match(viaHttp.stdout, /cluster route staging: the API server \S+ does not answer[^\n]*\n+502$/);
      assert.ok(Date.now() - started < 3_000, `answered in ${Date.now() - started} ms`);
      const { reply, socket } = await socks5Connect(socks, 'which.shop.staging', 80);
      socket.destroy();
      assert.equal(reply, 4, 'host unreachable');
    }
    assert.equal((await curl(['-sS', '-x', `socks5h://${socks}`, 'http://which.shop.prod/'])).stdout.includes('which-prod'), true);
  } finally {
    bringUp();
  }
  await down;
  const backAt = Date.now();
  const again = await eventually(
    async () => {
      const st = (await routesNow()).find((r) => r.name === 'staging');
      return st?.state === 'ready' && st;
    },
    8_000,
    200,
  );
  assert.ok(Date.now() - backAt <= 5_000, `ready again ${Date.now() - backAt} ms after the return`);
  // Ready since it served again, not since it first started: the outage is not hidden.
  assert.ok(again.since && Date.parse(again.since) >= backAt - 1_000, `ready since ${again.since}, back at ${new Date(backAt).toISOString()}`);
  const served = await eventually(
    async () => {
      const r = await curl(['-sS', '-x', `socks5h://${socks}`, 'http://which.shop.staging/']);
      return r.stdout.includes('which-staging') && r;
    },
    5_000,
    200,
  );
  assert.ok(served);
  const log = readFileSync(path.join(stateDir, 'logs', `${id}.log`), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  const changes = log.filter((l) => l.route === 'staging' && /route (degraded|serving again)/.test(String(l.msg))).map((l) => l.msg);
  assert.deepEqual(changes, ['cluster route degraded', 'cluster route serving again']);
});
