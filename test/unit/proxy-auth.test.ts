// Proxy credentials: parsing, sources, file modes, the constant-time check, the loopback rule,
// the RFC 1929 parser steps, Basic header parsing, and both listeners in-process.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import http from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { ProxyAuth, parseCredentials, readCredentialsFile, requireCredentialsOffLoopback, resolveCredentials } from '../../src/auth/credentials.js';
import { SocksHandshakeParser, SocksMethod, encodeAuthStatus, parseUserPassAuth, userPassPolicy } from '../../src/listeners/socks-protocol.js';
import { parseBasicCredentials } from '../../src/listeners/http-auth.js';
import { startSocksListener } from '../../src/listeners/socks-server.js';
import { startHttpListener } from '../../src/listeners/http-server.js';
import { ensureStateDir, layout } from '../../src/state/paths.js';
import { proxyAuthFrom } from '../../src/cli/flags.js';
import { removeTransient } from '../../src/managed/store.js';
import { takeProxyAuthFile, writeProxyAuthFile } from '../../src/state/proxy-auth.js';
import { FakeOpener, LOOPBACK, Reader, connectClient, quietContext, startEcho, tcpStream, uploadThenRead } from './socks-fixtures.test.js';

function tempDir(t: { after(fn: () => void): void }): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'proxyout-auth-unit-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const b = (...bytes: number[]): Buffer => Buffer.from(bytes);
const rfc1929 = (user: string, pass: string) =>
  Buffer.concat([b(1, Buffer.byteLength(user)), Buffer.from(user), b(Buffer.byteLength(pass)), Buffer.from(pass)]);

test('user:password splits at the first colon; empty, oversized and control characters refused', () => {
  assert.deepEqual(parseCredentials('u:p:q', 'x', 'env'), { username: 'u', password: 'p:q', source: 'env' });
  assert.throws(() => parseCredentials('nocolon', 'x', 'env'), /expected user:password/);
  assert.throws(() => parseCredentials(':p', 'x', 'env'), /user name is empty/);
  assert.throws(() => parseCredentials('u:', 'x', 'env'), /password is empty/);
  assert.throws(() => parseCredentials(`u:${'p'.repeat(256)}`, 'x', 'env'), /longer than 255 bytes/);
  assert.throws(() => parseCredentials('u:p\u0000', 'x', 'env'), /control characters/);
  assert.doesNotThrow(() => parseCredentials(`u:${'é'.repeat(127)}`, 'x', 'env'));
});

test('sources: file, then argv, then the environment; both flags at once is an error', (t) => {
  const dir = tempDir(t);
  const file = path.join(dir, 'auth');
  writeFileSync(file, 'file-user:file-pass\r\nsecond line\n', { mode: 0o600 });
  const env = { KUBECTL_PROXYOUT_PROXY_AUTH: 'env-user:env-pass' };
  assert.equal(resolveCredentials({ file }, env)?.username, 'file-user');
  assert.equal(resolveCredentials({ file }, env)?.password, 'file-pass');
  assert.equal(resolveCredentials({ inline: 'a:b' }, env)?.source, 'argv');
  assert.equal(resolveCredentials({}, env)?.source, 'env');
  assert.equal(resolveCredentials({}, { KUBECTL_PROXYOUT_PROXY_AUTH: '' }), undefined);
  assert.equal(resolveCredentials({}, {}), undefined);
  assert.throws(() => resolveCredentials({ file, inline: 'a:b' }, {}), /not both/);
  // What the CLI turns these into: one line, exit 1.
  assert.throws(
    () => proxyAuthFrom({ 'proxy-auth': 'no-colon' }, {}),
    (err: Error & { oclif?: { exit?: number } }) => err.message === '--proxy-auth: expected user:password' && err.oclif?.exit === 1,
  );
  assert.throws(() => proxyAuthFrom({}, { KUBECTL_PROXYOUT_PROXY_AUTH: 'x:' }), /KUBECTL_PROXYOUT_PROXY_AUTH: the password is empty/);
});

test('a credentials file group or others can access is refused, whatever the bits', (t) => {
  const dir = tempDir(t);
  const file = path.join(dir, 'auth');
  writeFileSync(file, 'u:p\n');
  for (const m of [0o640, 0o604, 0o620, 0o602, 0o660]) {
    chmodSync(file, m);
    assert.throws(() => readCredentialsFile(file), new RegExp(`mode ${m.toString(8)}.*chmod 600`));
  }
  chmodSync(file, 0o400);
  assert.equal(readCredentialsFile(file).username, 'u');
  assert.throws(() => readCredentialsFile(path.join(dir, 'missing')), /ENOENT/);
  assert.throws(() => readCredentialsFile(dir), /not a regular file/);
});

