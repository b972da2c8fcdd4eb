// Logs never contain secrets. A foreground session (token kubeconfig) and a managed
// connect…disconnect (client-certificate kubeconfig), both with proxy authentication on and at
// log level trace, drive traffic including failures (wrong credentials, RBAC, unknown targets,
// refused ports, a failed connect); then every log, stdout and stderr is searched for the
// tokens, the client key and certificate (base64 and PEM lines), the proxy passwords and
// "Authorization".
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { apiGet, eventually, startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { runCli, startProxyProcess } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';
import { isAlive } from '../../src/state/process.js';

const hex = () => randomBytes(12).toString('hex');
let cluster: TestCluster;
let stateDir: string;
const outputs: Array<{ where: string; text: string }> = [];
const secrets: Array<{ what: string; value: string }> = [];
const keep = (where: string, text: string) => outputs.push({ where, text });

before(async () => {
  cluster = await startTestCluster();
  stateDir = mkdtempSync(path.join(tmpdir(), 'proxyout-secrets-'));
});

after(async () => {
  await runCli(['quit'], { env: { KUBECTL_PROXYOUT_STATE_DIR: stateDir } }).catch(() => undefined);
  rmSync(stateDir, { recursive: true, force: true });
  await cluster?.close();
});

/** Base64 of a PEM block's content and each of its 64-character body lines. */
function pemSecrets(what: string, base64Pem: string): Array<{ what: string; value: string }> {
  const pem = Buffer.from(base64Pem, 'base64').toString('utf8');
  const body = pem.split('\n').filter((l) => l.length >= 40 && !l.startsWith('-----'));
  assert.ok(body.length > 0, `${what} has PEM body lines`);
  return [
    { what: `${what} (base64)`, value: base64Pem },
    { what: `${what} (base64 prefix)`, value: base64Pem.slice(0, 40) },
    ...body.map((value, i) => ({ what: `${what} PEM line ${i}`, value })),
  ];
}

/** The requests every session gets: successes and every kind of failure, all with secrets in play. */
async function drive(socks: string, http: string, user: string, password: string, upstreamSecret: string): Promise<void> {
  const url = 'http://web.shop:8080/';
  const ok = async (args: string[]) => {
    const r = await curl(args);
    assert.equal(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
  };
  await ok(['--proxy', `socks5h://${user}:${password}@${socks}`, url]);
  await ok(['-x', `http://${http}`, '--proxy-user', `${user}:${password}`, '-H', `Authorization: Bearer ${upstreamSecret}`, `${url}whoami`]);
  await ok(['-p', '-x', `http://${http}`, '--proxy-user', `${user}:${password}`, '-H', `Authorization: Bearer ${upstreamSecret}`, url]);
  const pods = await apiGet(cluster.sim, '/api/v1/namespaces/shop/pods');
  const podIp = pods.items.find((p: any) => p.metadata.name.startsWith('web-')).status.podIP;
  const failing: string[][] = [
    ['--proxy', `socks5h://${socks}`, url],
    ['--proxy', `socks5h://${user}:${password}x@${socks}`, url],
    ['--proxy', `socks5h://${password}:${password}@${socks}`, url],
    ['--proxy', `socks4a://${user}@${socks}`, url],
    ['-x', `http://${http}`, '--proxy-user', `${user}:wrong-${password}`, url],
    ['-p', '-x', `http://${http}`, '--proxy-user', `${user}:wrong-${password}`, url],
    ['-x', `http://${http}`, url],
    ['--proxy', `socks5h://${user}:${password}@${socks}`, 'http://nope.shop:80/'],
    ['--proxy', `socks5h://${user}:${password}@${socks}`, 'http://example.com/'],
    ['--proxy', `socks5h://${user}:${password}@${socks}`, 'http://echo.data:7000/'],
    ['--proxy', `socks5h://${user}:${password}@${socks}`, `http://${podIp}:9/`],
    ['-x', `http://${http}`, '--proxy-user', `${user}:${password}`, '-H', `Authorization: Bearer ${upstreamSecret}`, 'http://nope.shop:80/'],
  ];
  // At once: each wrong password is answered ~1 s late (auth/throttle.ts, four at a time per
  // source), which one after another added up to seconds per session.
  const codes = await Promise.all(failing.map(async (args) => (await curl(['--fail', ...args])).code));
  failing.forEach((args, i) => assert.notEqual(codes[i], 0, args.join(' ')));
}

test('a foreground session: token kubeconfig, proxy auth from a file, trace logging', async () => {
  const token = cluster.sim.issueToken({ namespaces: ['shop'] });
  const password = `fg-pass-${hex()}`;
  const upstream = `upstream-${hex()}`;
  secrets.push(
    { what: 'namespace token', value: token },
    { what: 'admin token', value: cluster.sim.adminToken },
    { what: 'foreground proxy password', value: password },
    { what: 'upstream Authorization', value: upstream },
  );
  const kubeconfig = path.join(cluster.dir, 'token-kubeconfig');
  await cluster.sim.writeKubeconfig(kubeconfig, { token, namespace: 'shop' });
  const authFile = path.join(cluster.dir, 'fg-auth');
  writeFileSync(authFile, `tester:${password}\n`, { mode: 0o600 });
  const proxy = await startProxyProcess([
    '--kubeconfig',
    kubeconfig,
    '--listen-socks',
    '127.0.0.1:0',
    '--listen-http',
    '127.0.0.1:0',
    '--log-level',
    'trace',
    '--proxy-auth-file',
    authFile,
  ]);
  try {
    await drive(proxy.socks!, proxy.http!, 'tester', password, upstream);
    await eventually(async () => proxy.logs.some((l) => l.reason === 'auth-failed'));
  } finally {
    await proxy.stop();
  }
  keep('foreground stdout', proxy.stdout.join('\n'));
  keep('foreground stderr', proxy.stderr());
  assert.ok(proxy.logs.length > 20, 'trace logging produced lines to search');
});

test('a managed session: client-certificate kubeconfig, proxy auth from the environment', async () => {
  const env = { KUBECTL_PROXYOUT_STATE_DIR: stateDir };
  const cli = async (args: string[], extraEnv: NodeJS.ProcessEnv = {}) => {
    const r = await runCli(args, { env: { ...env, ...extraEnv } });
    keep(`${args.join(' ')} stdout`, r.stdout);
    keep(`${args.join(' ')} stderr`, r.stderr);
    return r;
  };
  const kubeconfig = path.join(cluster.dir, 'cert-kubeconfig');
  await cluster.sim.writeKubeconfig(kubeconfig, { auth: 'cert', namespace: 'shop' });
  const yaml = readFileSync(kubeconfig, 'utf8');
  const field = (name: string) => JSON.parse(new RegExp(`${name}: (".*")`).exec(yaml)![1]!) as string;
  secrets.push(...pemSecrets('client certificate', field('client-certificate-data')), ...pemSecrets('client key', field('client-key-data')));
  const password = `mg-pass-${hex()}`;
  const upstream = `upstream-${hex()}`;
  secrets.push({ what: 'managed proxy password', value: password }, { what: 'managed upstream Authorization', value: upstream });

  const c = await cli(
    ['connect', '--kubeconfig', kubeconfig, '--listen-socks', '127.0.0.1:0', '--listen-http', '127.0.0.1:0', '--log-level', 'trace', '--json'],
    { KUBECTL_PROXYOUT_PROXY_AUTH: `tester:${password}` },
  );
  assert.equal(c.code, 0, c.stderr);
  const info = JSON.parse(c.stdout) as { id: string; pid: number; socks: string; http: string; logFile: string };
  try {
    const dir = path.join(stateDir, 'proxies', info.id);
    assert.ok(!existsSync(path.join(dir, 'proxy-auth')), 'the daemon deleted its credentials file after reading it');
    for (const f of readdirSync(dir).filter((f) => statSync(path.join(dir, f)).isFile() && f !== 'kubeconfig'))
      keep(`state file ${f}`, readFileSync(path.join(dir, f), 'utf8'));
    if (process.platform === 'linux') {
      keep('daemon argv', readFileSync(`/proc/${info.pid}/cmdline`, 'utf8'));
      keep('daemon environment', readFileSync(`/proc/${info.pid}/environ`, 'utf8'));
    }
    await drive(info.socks, info.http, 'tester', password, upstream);
    await cli(['status', '--json']);
    await cli(['logs', info.id]);
  } finally {
    const d = await cli(['disconnect', info.id]);
    assert.equal(d.code, 0, d.stderr);
  }
  assert.ok(!isAlive(info.pid) || !existsSync(path.join(stateDir, 'proxies', info.id)));
  const log = readFileSync(info.logFile, 'utf8');
  assert.match(log, /"reason":"auth-failed"/);
  for (const f of readdirSync(path.join(stateDir, 'logs'))) keep(`log file ${f}`, readFileSync(path.join(stateDir, 'logs', f), 'utf8'));

  // A connect the API server refuses: its error line must not quote the credentials either.
  const wrongToken = `sim-wrong-${hex()}`;
  secrets.push({ what: 'rejected token', value: wrongToken });
  const bad = path.join(cluster.dir, 'bad-kubeconfig');
  await cluster.sim.writeKubeconfig(bad, { token: wrongToken, namespace: 'shop' });
  const refused = await cli(['connect', '--kubeconfig', bad, '--listen-socks', '127.0.0.1:0', '--proxy-auth', `tester:${password}`]);
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /rejected the credentials/);
  assert.match(refused.stderr, /Warning: --proxy-auth puts the password on the command line/);
});

// A password in the server URL (`https://admin:PASSWORD@host`) is sent as Basic credentials:
// kubectl writes it `***` in its messages, and so must every line, file and table of ours.
test('a password in the kubeconfig server URL: connect, status, logs, doctor, an Error line', async () => {
  const env = { KUBECTL_PROXYOUT_STATE_DIR: stateDir };
  const cli = async (args: string[]) => {
    const r = await runCli(args, { env });
    keep(`${args.join(' ')} stdout`, r.stdout);
    keep(`${args.join(' ')} stderr`, r.stderr);
    return r;
  };
  const password = `url-pass-${hex()}`;
  secrets.push({ what: 'server URL password', value: password });
  const kubeconfig = path.join(cluster.dir, 'userinfo-kubeconfig');
  await cluster.sim.writeKubeconfig(kubeconfig, { namespace: 'shop' });
  writeFileSync(kubeconfig, readFileSync(kubeconfig, 'utf8').replace('https://', `https://admin:${password}@`));
  const c = await cli(['connect', '--kubeconfig', kubeconfig, '--listen-socks', '127.0.0.1:0', '--no-proxy-auth', '--log-level', 'trace', '--json']);
  assert.equal(c.code, 0, c.stderr);
  const info = JSON.parse(c.stdout) as { id: string; socks: string; logFile: string; server: string };
  try {
    assert.match(info.server, /^https:\/\/admin:\*\*\*@127\.0\.0\.1:/);
    const r = await curl(['--proxy', `socks5h://${info.socks}`, 'http://web.shop:8080/']);
    assert.equal(r.code, 0, r.stderr);
    const dir = path.join(stateDir, 'proxies', info.id);
    for (const f of readdirSync(dir).filter((f) => statSync(path.join(dir, f)).isFile() && f !== 'kubeconfig'))
      keep(`state file ${f} (userinfo)`, readFileSync(path.join(dir, f), 'utf8'));
    await cli(['status']);
    await cli(['status', '--json']);
    await cli(['doctor', '--kubeconfig', kubeconfig]);
  } finally {
    assert.equal((await cli(['disconnect', info.id])).code, 0);
  }
  keep('log file (userinfo)', readFileSync(info.logFile, 'utf8'));
  const unreachable = path.join(cluster.dir, 'userinfo-unreachable');
  writeFileSync(unreachable, readFileSync(kubeconfig, 'utf8').replace(/@127\.0\.0\.1:\d+/, '@127.0.0.1:1'));
  const refused = await cli(['--kubeconfig', unreachable, '--listen-socks', '127.0.0.1:0', '--listen-http', 'off']);
  assert.match(refused.stderr, /Error: cannot reach the API server https:\/\/admin:\*\*\*@127\.0\.0\.1:1 /);
});

test('no secret, and no "Authorization", in anything that was logged or printed', () => {
  assert.ok(outputs.length >= 10 && secrets.length >= 10);
  const leaks: string[] = [];
  for (const { where, text } of outputs) {
    for (const { what, value } of secrets) if (text.includes(value)) leaks.push(`${what} in ${where}`);
    const m = /authorization/i.exec(text);
    if (m) leaks.push(`"${text.slice(Math.max(0, m.index - 60), m.index + 60)}" in ${where}`);
  }
  assert.deepEqual(leaks, []);
});
