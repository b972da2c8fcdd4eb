// Control characters a client sends (here in a Host header and a CONNECT target, as raw bytes)
// reach neither the proxy's error bodies nor its log on the terminal (stderr) unescaped, and our
// own error responses are marked `X-Content-Type-Options: nosniff`.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import net, { type AddressInfo } from 'node:net';
import http from 'node:http';
import path from 'node:path';
import { existsSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { runCli, startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { scratchDir } from '../helpers/scratch-dir.js';
import { splitHostPort } from '../helpers/socks-client.js';

/** Any C0 control but the line end, DEL, or C1 (U+009B is the 8-bit CSI). */
const RAW_CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/;
let cluster: TestCluster;
let proxy: ProxyProcess;

before(async () => {
  cluster = await startTestCluster();
  proxy = await startProxyProcess(['--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--listen-http', '127.0.0.1:0']);
});

after(async () => {
  // The runtime keeps a stream ~1 s after a FIN (closeGraceMs): the last tests' streams end now, so
  // the stop below has none to drain (teardown, not a test of the drain).
  cluster?.sim.endLingeringStreams();
  await proxy?.stop();
  await cluster?.close();
});

/** Sends raw bytes, returns the whole answer (the proxy closes after its error or we time out). */
async function exchange(bytes: Buffer): Promise<Buffer> {
  const [host, port] = splitHostPort(proxy.http!);
  const s = net.connect({ host, port });
  s.on('error', () => undefined);
  await once(s, 'connect');
  s.write(bytes);
  const chunks: Buffer[] = [];
  s.on('data', (c: Buffer) => chunks.push(c));
  await new Promise<void>((resolve) => {
    s.on('data', () => {
      const text = Buffer.concat(chunks).toString('latin1');
      const length = /content-length: (\d+)/i.exec(text)?.[1];
      const bodyAt = text.indexOf('\r\n\r\n');
      if (length !== undefined && bodyAt >= 0 && text.length >= bodyAt + 4 + Number(length)) resolve();
    });
    s.once('close', () => resolve());
  });
  s.destroy();
  return Buffer.concat(chunks);
}

// 0x9b alone and as UTF-8 (c2 9b): the 8-bit CSI either way, once Node decodes the head as
// Latin-1; 0x85 is NEL. (Node's parser refuses C0 controls and DEL in a head, and any of these in
// a URL, with a plain 400; header values are where such bytes get through.)
const csi = Buffer.from([0x9b, 0x32, 0x4a, 0xc2, 0x9b, 0x33, 0x31, 0x6d, 0x85]);

test('a Host header with C1 bytes: the 400 body escapes them, says nosniff, and stderr stays clean', async () => {
  const request = Buffer.concat([Buffer.from('GET / HTTP/1.1\r\nHost: evil'), csi, Buffer.from('.example\r\n\r\n')]);
  const answer = await exchange(request);
  const [head, body] = answer.toString('utf8').split('\r\n\r\n') as [string, string];
  assert.match(head, /^HTTP\/1\.1 400 /);
  assert.match(head, /\r\nX-Content-Type-Options: nosniff\r\n/i);
  assert.match(body, /evil\\x9b2J/, 'the host is quoted, escaped');
  assert.doesNotMatch(body.replace(/\n$/, ''), RAW_CONTROL);

  const logged = () => proxy.logs.some((l) => String(l.msg ?? '').includes('evil'));
  for (let i = 0; i < 50 && !logged(); i++) await new Promise((r) => setTimeout(r, 100));
  assert.ok(logged(), 'the failure was logged with the Host text');
  for (const line of proxy.stderr().split('\n')) assert.doesNotMatch(line, RAW_CONTROL, `raw control in: ${JSON.stringify(line)}`);
});

test('CONNECT: the 400 for a malformed target says nosniff too', async () => {
  const answer = (await exchange(Buffer.from('CONNECT nonsense HTTP/1.1\r\nHost: x\r\n\r\n'))).toString('utf8');
  assert.match(answer, /^HTTP\/1\.1 400 /);
  assert.match(answer, /\r\nX-Content-Type-Options: nosniff\r\n/i);
});

/** A kubeconfig whose one context (named `context`) reaches the plain-HTTP server at `server`. */
function writeKubeconfig(file: string, server: string, context: string): void {
  writeFileSync(
    file,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      'current-context': context,
      contexts: [{ name: context, context: { cluster: 'c', user: 'u', namespace: 'default' } }],
      clusters: [{ name: 'c', cluster: { server, 'insecure-skip-tls-verify': true } }],
      users: [{ name: 'u', user: { token: 'x' } }],
    }),
  );
}

// A hostile (or compromised) API server chooses its Status messages, and a kubeconfig someone
// handed you its context names: the CLI's one-line `Error:` quotes both.
test('the Error line escapes a Status message and a context name; so does connect', async () => {
  const controls = '\x1b]0;PWNED\x07\x1b[31mRED\x1b[0m\x9b2J\rFORGED';
  const api = http.createServer((_req, res) => {
    res.writeHead(403, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'Forbidden', code: 403, message: `forbidden: ${controls}` }));
  });
  api.listen(0, '127.0.0.1');
  await once(api, 'listening');
  const dir = scratchDir('proxyout-escapes-');
  const kubeconfig = path.join(dir, 'kubeconfig');
  const context = `ctx${controls}`;
  const server = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;
  writeKubeconfig(kubeconfig, server, context);
  try {
    const env = { XDG_STATE_HOME: path.join(dir, 'state'), XDG_CONFIG_HOME: path.join(dir, 'config') };
    const listen = ['--listen-socks', '127.0.0.1:0', '--listen-http', '127.0.0.1:0'];
    for (const args of [
      ['--kubeconfig', kubeconfig, ...listen],
      ['connect', '--kubeconfig', kubeconfig, ...listen],
    ]) {
      const run = await runCli(args, { env });
      assert.equal(run.code, 1, run.stderr);
      const error = run.stderr.split('\n').find((l) => l.startsWith('Error: '));
      assert.ok(error, run.stderr);
      assert.match(error, /forbidden: \\x1b\]0;PWNED\\x07\\x1b\[31mRED\\x1b\[0m\\x9b2J\\x0dFORGED/, error);
      for (const line of run.stderr.split('\n')) assert.doesNotMatch(line, RAW_CONTROL, `raw control in: ${JSON.stringify(line)}`);
    }
  } finally {
    api.close();
  }
});