test('a credentials file another user owns is refused: its owner could set the password', { skip: process.getuid?.() !== 0 && 'needs root to chown' }, (t) => {
  const dir = tempDir(t);
  const file = path.join(dir, 'auth');
  writeFileSync(file, 'u:p\n', { mode: 0o600 });
  chownSync(file, 65534, 65534);
  assert.throws(() => readCredentialsFile(file), /refusing a file owned by another user \(uid 65534, not 0\)/);
  chownSync(file, 0, 0);
  assert.equal(readCredentialsFile(file).username, 'u');
});

test('verify: only the exact pair passes (in UTF-8 or ISO-8859-1); strings and raw bytes alike', () => {
  const auth = new ProxyAuth({ username: 'alice', password: 'sécret' });
  assert.ok(auth.verify('alice', 'sécret'));
  assert.ok(auth.verify(Buffer.from('alice'), Buffer.from('sécret', 'utf8')));
  for (const [u, p] of [
    ['alice', 'sécre'],
    ['alice', 'sécret '],
    ['Alice', 'sécret'],
    ['', ''],
    ['alice', Buffer.from('sécrét', 'latin1')],
  ] as const) {
    assert.equal(auth.verify(u, p), false, `${u}:${String(p)}`);
  }
});

test('verify: a password in ISO-8859-1, as Python requests and Java send it, passes too', () => {
  const auth = new ProxyAuth({ username: 'bob', password: 'pässwörd' });
  assert.ok(auth.verify(Buffer.from('bob'), Buffer.from('pässwörd', 'latin1')));
  assert.ok(new ProxyAuth({ username: 'jürgen', password: 'x' }).verify(Buffer.from('jürgen', 'latin1'), Buffer.from('x')));
  assert.equal(auth.verify(Buffer.from('bob'), Buffer.from('passwörd', 'latin1')), false);
  // Letters ISO-8859-1 has no byte for have one form only.
  const snowman = new ProxyAuth({ username: 'u', password: 'p☃' });
  assert.ok(snowman.verify('u', 'p☃'));
  assert.equal(snowman.verify(Buffer.from('u'), Buffer.from('p☃', 'latin1')), false);
});

test('loopback listeners need no credentials; anything else does', () => {
  for (const host of ['127.0.0.1', '127.1.2.3', '::1', 'localhost', '::ffff:127.0.0.1']) {
    assert.doesNotThrow(() => requireCredentialsOffLoopback([{ flag: '--listen-socks', host, port: 1080 }], false), host);
  }
  for (const host of ['0.0.0.0', '::', '192.168.1.10', 'fe80::1', 'my-laptop']) {
    assert.throws(
      () => requireCredentialsOffLoopback([{ flag: '--listen-http', host, port: 3128 }], false),
      /is not a loopback address.*--proxy-auth-file/,
      host,
    );
    assert.doesNotThrow(() => requireCredentialsOffLoopback([{ flag: '--listen-http', host, port: 3128 }], true), host);
  }
});

test('RFC 1929: parsed byte by byte; wrong version closes; the parser waits for the verdict', () => {
  const input = rfc1929('alice', 'pw');
  for (let i = 0; i < input.length; i++) assert.equal(parseUserPassAuth(input.subarray(0, i)).step.type, 'more', `prefix ${i}`);
  const done = parseUserPassAuth(Buffer.concat([input, b(5)]));
  assert.equal(done.consumed, input.length);
  assert.equal(done.step.type, 'auth');
  assert.equal(parseUserPassAuth(b(5, 1, 0, 1, 0)).step.type, 'close');
  const empty = parseUserPassAuth(b(1, 0, 0));
  assert.ok(empty.step.type === 'auth' && empty.step.username.length === 0 && empty.step.password.length === 0);

  const p = new SocksHandshakeParser();
  p.push(Buffer.concat([b(5, 2, 0, 2), input, b(5, 1, 0, 3, 3), Buffer.from('web'), b(0, 80)]));
  const greeting = p.next();
  assert.ok(greeting.type === 'greeting');
  const method = userPassPolicy.selectMethod(greeting.methods);
  assert.equal(method, SocksMethod.userPass);
  p.methodSelected(method);
  assert.equal(p.next().type, 'auth');
  assert.equal(p.next().type, 'more', 'no request before the verdict');
  p.authResult(true);
  assert.equal(p.next().type, 'connect');
  assert.equal(userPassPolicy.selectMethod([0, 1]), SocksMethod.noAcceptable);
  assert.deepEqual([...encodeAuthStatus(false)], [1, 1]);
});

