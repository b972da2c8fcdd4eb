// A keep-alive client's requests reuse a pooled upstream tunnel only for a while after it opened:
// opening one is when the API server authorizes pods/portforward, so a right revoked meanwhile must
// be asked again within seconds, however steadily the client keeps the pooled tunnel busy.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { once } from 'node:events';
import { startHttpListener } from '../../src/listeners/http-server.js';
import { FakeOpener, LOOPBACK, quietContext, tcpStream } from './socks-fixtures.test.js';

const origin = http.createServer((req, res) => {
  req.resume();
  res.end('ok');
});
origin.listen(0, LOOPBACK);
await once(origin, 'listening');

const opener = new FakeOpener({ 'web.test': () => tcpStream((origin.address() as net.AddressInfo).port) });
const listener = await startHttpListener(LOOPBACK, 0, quietContext(opener), { upstreamIdleMs: 60_000, upstreamReuseMs: 300 });
after(async () => {
  await listener.close(100);
  origin.closeAllConnections();
  origin.close();
});

async function get(): Promise<number> {
  // A new client connection each time, as curl run again: only the proxy's pool is kept.
  const req = http.request({ agent: false, host: LOOPBACK, port: listener.address.port, path: 'http://web.test/', headers: { Host: 'web.test' } });
  req.end();
  const [res] = (await once(req, 'response')) as [http.IncomingMessage];
  res.resume();
  await once(res, 'end');
  return res.statusCode ?? 0;
}

test('a pooled upstream opened longer ago than the reuse age is not reused: the next request opens (is authorized) anew', async () => {
  for (let i = 0; i < 4; i++) {
    assert.equal(await get(), 200);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  assert.equal(opener.requests.length, 1, 'reused while young');
  await new Promise((resolve) => setTimeout(resolve, 350));
  assert.equal(await get(), 200);
  assert.equal(opener.requests.length, 2, 'an old one is not');
});
