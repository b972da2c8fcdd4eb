// grpc mode keeps one connection to the konnectivity server. When the path under it goes dead
// (a NAT or load balancer forgot the flow: nothing is reset, new connections would work), every
// dial on it went unanswered until keepalive noticed, minutes later. A dial the server does not
// answer in time now sends the next dials over a new connection; streams open on the old one
// keep going while it still carries them.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { startKonnectivityBed, echoRoundTrip, GUEST, type KonnectivityBed } from '../helpers/konnectivity.js';
import { startTcpGate, type TcpGate } from '../helpers/tcp-gate.js';
import { createKonnectivityDialer, type KonnectivityDialer } from '../../src/konnectivity/dialer.js';
import { ConnectTimeoutError } from '../../src/core/errors.js';

let bed: KonnectivityBed;
let gate: TcpGate;
let dialer: KonnectivityDialer;

before(async () => {
  bed = await startKonnectivityBed('grpc', 'tls');
  const server = new URL(bed.spec.server);
  gate = await startTcpGate({ host: server.hostname, port: Number(server.port) });
  dialer = await createKonnectivityDialer({ ...bed.spec, server: `https://127.0.0.1:${new URL(gate.url).port}` });
});
after(async () => {
  dialer?.close();
  await gate?.close();
  await bed?.close();
});

const echo = () => dialer.dial(GUEST.echo.ip, GUEST.echo.port, AbortSignal.timeout(3_000));

test('a dial the server does not answer in time: the next one goes over a new connection, the open stream keeps working', async () => {
  const open = await echo();
  const connections = gate.connections;
  // The agent never answers this one, the connection is fine.
  await assert.rejects(dialer.dial(GUEST.blackHole.ip, GUEST.blackHole.port, AbortSignal.timeout(500)), ConnectTimeoutError);
  const next = await echo();
  assert.equal(gate.connections, connections + 1, 'the next dial opened a new connection');
  const payload = randomBytes(64 * 1024);
  assert.deepEqual(await echoRoundTrip(open, payload), payload, 'the stream on the old connection still carries bytes');
  assert.deepEqual(await echoRoundTrip(next, payload), payload);
  open.destroy();
  next.destroy();
});

test('the path to the server goes dead: after one dial times out, the next succeeds at once', async () => {
  const before = await echo();
  before.destroy();
  gate.forget();
  await assert.rejects(echo(), ConnectTimeoutError);
  const started = Date.now();
  const stream = await echo();
  assert.ok(Date.now() - started < 2_000, `dialled in ${Date.now() - started} ms`);
  const payload = randomBytes(1024);
  assert.deepEqual(await echoRoundTrip(stream, payload), payload);
  stream.destroy();
});
