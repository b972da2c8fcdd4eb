// `kubectl proxyout doctor` against the simulated cluster: every check passes with a good
// kubeconfig; a bad token, an unreachable server, an RBAC-limited user, a missing or failing exec plugin, a
// taken port and a group-readable state directory each fail with a fix and exit 1. The RBAC
// answers are cross-checked with real `kubectl auth can-i` against the same simulator.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { chmod, mkdir, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { once } from 'node:events';
import path from 'node:path';
import yaml from 'js-yaml';
import { startTestCluster, unreachableKubeconfig, type TestCluster } from '../helpers/cluster.js';
import { binPath, startProxyProcess } from '../helpers/proxy-process.js';

interface Check {
  scope: string;
  name: string;
  status: 'ok' | 'warn' | 'fail' | 'skip';
  detail: string;
  fix?: string;
}

const hasKubectl = spawnSync('kubectl', ['version', '--client'], { stdio: 'ignore' }).status === 0;
let cluster: TestCluster;
let n = 0;

before(async () => {
  cluster = await startTestCluster();
});
after(async () => {
  await cluster?.close();
});

function run(file: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(file, args, { encoding: 'utf8', env: { ...process.env, ...env }, timeout: 60_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
    );
  });
}

async function doctor(kubeconfig: string, extra: string[] = [], stateDir = path.join(cluster.dir, `state-${++n}`)) {
  const r = await run(process.execPath, [binPath, 'doctor', '--kubeconfig', kubeconfig, '--listen-socks', '127.0.0.1:0', '--json', ...extra], {
    KUBECTL_PROXYOUT_STATE_DIR: stateDir,
  });
  let report: { apiVersion: string; kind: string; ok: boolean; checks: Check[] };
  try {
    report = JSON.parse(r.stdout) as typeof report;
  } catch {
    throw new Error(`doctor printed no JSON (exit ${r.code}): ${r.stdout}${r.stderr}`);
  }
  assert.deepEqual([report.apiVersion, report.kind], ['kubectl-proxyout/v1', 'DoctorReport']);
  const get = (name: string) => {
    const c = report.checks.find((x) => x.name === name);
    assert.ok(c, `no ${name} check in ${r.stdout}`);
    return c;
  };
  return { ...r, report, get };
}

async function kubeconfigWith(name: string, yaml: string): Promise<string> {
  const file = path.join(cluster.dir, name);
  await writeFile(file, yaml, { mode: 0o600 });
  return file;
}

test('a good kubeconfig: every check passes, exit 0, protocols and version reported', async () => {
  const r = await doctor(cluster.kubeconfig);
  assert.equal(r.code, 0, r.stdout);
  assert.equal(r.report.ok, true);
  for (const c of r.report.checks) assert.equal(c.status, 'ok', JSON.stringify(c));
  assert.match(r.get('kubeconfig').detail, /auth: bearer token/);
  assert.match(r.get('api-server').detail, /v1\.37\.2, \d+ ms round trip, no proxy/);
  assert.match(r.get('rbac').detail, /^cluster-wide: /);
  assert.match(r.get('port-forward').detail, /SPDY over WebSocket: yes; per-stream WebSocket v4: yes; legacy SPDY: yes/);
  // The human form says the same, one line per check.
  const text = await run(process.execPath, [binPath, 'doctor', '--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0'], {
    KUBECTL_PROXYOUT_STATE_DIR: path.join(cluster.dir, 'state-text'),
  });
  assert.equal(text.code, 0);
  assert.match(text.stdout, /^route sim:\n  ok   kubeconfig: /m);
  assert.match(text.stdout, /all checks passed/);
});

test('a namespace whose first 100 running pods are on the host network: a pod on the pod network is probed', async () => {
  // As kube-system on a cluster of 100 nodes (a CNI's and kube-proxy's DaemonSets): listed first.
  await cluster.sim.createNamespace('hostnet');
  for (let i = 0; i < 100; i++)
    await cluster.sim.createPod({ namespace: 'hostnet', name: `agent-${String(i).padStart(3, '0')}`, hostNetwork: true, ports: [] });
  await cluster.sim.createPod({ namespace: 'hostnet', name: 'web', ports: [{ containerPort: 8080 }] });
  const check = (await doctor(cluster.kubeconfig, ['-n', 'hostnet'])).get('port-forward');
  assert.equal(check.status, 'ok', check.detail);
  assert.match(check.detail, /^pod hostnet\/web: /);
});

