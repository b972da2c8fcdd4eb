// A pooled tunnel whose port-forward breaks just as a request reuses it — the pod was deleted
// (a rollout, a restart) between two requests of a keep-alive client: the tunnel fails with the
// transport's typed error, not a socket's ECONNRESET. A bodiless idempotent request is sent once
// more on a fresh tunnel, as for a reset; a POST is not.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { once } from 'node:events';
import { UpstreamApiError } from '../../src/core/errors.js';
import { startHttpListener } from '../../src/listeners/http-server.js';
import { FakeOpener, LOOPBACK, quietContext, tcpStream } from './socks-fixtures.test.js';

let answered = 0;
const origin = http.createServer((req, res) => {
  req.resume();
  res.end(`answer ${++answered} to ${req.method} ${req.url}`);
});
origin.listen(0, LOOPBACK);
await once(origin, 'listening');

/** Tunnels opened so far; `breakPooled` makes each break on its next request, as a pod gone. */
const tunnels: net.Socket[] = [];
const breaking = new WeakSet<net.Socket>();
function breakPooled(): void {
  for (const t of tunnels) breaking.add(t);
}
const opener = new FakeOpener({
  'web.test': async () => {
    const opened = await tcpStream((origin.address() as net.AddressInfo).port);
    const socket = opened.stream as net.Socket;
    tunnels.push(socket);
    const write = socket.write.bind(socket) as (...args: unknown[]) => boolean;
    socket.write = ((...args: unknown[]) => {
      if (!breaking.has(socket)) return write(...args);
      setImmediate(() => socket.destroy(new UpstreamApiError('port-forward tunnel to shop/web-1 broke: the pod is gone')));
      return true;
    }) as typeof socket.write;
    return { ...opened, route: 'test' };
  },
});
const listener = await startHttpListener(LOOPBACK, 0, quietContext(opener));

after(async () => {
  await listener.close(100);
  origin.closeAllConnections();
  origin.close();
});

const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
after(() => agent.destroy());

/** One request through the proxy on the client's one keep-alive connection. */
async function send(method: string, path: string, body?: string): Promise<{ status: number; text: string }> {
  const req = http.request({ agent, host: LOOPBACK, port: listener.address.port, method, path: `http://web.test${path}`, headers: { Host: 'web.test' } });
  req.end(body);
  const [res] = (await once(req, 'response')) as [http.IncomingMessage];
  let text = '';
  for await (const chunk of res) text += String(chunk);
  return { status: res.statusCode ?? 0, text };
}

test('a GET on a pooled tunnel that broke is sent again on a fresh one', async () => {
  assert.equal((await send('GET', '/a')).status, 200);
  breakPooled();
  const second = await send('GET', '/b');
  assert.equal(second.status, 200, second.text);
  assert.match(second.text, /to GET \/b$/);
  assert.equal(opener.requests.length, 2, 'one fresh tunnel for the retry');
});

test('a POST on a pooled tunnel that broke is not sent again: 502', async () => {
  assert.equal((await send('GET', '/warm')).status, 200);
  const opens = opener.requests.length;
  breakPooled();
  const post = await send('POST', '/c', 'payload');
  assert.equal(post.status, 502);
  assert.match(post.text, /the pod is gone/);
  assert.equal(opener.requests.length, opens, 'no fresh tunnel for a replay');
});
