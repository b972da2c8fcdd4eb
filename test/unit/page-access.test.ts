// Who may have the live page (ui/page-access.ts): a loopback peer, asking for a loopback name with
// the port it connected to, from no other origin; the token, in the query, for its data.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { checkAccess, newPageToken, splitHostHeader } from '../../src/ui/page-access.js';

const token = newPageToken();
const PORT = 4321;

function request(over: { peer?: string | null; url?: string; host?: string; origin?: string; cookie?: string } = {}): IncomingMessage {
  const headers: Record<string, string> = { host: over.host ?? `127.0.0.1:${PORT}` };
  if (over.origin !== undefined) headers.origin = over.origin;
  if (over.cookie !== undefined) headers.cookie = over.cookie;
  return {
    url: over.url ?? `/?token=${token}`,
    headers,
    socket: { remoteAddress: over.peer === null ? undefined : (over.peer ?? '127.0.0.1'), localPort: PORT },
  } as unknown as IncomingMessage;
}

test('a token is 192 random bits, URL-safe, new each time', () => {
  assert.match(token, /^[A-Za-z0-9_-]{32}$/);
  assert.notEqual(newPageToken(), token);
});

test('the peer address decides first: only loopback peers, whatever the headers say', () => {
  for (const peer of ['192.0.2.7', '10.0.0.1', '::ffff:192.0.2.7', '2001:db8::1', null]) {
    const access = checkAccess(request({ peer }), token);
    assert.deepEqual(access, { ok: false, why: 'the live page is served to this machine only' }, String(peer));
  }
  for (const peer of ['127.0.0.1', '127.5.6.7', '::1', '::ffff:127.0.0.1'])
    assert.deepEqual(checkAccess(request({ peer }), token), { ok: true, token: true }, peer);
});

test('Host must be a loopback name or address with the port the connection came in on', () => {
  for (const host of [`localhost:${PORT}`, `127.0.0.1:${PORT}`, `[::1]:${PORT}`, `LOCALHOST:${PORT}`])
    assert.equal(checkAccess(request({ host }), token).ok, true, host);
  for (const host of [
    `evil.example:${PORT}`,
    `127.0.0.1.nip.io:${PORT}`,
    `127.0.0.1:${PORT + 1}`,
    '127.0.0.1',
    `a.localhost:${PORT}`,
    '',
    `127.0.0.1:${PORT}:1`,
  ])
    assert.equal(checkAccess(request({ host }), token).ok, false, host);
});

test('an Origin, when sent, must be the page itself', () => {
  assert.equal(checkAccess(request({ origin: `http://127.0.0.1:${PORT}` }), token).ok, true);
  assert.equal(checkAccess(request({ origin: `http://localhost:${PORT}` }), token).ok, true);
  for (const origin of ['http://evil.example', `https://127.0.0.1:${PORT}`, `http://127.0.0.1:${PORT + 1}`, 'null', `http://evil.example:${PORT}`])
    assert.equal(checkAccess(request({ origin }), token).ok, false, origin);
});

test('the token: in the query, compared whole; a cookie never counts', () => {
  assert.deepEqual(checkAccess(request({ url: `/ui/events?token=${token}` }), token), { ok: true, token: true });
  // The page's files need none (the event stream does: page-server.ts).
  assert.deepEqual(checkAccess(request({ url: '/' }), token), { ok: true, token: false });
  assert.deepEqual(checkAccess(request({ url: '/ui/events', cookie: `proxyout-ui-${PORT}=${token}; token=${token}` }), token), { ok: true, token: false });
  for (const url of [
    `/?token=${token}x`,
    `/?token=${token.slice(0, -1)}`,
    '/?token=',
    `/ui/events?token=${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}`,
  ])
    assert.deepEqual(checkAccess(request({ url }), token), { ok: false, why: 'wrong token' }, url);
});

test('Host headers are split as browsers send them', () => {
  assert.deepEqual(splitHostHeader('[::1]:80'), { host: '::1', port: 80 });
  assert.deepEqual(splitHostHeader('LocalHost'), { host: 'localhost' });
  assert.equal(splitHostHeader('a b'), undefined);
  assert.equal(splitHostHeader(undefined), undefined);
});