test('a token the API server rejects: api-server fails with a credentials fix, exit 1', async () => {
  const r = await doctor(await kubeconfigWith('bad-token', cluster.sim.kubeconfigYaml({ token: 'not-a-valid-token' })));
  assert.equal(r.code, 1);
  assert.equal(r.report.ok, false);
  const api = r.get('api-server');
  assert.equal(api.status, 'fail');
  assert.match(api.detail, /Unauthorized/);
  assert.match(api.fix ?? '', /rejects these credentials/);
  assert.doesNotMatch(r.stdout, /not-a-valid-token/, 'the token is never printed');
  if (!hasKubectl) return;
  // The line to try, pasted as is into a shell with another kubeconfig: it asks what doctor asked.
  const line = /\(try `(kubectl [^`]+)`\)$/.exec(api.fix ?? '');
  assert.ok(line, api.fix);
  const [file, ...args] = line[1]!.split(' ');
  const tried = await run(file!, args, { KUBECONFIG: cluster.kubeconfig });
  assert.notEqual(tried.code, 0);
  assert.match(tried.stderr, /Unauthorized/);
});

test('an unreachable API server: api-server fails with a network fix, exit 1', async () => {
  const r = await doctor(await unreachableKubeconfig(cluster));
  assert.equal(r.code, 1);
  const api = r.get('api-server');
  assert.equal(api.status, 'fail');
  assert.match(api.detail, /ECONNREFUSED/);
  assert.match(api.fix ?? '', /cannot be reached/);
});

test('exactly the rights the README asks for (no watch on pods: pods are looked up) pass; without get on pods the check fails naming it; kubectl auth can-i agrees', async () => {
  const asDocumented = await kubeconfigWith('no-pod-watch', cluster.sim.kubeconfigYaml({ token: cluster.sim.issueToken({ denied: ['watch pods'] }) }));
  const ok = await doctor(asDocumented);
  assert.equal(ok.get('rbac').status, 'ok', ok.get('rbac').detail);
  assert.match(
    ok.get('rbac').detail,
    /^cluster-wide: list services, watch services, list endpointslices\.discovery\.k8s\.io, watch endpointslices\.discovery\.k8s\.io, list pods, get pods, get pods\/portforward, create pods\/portforward$/,
  );
  assert.equal(ok.code, 0, ok.stdout);

  const noGet = await kubeconfigWith('no-pod-get', cluster.sim.kubeconfigYaml({ token: cluster.sim.issueToken({ denied: ['get pods'] }) }));
  const bad = await doctor(noGet);
  assert.equal(bad.code, 1);
  const rbac = bad.get('rbac');
  assert.equal(rbac.status, 'fail');
  assert.match(rbac.detail, /nor cluster-wide: get pods$/);
  assert.match(rbac.fix ?? '', /list\/get on pods/);
  assert.match(rbac.fix ?? '', /check with: kubectl --kubeconfig \S+\/no-pod-get --context sim auth can-i get pods -n default$/);

  if (!hasKubectl) return;
  const canI = async (kc: string, ...args: string[]) => (await run('kubectl', ['--kubeconfig', kc, 'auth', 'can-i', ...args])).stdout.trim();
  assert.equal(await canI(asDocumented, 'watch', 'pods', '-A'), 'no');
  assert.equal(await canI(asDocumented, 'list', 'pods', '-A'), 'yes');
  assert.equal(await canI(noGet, 'get', 'pods', '-n', 'data'), 'no');
  assert.equal(await canI(noGet, 'list', 'pods', '-n', 'data'), 'yes');
});

test('an RBAC-limited user: allowed in its namespace passes; elsewhere fails naming what is missing; kubectl auth can-i agrees', async () => {
  const token = cluster.sim.issueToken({ namespaces: ['shop'] });
  const inShop = await kubeconfigWith('scoped-shop', cluster.sim.kubeconfigYaml({ token, namespace: 'shop' }));
  const ok = await doctor(inShop);
  assert.equal(ok.code, 0, ok.stdout);
  assert.match(ok.get('rbac').detail, /in namespace shop only \(not cluster-wide: list services, watch services, /);
  assert.match(ok.get('port-forward').detail, /pod shop\//);

  const inData = await kubeconfigWith('scoped-data', cluster.sim.kubeconfigYaml({ token, namespace: 'data' }));
  const bad = await doctor(inData);
  assert.equal(bad.code, 1);
  const rbac = bad.get('rbac');
  assert.equal(rbac.status, 'fail');
  assert.match(
    rbac.detail,
    /not allowed in namespace data nor cluster-wide: list services, watch services, list endpointslices\.discovery\.k8s\.io, watch endpointslices\.discovery\.k8s\.io, list pods, get pods, get pods\/portforward, create pods\/portforward/,
  );
  assert.match(rbac.fix ?? '', /check with: kubectl --kubeconfig \S+\/scoped-data --context sim auth can-i list services -n data$/);
  // -n, as the proxy would be started with it: the checks are made in that namespace.
  const withN = await doctor(inData, ['-n', 'shop']);
  assert.equal(withN.code, 0, withN.stdout);
  assert.match(withN.get('kubeconfig').detail, /\(namespace shop\)/);
  assert.match(withN.get('rbac').detail, /in namespace shop only/);

  if (!hasKubectl) return;
  const canI = async (kc: string, ...args: string[]) => (await run('kubectl', ['--kubeconfig', kc, 'auth', 'can-i', ...args])).stdout.trim();
  assert.equal(await canI(inShop, 'list', 'services', '-A'), 'no');
  assert.equal(await canI(inShop, 'watch', 'endpointslices.discovery.k8s.io', '-n', 'shop'), 'yes');
  assert.equal(await canI(inShop, 'create', 'pods', '--subresource=portforward', '-n', 'shop'), 'yes');
  assert.equal(await canI(inData, 'create', 'pods', '--subresource=portforward', '-n', 'data'), 'no');
  assert.equal(await canI(cluster.kubeconfig, 'list', 'pods', '-A'), 'yes');
});

test('an exec plugin that is not on PATH: kubeconfig fails naming it', async () => {
  const yaml = cluster.sim.kubeconfigYaml({ auth: 'exec' }).replace(/command: .*/, 'command: proxyout-no-such-credential-plugin');
  assert.match(yaml, /command: proxyout-no-such-credential-plugin/);
  const r = await doctor(await kubeconfigWith('missing-exec', yaml));
  assert.equal(r.code, 1);
  const kc = r.get('kubeconfig');
  assert.equal(kc.status, 'fail');
  assert.match(kc.detail, /exec plugin "proxyout-no-such-credential-plugin" not found/);
  assert.match(kc.fix ?? '', /put it on PATH/);
});

test('a kubeconfig that does not load: the kubeconfig check says why, not "no cluster to serve"', async () => {
  const r = await doctor(await kubeconfigWith('unparsable', 'clusters: [\n'));
  assert.equal(r.code, 1);
  const kc = r.get('kubeconfig');
  assert.equal(kc.status, 'fail');
  assert.match(kc.detail, /cannot load kubeconfig: error loading config file ".*unparsable.*": unexpected end of the stream/);
  assert.ok(!r.report.checks.some((c) => /no cluster to serve/.test(c.detail)), r.stdout);
});

test('a username/password user: the kubeconfig check warns that API servers ignore basic auth', async () => {
  const basic = cluster.sim.kubeconfigYaml().replace(/^(\s+)token: .*$/m, '$1username: admin\n$1password: secret');
  assert.match(basic, /username: admin/);
  const kc = (await doctor(await kubeconfigWith('basic-auth', basic))).get('kubeconfig');
  assert.equal(kc.status, 'warn');
  assert.match(kc.detail, /auth: basic \(username\/password\), which API servers ignore since v1\.19: requests go as system:anonymous$/);
  assert.match(kc.fix ?? '', /use a token, a client certificate or an exec plugin/);
});

test('a token beside an exec plugin that is not installed: the token is what is sent, so nothing fails (as kubectl)', async () => {
  const token = cluster.sim.issueToken();
  const yaml = cluster.sim
    .kubeconfigYaml({ auth: 'exec' })
    .replace(/( +)exec:/, `$1token: ${token}\n$1exec:`)
    .replace(/command: .*/, 'command: proxyout-no-such-credential-plugin');
  assert.match(yaml, /token: sim-/);
  const r = await doctor(await kubeconfigWith('token-and-exec', yaml));
  assert.equal(r.code, 0, r.stdout);
  assert.match(r.get('kubeconfig').detail, /auth: bearer token$/);
});

test('a token beside a client certificate: the certificate is who the API server sees, and doctor says so', async () => {
  const yaml = cluster.sim
    .kubeconfigYaml({ auth: 'cert' })
    .replace(/( +)client-certificate-data:/, `$1token: ${cluster.sim.issueToken()}\n$1client-certificate-data:`);
  assert.match(yaml, /token: sim-/);
  const r = await doctor(await kubeconfigWith('token-and-cert', yaml));
  assert.equal(r.code, 0, r.stdout);
  assert.match(r.get('kubeconfig').detail, /auth: client certificate \(the bearer token beside it counts only if the API server refuses the certificate\)$/);
});

test('an exec plugin that fails (an SSO session expired): api-server fails with its words and a log-in fix, not a network one', async () => {
  const plugin = path.join(cluster.dir, 'expired-sso.sh');
  await writeFile(plugin, '#!/bin/sh\necho "error: SSO session expired; run: aws sso login --profile dev" >&2\nexit 1\n', { mode: 0o755 });
  const yaml = cluster.sim.kubeconfigYaml({ auth: 'exec' }).replace(/command: .*/, `command: ${plugin}`);
  const r = await doctor(await kubeconfigWith('failing-exec', yaml));
  assert.equal(r.code, 1);
  assert.equal(r.get('kubeconfig').status, 'ok', 'the plugin is there');
  const api = r.get('api-server');
  assert.equal(api.status, 'fail');
  assert.match(api.detail, /could not be obtained: error: SSO session expired; run: aws sso login --profile dev$/);
  assert.match(
    api.fix ?? '',
    /^user \S+ has no credentials now, the network is not at fault: do what the message says .*, then check with `kubectl --kubeconfig \S+\/failing-exec --context sim get --raw \/version`$/,
  );
  assert.doesNotMatch(api.fix ?? '', /network\/VPN/);
});

test('locally: localhost:PORT is checked on ::1 too, where the proxy listens as well as on 127.0.0.1', async () => {
  const holder = net.createServer().listen(0, '::1');
  await once(holder, 'listening');
  const port = (holder.address() as net.AddressInfo).port;
  try {
    const r = await doctor(cluster.kubeconfig, ['--listen-http', `localhost:${port}`]);
    const listen = r.report.checks.find((c) => c.name === 'listen' && c.detail.includes('localhost'));
    assert.equal(listen?.status, 'fail', JSON.stringify(r.report.checks));
    assert.match(listen.detail, new RegExp(`^--listen-http localhost:${port}: \\[::1\\]: address in use by pid ${process.pid} `));
  } finally {
    holder.close();
  }
});

test('locally: a taken listen port fails; a state directory others may read warns, one they may write fails as every command refuses it', async () => {
  const holder = net.createServer().listen(0, '127.0.0.1');
  await once(holder, 'listening');
  const port = (holder.address() as net.AddressInfo).port;
  const state = path.join(cluster.dir, 'state-open');
  await mkdir(path.join(state, 'logs'), { recursive: true });
  await chmod(state, 0o755);
  try {
    const r = await doctor(cluster.kubeconfig, ['--listen-http', `127.0.0.1:${port}`], state);
    assert.equal(r.code, 1);
    const listen = r.report.checks.filter((c) => c.name === 'listen');
    assert.deepEqual(
      listen.map((c) => c.status),
      ['ok', 'fail'],
    );
    // What holds it is named: this test's own process, program and script only (never its arguments).
    assert.match(listen[1]!.detail, new RegExp(`--listen-http 127\\.0\\.0\\.1:${port}: address in use by pid ${process.pid} \\(node doctor\\.test\\.js\\)$`));
    // 0755: every command accepts it (only group/others-writable is refused), so a warning.
    const dir = r.get('state-dir');
    assert.equal(dir.status, 'warn');
    assert.match(dir.detail, /^accepted, but others may read what it holds: .*has mode 755/);
    assert.match(dir.fix ?? '', new RegExp(`chmod 700 ${state.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`));
    // 0775: refused by every command, and doctor fails it with the same words.
    await chmod(state, 0o775);
    const refused = await doctor(cluster.kubeconfig, [], state);
    assert.equal(refused.get('state-dir').status, 'fail');
    const status = await run(process.execPath, [binPath, 'status'], { KUBECTL_PROXYOUT_STATE_DIR: state });
    assert.equal(status.code, 1);
    const words = `refusing the state directory ${state}: it is writable by group or others (mode 775); run chmod 700 ${state}`;
    assert.ok(status.stderr.includes(words), status.stderr);
    assert.ok(refused.get('state-dir').detail.includes(words), refused.get('state-dir').detail);
    assert.equal(refused.code, 1);
  } finally {
    holder.close();
  }
});

test('a port your own foreground proxy holds is information, not a failure', async () => {
  const proxy = await startProxyProcess(['--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--listen-http', '127.0.0.1:0']);
  try {
    const r = await doctor(cluster.kubeconfig, ['--listen-http', proxy.http!]);
    const held = r.report.checks.find((c) => c.name === 'listen' && c.detail.includes(proxy.http!));
    assert.equal(held?.status, 'warn', JSON.stringify(held));
    assert.equal(held?.detail, `--listen-http ${proxy.http} is used by a kubectl-proxyout in the foreground (pid ${proxy.proc.pid})`);
    assert.equal(r.code, 0, r.stdout);
  } finally {
    assert.equal(await proxy.stop(), 0);
  }
});

test('old spellings still work, with a line naming the new one: --timeout is --request-timeout', async () => {
  const r = await run(process.execPath, [binPath, 'doctor', '--kubeconfig', cluster.kubeconfig, '--timeout', '5s', '--json'], {
    KUBECTL_PROXYOUT_STATE_DIR: path.join(cluster.dir, 'state-old-flag'),
  });
  assert.match(r.stderr.replace(/\s*›\s*/g, ' '), /The "--timeout" flag has been deprecated\. Use "--request-timeout" instead/);
  const report = JSON.parse(r.stdout) as { checks: Check[] };
  assert.ok(
    report.checks.some((c) => c.name === 'api-server' && c.status === 'ok'),
    r.stdout,
  );
});

test('the documented listen forms pass: ":PORT" (loopback) and "unix:" (a socket in the state directory)', async () => {
  for (const form of [':0', 'unix:']) {
    const r = await doctor(cluster.kubeconfig, ['--listen-http', form]);
    const listen = r.report.checks.filter((c) => c.name === 'listen');
    assert.deepEqual(
      listen.map((c) => c.status),
      ['ok', 'ok'],
      `${form}: ${JSON.stringify(listen)}`,
    );
  }
});

test('a running managed proxy: its health is reported (control socket answers, caches synced), its port a warning', async () => {
  const state = path.join(cluster.dir, 'state-daemon');
  const env = { KUBECTL_PROXYOUT_STATE_DIR: state };
  const c = await run(process.execPath, [binPath, 'connect', '--socks', '--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--json'], env);
  assert.equal(c.code, 0, c.stderr);
  const { id, socks } = JSON.parse(c.stdout) as { id: string; socks: string };
  try {
    const r = await doctor(cluster.kubeconfig, ['--listen-http', socks], state);
    const daemon = r.get('daemon');
    assert.equal(daemon.status, 'ok', JSON.stringify(daemon));
    assert.match(daemon.detail, new RegExp(`^${id} \\(context sim, pid \\d+\\) is running, caches synced`));
    const held = r.report.checks.find((x) => x.name === 'listen' && x.detail.includes(socks));
    assert.equal(held?.status, 'warn');
    assert.match(held?.detail ?? '', new RegExp(`used by managed proxy ${id}`));
    assert.equal(r.get('state-dir').status, 'ok');
    assert.equal(r.code, 0, r.stdout);
  } finally {
    await run(process.execPath, [binPath, 'disconnect', id], env);
  }
});

test('a managed proxy on [::1] is named whatever the spelling of its address: [0:0::1], [::]', async () => {
  const state = path.join(cluster.dir, 'state-daemon-v6');
  const env = { KUBECTL_PROXYOUT_STATE_DIR: state };
  const c = await run(process.execPath, [binPath, 'connect', '--socks', '--kubeconfig', cluster.kubeconfig, '--listen-socks', '[::1]:0', '--json'], env);
  assert.equal(c.code, 0, c.stderr);
  const { id, socks } = JSON.parse(c.stdout) as { id: string; socks: string };
  const port = socks.slice(socks.lastIndexOf(':') + 1);
  try {
    for (const asked of [`[0:0::1]:${port}`, `[::]:${port}`]) {
      const r = await doctor(cluster.kubeconfig, ['--listen-http', asked], state);
      const held = r.report.checks.find((x) => x.name === 'listen' && x.detail.includes(asked));
      assert.equal(held?.status, 'warn', JSON.stringify(held));
      // It said "a kubectl-proxyout in the foreground (pid N)" and "kill N".
      assert.equal(held?.detail, `--listen-http ${asked} is used by managed proxy ${id}`);
    }
  } finally {
    await run(process.execPath, [binPath, 'disconnect', id], env);
  }
});

test('--config: every cluster route of the file is checked under its own name; --context picks one', async () => {
  // One kubeconfig with two contexts: "prod" (cluster-wide) and "limited" (a token scoped to namespace data, context namespace shop).
  type Kc = {
    clusters: Array<{ name: string }>;
    users: Array<{ name: string }>;
    contexts: Array<{ name: string; context: { cluster: string; user: string; namespace?: string } }>;
  };
  const admin = yaml.load(cluster.sim.kubeconfigYaml({ context: 'prod', namespace: 'shop' })) as Kc;
  const scoped = yaml.load(
    cluster.sim.kubeconfigYaml({ context: 'limited', namespace: 'shop', token: cluster.sim.issueToken({ namespaces: ['data'] }) }),
  ) as Kc;
  scoped.clusters[0]!.name = 'limited-cluster';
  scoped.users[0]!.name = 'limited-user';
  scoped.contexts[0]!.context = { ...scoped.contexts[0]!.context, cluster: 'limited-cluster', user: 'limited-user' };
  const merged = {
    ...admin,
    clusters: [...admin.clusters, ...scoped.clusters],
    users: [...admin.users, ...scoped.users],
    contexts: [...admin.contexts, ...scoped.contexts],
  };
  const kubeconfig = await kubeconfigWith('two-contexts', yaml.dump(merged));
  const config = path.join(cluster.dir, 'routes.yaml');
  await writeFile(
    config,
    [
      'routes:',
      '  - { name: prod, kind: cluster, context: prod }',
      '  - { name: lim, kind: cluster, context: limited }',
      '  - { name: blocked, kind: reject, include: [ads.example.com] }',
      '',
    ].join('\n'),
  );

  const both = await doctor(kubeconfig, ['--config', config]);
  assert.equal(both.code, 1, both.stdout);
  const scopes = [...new Set(both.report.checks.map((c) => c.scope))];
  assert.deepEqual(scopes, ['prod', 'lim', 'local']);
  const rbac = (scope: string) => both.report.checks.find((c) => c.scope === scope && c.name === 'rbac')!;
  assert.equal(rbac('prod').status, 'ok');
  assert.equal(rbac('lim').status, 'fail');
  assert.match(rbac('lim').detail, /not allowed in namespace shop nor cluster-wide/);

  const one = await doctor(kubeconfig, ['--context', 'prod']);
  assert.equal(one.code, 0, one.stdout);
  assert.deepEqual([...new Set(one.report.checks.map((c) => c.scope))], ['prod', 'local']);

  const missing = await doctor(kubeconfig, ['--config', path.join(cluster.dir, 'no-such.yaml')]);
  assert.equal(missing.code, 1);
  assert.match(missing.get('routes').detail, /cannot read the config file .*no such file/);
});