test('Basic credentials header parsing', () => {
  const enc = (s: string) => `Basic ${Buffer.from(s).toString('base64')}`;
  const got = parseBasicCredentials(enc('alice:pa:ss'));
  assert.equal(got?.username.toString(), 'alice');
  assert.equal(got?.password.toString(), 'pa:ss');
  assert.equal(parseBasicCredentials(`  basic   ${Buffer.from('a:b').toString('base64')} `)?.username.toString(), 'a');
  for (const bad of [undefined, '', 'Basic', 'Bearer abc', enc('nocolon'), 'Basic a b', 'Basic @@@'])
    assert.equal(parseBasicCredentials(bad), undefined, String(bad));
});

test('the daemon credentials file: 0600, read once then gone, removed with the transient files', (t) => {
  const l = ensureStateDir(layout(tempDir(t)));
  const id = 'authid';
  mkdirSync(l.proxyDir(id), { mode: 0o700 });
  writeProxyAuthFile(l, id, { username: 'u', password: 'p', source: 'argv' });
  assert.equal(statSync(l.proxyAuthFile(id)).mode & 0o777, 0o600);
  assert.deepEqual(takeProxyAuthFile(l, id), { username: 'u', password: 'p', source: 'argv' });
  assert.equal(existsSync(l.proxyAuthFile(id)), false);
  assert.equal(takeProxyAuthFile(l, id), undefined);
  writeProxyAuthFile(l, id, { username: 'u', password: 'p', source: 'file' });
  removeTransient(l, id);
  assert.equal(existsSync(l.proxyAuthFile(id)), false);
  writeFileSync(l.proxyAuthFile(id), 'not json secret-value');
  assert.throws(
    () => takeProxyAuthFile(l, id),
    (err: Error) => !err.message.includes('secret-value'),
  );
});

test('in-process listeners: SOCKS5 with and without credentials, SOCKS4 refused, HTTP 407', async (t) => {
  const echo = await startEcho();
  const ctx = quietContext(new FakeOpener({}, () => tcpStream(echo.port)));
  ctx.auth = new ProxyAuth({ username: 'alice', password: 'pw' });
  const socks = await startSocksListener(LOOPBACK, 0, ctx);
  const httpL = await startHttpListener(LOOPBACK, 0, ctx);
  t.after(async () => {
    await socks.close(0);
    await httpL.close(0);
    echo.close();
  });
  const talk = async (bytes: Buffer[], n: number): Promise<Buffer> => {
    const s = await connectClient(socks.address.port);
    const r = new Reader(s);
    for (const x of bytes) s.write(x);
    const out = await r.read(n);
    s.destroy();
    return out;
  };
  const req = Buffer.concat([b(5, 1, 0, 3, 8), Buffer.from('echo.svc'), b(0, 7)]);
  assert.deepEqual([...(await talk([b(5, 1, 2), rfc1929('alice', 'pw'), req], 14))].slice(0, 6), [5, 2, 1, 0, 5, 0]);
  assert.deepEqual([...(await talk([b(5, 1, 0)], 2))], [5, 0xff]);
  assert.deepEqual([...(await talk([b(5, 1, 2), rfc1929('alice', 'PW')], 4))], [5, 2, 1, 1]);
  const socks4 = Buffer.concat([b(4, 1, 0, 80, 10, 0, 0, 1), Buffer.from('alice\0')]);
  assert.equal((await talk([socks4], 8))[1], 0x5b);
  assert.deepEqual(ctx.stats.snapshot().failuresByReason, { 'auth-failed': 3 });

  const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
    http.get({ host: LOOPBACK, port: (httpL.address as AddressInfo).port, path: 'http://echo.svc:7/' }, resolve).on('error', reject);
  });
  res.resume();
  await once(res, 'end');
  assert.equal(res.statusCode, 407);
  assert.equal(res.headers['proxy-authenticate'], 'Basic realm="kubectl-proxyout", charset="UTF-8"');

  // An upload without credentials, sent whole before the client reads: the 407 is not lost to a reset.
  const upload = Buffer.alloc(16 * 1024 * 1024, 1);
  const denied = await uploadThenRead(
    httpL.address.port,
    `POST http://echo.svc:7/ HTTP/1.1\r\nHost: echo.svc:7\r\nContent-Length: ${upload.length}\r\n\r\n`,
    upload,
  );
  assert.equal(denied.error, undefined);
  assert.match(denied.response, /^HTTP\/1\.1 407 [^]*Connection: close/);
});
