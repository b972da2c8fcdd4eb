// A 407 to a request without credentials is the challenge that browsers, git and curl
// --proxy-anyauth wait for before they send them: `status` must not call it the last failed
// stream (StreamStats.lastFailure) when the client then gets through. Wrong credentials are one.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { ProxyAuth } from '../../src/auth/credentials.js';
import { startHttpListener } from '../../src/listeners/http-server.js';
import { FakeOpener, LOOPBACK, Reader, connectClient, quietContext, startEcho, tcpStream } from './socks-fixtures.test.js';

const basic = (user: string, pass: string) => `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;

test('a CONNECT challenged for credentials, then sent with them, leaves no failure for status; a wrong password does', async (t) => {
  const echo = await startEcho();
  const ctx = quietContext(new FakeOpener({}, () => tcpStream(echo.port)));
  ctx.auth = new ProxyAuth({ username: 'alice', password: 'pw' });
  const listener = await startHttpListener(LOOPBACK, 0, ctx);
  t.after(async () => {
    await listener.close(0);
    echo.close();
  });
  const port = (listener.address as AddressInfo).port;
  const connect = async (authorization?: string): Promise<string> => {
    const s = await connectClient(port);
    const reader = new Reader(s);
    s.write(`CONNECT echo.svc:7 HTTP/1.1\r\nHost: echo.svc:7\r\n${authorization ? `Proxy-Authorization: ${authorization}\r\n` : ''}\r\n`);
    const head = (await reader.read(12)).toString();
    s.destroy();
    return head;
  };
  assert.equal(await connect(), 'HTTP/1.1 407');
  assert.equal(await connect(basic('alice', 'pw')), 'HTTP/1.1 200');
  assert.equal(ctx.stats.snapshot().lastFailure, undefined, 'the challenge is no failed stream');
  assert.equal(await connect(basic('alice', 'PW')), 'HTTP/1.1 407');
  assert.equal(ctx.stats.snapshot().lastFailure?.reason, 'auth-failed');
});
