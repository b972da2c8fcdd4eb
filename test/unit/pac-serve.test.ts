// Who gets the PAC file (listeners/pac-file.ts): decided by the connection's peer address, never
// by the Host header a client chooses. A peer on this machine needs a loopback Host (DNS
// rebinding); any other peer needs the proxy's credentials, whatever Host it sends.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import os from 'node:os';
import { servePac, type PacRefused } from '../../src/listeners/pac-file.js';
import { ProxyAuth } from '../../src/auth/credentials.js';
import { startHttpListener } from '../../src/listeners/http-server.js';
import { FakeOpener, quietContext } from './socks-fixtures.test.js';

const PAC = 'function FindProxyForURL(url, host) { return "DIRECT"; }';
const basic = (user: string, pass: string) => `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;

/** One request to servePac from `remoteAddress` (undefined: a unix socket) to `localAddress`; resolves with the status and body. */
function ask(
  remoteAddress: string | undefined,
  headers: Record<string, string>,
  auth?: ProxyAuth,
  localAddress?: string,
  pac: (reachedAt?: string) => string = () => PAC,
  refused?: PacRefused,
): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  // The throttle's timer for wrong credentials does not keep a process alive: this does, meanwhile.
  const keep = setInterval(() => undefined, 50);
  return new Promise<{ status: number; body: string; headers: Record<string, unknown> }>((resolve) => {
    const req = { method: 'GET', url: '/proxy.pac', headers, socket: { remoteAddress, localAddress, destroyed: false } } as unknown as IncomingMessage;
    let status = 0;
    let sent: Record<string, unknown> = {};
    const res = {
      writableEnded: false,
      destroyed: false,
      writeHead(code: number, h: Record<string, unknown>) {
        status = code;
        sent = h;
        return res;
      },
      end(body?: string) {
        res.writableEnded = true;
        resolve({ status, body: body ?? '', headers: sent });
      },
    };
    servePac(req, res as unknown as ServerResponse, pac, auth, refused);
  }).finally(() => clearInterval(keep));
}

const auth = () => new ProxyAuth({ username: 'dev', password: 's3cret-pass' }, { delayMs: 10, maxPendingPerSource: 4 });

test('a peer on this machine: served with a loopback Host, refused (403) with another Host', async () => {
  for (const peer of ['127.0.0.1', '::1', '::ffff:127.0.0.1', undefined]) {
    assert.equal((await ask(peer, { host: '127.0.0.1:3128' }, auth())).status, 200, `peer ${peer}`);
    assert.equal((await ask(peer, { host: 'attacker.example' }, auth())).body.includes('FindProxyForURL'), false);
  }
  assert.equal((await ask('127.0.0.1', { host: 'localhost:3128' })).status, 200);
  assert.equal((await ask('127.0.0.1', { host: 'attacker.example:80' })).status, 403);
});

test('another machine sending Host: 127.0.0.1 gets 401, not the file; with the credentials it gets it', async () => {
  const a = auth();
  const spoofed = await ask('192.0.2.7', { host: '127.0.0.1' }, a);
  assert.equal(spoofed.status, 401);
  assert.match(String(spoofed.headers['WWW-Authenticate']), /^Basic realm="kubectl-proxyout", charset="UTF-8"$/);
  assert.doesNotMatch(spoofed.body, /FindProxyForURL/);
  assert.equal((await ask('192.0.2.7', { host: '127.0.0.1', authorization: basic('dev', 'wrong') }, a)).status, 401);
  const withCredentials = await ask('192.0.2.7', { host: 'proxy.corp.example:3128', authorization: basic('dev', 's3cret-pass') }, a);
  assert.equal(withCredentials.status, 200);
  assert.equal(withCredentials.body, PAC);
  assert.equal((await ask('192.0.2.7', { host: 'proxy.corp.example:3128', 'proxy-authorization': basic('dev', 's3cret-pass') }, a)).status, 200);
});

test('a listener without proxy authentication (an explicit choice) serves other machines as it serves everything else', async () => {
  assert.equal((await ask('192.0.2.7', { host: 'proxy.corp.example:3128' })).status, 200);
});

test('the file is written for the address the browser reached (a wildcard listener is not loopback to another machine)', async () => {
  const reached: Array<string | undefined> = [];
  const pac = (at?: string) => (reached.push(at), PAC);
  assert.equal((await ask('192.0.2.7', { host: '192.0.2.1:3128', authorization: basic('dev', 's3cret-pass') }, auth(), '192.0.2.1', pac)).status, 200);
  assert.equal((await ask('127.0.0.1', { host: '127.0.0.1:3128' }, undefined, '127.0.0.1', pac)).status, 200);
  assert.deepEqual(reached, ['192.0.2.1', '127.0.0.1']);
});

test('a wrong password for the PAC file from another machine is reported as a failed attempt (warn), none at all as a challenge (info)', async () => {
  const seen: Array<{ level: string; reason: string; message: string }> = [];
  const refused: PacRefused = (err, level) => seen.push({ level, reason: err.reason, message: err.message });
  const a = auth();
  assert.equal(
    (await ask('192.0.2.7', { host: 'proxy.corp.example:3128', authorization: basic('dev', 'guess') }, a, undefined, undefined, refused)).status,
    401,
  );
  assert.equal((await ask('192.0.2.7', { host: 'proxy.corp.example:3128' }, a, undefined, undefined, refused)).status, 401);
  assert.equal(
    (await ask('192.0.2.7', { host: 'proxy.corp.example:3128', authorization: basic('dev', 's3cret-pass') }, a, undefined, undefined, refused)).status,
    200,
  );
  assert.deepEqual(
    seen.map(({ level, reason }) => [level, reason]),
    [
      ['warn', 'auth-failed'],
      ['info', 'auth-failed'],
    ],
  );
  assert.match(seen[0]!.message, /wrong proxy user name or password/);
  assert.doesNotMatch(JSON.stringify(seen), /guess|dev/, 'neither the password nor the user name presented');
});

test("the HTTP listener on a wildcard address logs and counts a wrong password for the PAC file from another machine's address", async (t) => {
  const external = Object.values(os.networkInterfaces())
    .flat()
    .find((i) => i && !i.internal && i.family === 'IPv4')?.address;
  if (!external) return t.skip('no non-loopback IPv4 address here');
  const ctx = quietContext(new FakeOpener({}));
  ctx.auth = new ProxyAuth({ username: 'dev', password: 's3cret-pass' }, { delayMs: 10, maxPendingPerSource: 4 });
  ctx.pac = () => PAC;
  const listener = await startHttpListener('0.0.0.0', 0, ctx);
  try {
    const status = await new Promise<number>((resolve, reject) => {
      const headers = { Authorization: basic('dev', 'guess') };
      http
        .get({ host: external, localAddress: external, port: listener.address.port, path: '/proxy.pac', headers, agent: false }, (res) => {
          res.resume();
          resolve(res.statusCode!);
        })
        .on('error', reject);
    });
    assert.equal(status, 401);
    const totals = ctx.stats.snapshot();
    assert.equal(totals.failuresByReason['auth-failed'], 1);
    assert.match(totals.lastFailure?.message ?? '', /wrong proxy user name or password \(asking for the PAC file\)/);
  } finally {
    await listener.close(0);
  }
});
