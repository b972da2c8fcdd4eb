// A client that pipelines requests and leaves before their answers: every request it sent is
// abandoned — the ones whose answers wait in line behind the first too — so their tunnels close
// and their places under --max-streams come back. A closed client never counts against a new one.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { once } from 'node:events';
import { StreamLimiter } from '../../src/proxy/limits.js';
import { startHttpListener } from '../../src/listeners/http-server.js';
import { FakeOpener, LOOPBACK, connectClient, delay, quietContext, tcpStream, waitFor } from './socks-fixtures.test.js';

const MAX_STREAMS = 3;

// /slow answers after 300 ms (the client has left by then); /never does not answer at all.
let originConnections = 0;
const origin = http.createServer((req, res) => {
  req.resume();
  if (req.url === '/slow') setTimeout(() => res.end('late'), 300);
  else if (req.url !== '/never') res.end(`answer to ${req.url}`);
});
origin.on('connection', (s: net.Socket) => {
  originConnections++;
  s.on('close', () => originConnections--);
});
origin.listen(0, LOOPBACK);
await once(origin, 'listening');
const limiter = new StreamLimiter(new FakeOpener({ 'web.test': () => tcpStream((origin.address() as net.AddressInfo).port) }), MAX_STREAMS);
const ctx = quietContext(limiter);
const listener = await startHttpListener(LOOPBACK, 0, ctx);

after(async () => {
  await listener.close(100);
  origin.closeAllConnections();
  origin.close();
});

const get = (path: string): string => `GET http://web.test${path} HTTP/1.1\r\nHost: web.test\r\n\r\n`;

/** Pipelines `requests` in one write, waits until all are under way, then closes. */
async function pipelineAndLeave(requests: string): Promise<void> {
  const s = await connectClient(listener.address.port);
  s.write(requests);
  await waitFor(() => ctx.stats.snapshot().openStreams === MAX_STREAMS, 3000, 'every request under way');
  s.destroy();
}

async function assertAllLetGo(): Promise<void> {
  await waitFor(() => ctx.stats.snapshot().openStreams === 0, 3000, 'every stream closed');
  await waitFor(() => limiter.inUse === 0, 3000, 'every slot back');
  await waitFor(() => originConnections === 0, 3000, 'every tunnel closed');
}

test('answers that come after the client left: every tunnel closes, the queued ones too', async () => {
  await pipelineAndLeave(get('/slow') + get('/slow') + get('/slow'));
  await delay(500); // the origin has answered all three meanwhile
  await assertAllLetGo();
});

test('answers that never come: the queued requests are abandoned with the first, and a new client gets in', async () => {
  await pipelineAndLeave(get('/never') + `POST http://web.test/never HTTP/1.1\r\nHost: web.test\r\nContent-Length: 3\r\n\r\nabc` + get('/never'));
  await assertAllLetGo();
  const s = await connectClient(listener.address.port);
  let text = '';
  s.on('data', (c: Buffer) => (text += c.toString('latin1')));
  s.write(get('/next'));
  await waitFor(() => text.endsWith('answer to /next'), 3000, 'the next client served');
  assert.match(text, /^HTTP\/1\.1 200 /);
  s.destroy();
});

test('answers that came in but wait in line behind an unanswered one: their streams close when the client leaves', async () => {
  const s = await connectClient(listener.address.port);
  s.write(get('/never') + get('/first') + get('/second'));
  await waitFor(() => ctx.stats.snapshot().openStreams === MAX_STREAMS, 3000, 'every request under way');
  await delay(200); // the last two are answered upstream, their answers queued behind /never's
  s.destroy();
  await waitFor(() => ctx.stats.snapshot().openStreams === 0, 3000, 'every stream closed');
  await waitFor(() => limiter.inUse === 0, 3000, 'every slot back');
});