test('exec: the line about its temporary proxy escapes a hostile context name', async () => {
  const dir = scratchDir('proxyout-escapes-exec-');
  const kubeconfig = path.join(dir, 'kubeconfig');
  await cluster.sim.writeKubeconfig(kubeconfig, { context: 'ctx\x1b]0;PWNED\x07\x9b2J\rFORGED' });
  const env = { XDG_STATE_HOME: path.join(dir, 'state'), XDG_CONFIG_HOME: path.join(dir, 'config'), KUBECONFIG: kubeconfig };
  const run = await runCli(['exec', '--', 'true'], { env });
  assert.equal(run.code, 0, run.stderr);
  assert.match(run.stderr, /no managed proxy for context ctx\\x1b\]0;PWNED\\x07\\x9b2J\\x0dFORGED; started a temporary one/);
  for (const line of run.stderr.split('\n')) assert.doesNotMatch(line, RAW_CONTROL, `raw control in: ${JSON.stringify(line)}`);
});

test('doctor: a Status message of a megabyte is cut, not printed whole', async () => {
  const message = `forbidden: ${'A'.repeat(1 << 20)}`;
  const api = http.createServer((_req, res) => {
    res.writeHead(403, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'Forbidden', code: 403, message }));
  });
  api.listen(0, '127.0.0.1');
  await once(api, 'listening');
  const dir = scratchDir('proxyout-flood-');
  const kubeconfig = path.join(dir, 'kubeconfig');
  const server = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;
  writeKubeconfig(kubeconfig, server, 'c');
  try {
    const env = { XDG_STATE_HOME: path.join(dir, 'state'), XDG_CONFIG_HOME: path.join(dir, 'config') };
    const run = await runCli(['doctor', '--kubeconfig', kubeconfig], { env });
    assert.equal(run.code, 1, run.stderr);
    assert.match(run.stdout, /FAIL api-server: .*forbidden: AAAA+…/);
    assert.ok(run.stdout.length + run.stderr.length < 16 * 1024, `${run.stdout.length} characters`);
  } finally {
    api.close();
  }
});

test('a command suggested for pasting quotes a context name that holds $(…)', async () => {
  const api = http.createServer((_req, res) => {
    res.writeHead(403, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'Forbidden', code: 403, message: 'forbidden' }));
  });
  api.listen(0, '127.0.0.1');
  await once(api, 'listening');
  const dir = scratchDir('proxyout-paste-');
  const planted = path.join(dir, 'planted');
  const kubeconfig = path.join(dir, 'kubeconfig');
  writeKubeconfig(kubeconfig, `http://127.0.0.1:${(api.address() as AddressInfo).port}`, `x$(touch ${planted})`);
  try {
    const env = { XDG_STATE_HOME: path.join(dir, 'state'), XDG_CONFIG_HOME: path.join(dir, 'config') };
    const run = await runCli(['--kubeconfig', kubeconfig, '--listen-socks', '127.0.0.1:0', '--listen-http', 'off'], { env });
    const suggested = /\(`(kubectl proxyout doctor .+)` lists what is missing\)/.exec(run.stderr)?.[1];
    assert.ok(suggested, run.stderr);
    // Pasted into a shell (kubectl itself stubbed): the name stays text.
    const echoed = execFileSync('sh', ['-c', `kubectl() { printf '%s\\n' "$@"; }; ${suggested}`], { encoding: 'utf8' });
    assert.ok(!existsSync(planted), `pasting ran the name: ${suggested}`);
    assert.equal(echoed.split('\n')[3], `x$(touch ${planted})`);
  } finally {
    api.close();
  }
});

test("doctor's `auth can-i … -n NS` quotes a kubeconfig namespace that holds $(…)", async () => {
  const dir = scratchDir('proxyout-paste-ns-');
  const planted = path.join(dir, 'planted');
  const kubeconfig = path.join(dir, 'kubeconfig');
  await cluster.sim.writeKubeconfig(kubeconfig, { token: cluster.sim.issueToken({ namespaces: ['shop'] }), namespace: `x$(touch ${planted})` });
  const env = { XDG_STATE_HOME: path.join(dir, 'state'), XDG_CONFIG_HOME: path.join(dir, 'config') };
  const run = await runCli(['doctor', '--kubeconfig', kubeconfig], { env });
  const suggested = /check with: (kubectl .+ auth can-i .+)$/m.exec(run.stdout)?.[1];
  assert.ok(suggested, run.stdout);
  const echoed = execFileSync('sh', ['-c', `kubectl() { printf '%s\\n' "$@"; }; ${suggested}`], { encoding: 'utf8' });
  assert.ok(!existsSync(planted), `pasting ran the name: ${suggested}`);
  assert.equal(echoed.trimEnd().split('\n').at(-1), `x$(touch ${planted})`);
});
