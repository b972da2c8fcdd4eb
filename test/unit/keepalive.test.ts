// startKeepalive against a real loopback WebSocket server that can stop answering pings.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import WebSocket, { WebSocketServer } from 'ws';
import { pingableWebSocket, startKeepalive } from '../../src/tunnel/keepalive.js';

const servers: WebSocketServer[] = [];
after(() => {
  for (const s of servers) {
    for (const c of s.clients) c.terminate();
    s.close();
  }
});

async function connect(autoPong: boolean): Promise<{ client: WebSocket; server: WebSocket }> {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0, autoPong });
  servers.push(wss);
  await once(wss, 'listening');
  const client = new WebSocket(`ws://127.0.0.1:${(wss.address() as AddressInfo).port}`);
  const [[server]] = (await Promise.all([once(wss, 'connection'), once(client, 'open')])) as [[WebSocket], unknown];
  return { client, server };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('a peer that answers pings is never declared dead', async () => {
  const { client } = await connect(true);
  let dead = false;
  // A generous timeout: on a loaded CI machine the event loop can stall for tens of ms.
  const stop = startKeepalive(pingableWebSocket(client), { intervalMs: 25, timeoutMs: 1_000 }, () => (dead = true));
  await sleep(400);
  assert.equal(dead, false);
  stop();
  client.terminate();
});

test('a silent peer is declared dead once, within interval + timeout', async () => {
  const { client } = await connect(false);
  const started = Date.now();
  const calls: number[] = [];
  startKeepalive(pingableWebSocket(client), { intervalMs: 50, timeoutMs: 100 }, (silentMs) => calls.push(silentMs));
  while (calls.length === 0 && Date.now() - started < 5_000) await sleep(10);
  const took = Date.now() - started;
  assert.equal(calls.length, 1);
  assert.ok(calls[0] >= 90 && took >= 140, `dead after ${took} ms, silent ${calls[0]} ms`);
  await sleep(300);
  assert.equal(calls.length, 1, 'reported once');
  client.terminate();
});

test('data from the peer counts as an answer; a paused reader stops the clock', async () => {
  const { client, server } = await connect(false);
  let dead = false;
  startKeepalive(pingableWebSocket(client), { intervalMs: 30, timeoutMs: 80 }, () => (dead = true));
  const chatter = setInterval(() => server.send('x'), 20);
  await sleep(300);
  clearInterval(chatter);
  assert.equal(dead, false, 'messages keep it alive without pongs');
  client.pause();
  await sleep(300);
  assert.equal(dead, false, 'not while we are not reading');
  client.resume();
  for (let i = 0; i < 100 && !dead; i++) await sleep(10);
  assert.equal(dead, true, 'declared dead once reading again shows nothing came back');
  client.terminate();
});

test('interval 0 is off', async () => {
  const { client } = await connect(false);
  let dead = false;
  startKeepalive(pingableWebSocket(client), { intervalMs: 0, timeoutMs: 10 }, () => (dead = true));
  await sleep(100);
  assert.equal(dead, false);
  client.terminate();
});

test('data we sent since we last heard from the peer stops the clock (it may wait in the kernel with the ping behind it)', async () => {
  const { client } = await connect(false);
  let sent = 0;
  let dead = false;
  startKeepalive(
    pingableWebSocket(client, () => sent),
    { intervalMs: 30, timeoutMs: 80, busySilenceMs: 700 },
    () => (dead = true),
  );
  // An upload the peer reads slowly: our bytes keep going out (16 KiB every 20 ms); nothing comes back.
  const upload = setInterval(() => (sent += 16 * 1024), 20);
  await sleep(400);
  clearInterval(upload);
  assert.equal(dead, false, 'not dead while our data is on its way');
  // The peer stays silent past busySilenceMs: dead (a peer that is gone is still found).
  const started = Date.now();
  while (!dead && Date.now() - started < 3000) await sleep(10);
  assert.equal(dead, true);
  client.terminate();
});

test('a client that keeps sending a little does not stop the clock: a dead peer is found within the timeout', async () => {
  const { client } = await connect(false);
  let sent = 0;
  let dead = false;
  const started = Date.now();
  startKeepalive(
    pingableWebSocket(client, () => sent),
    { intervalMs: 30, timeoutMs: 80, busySilenceMs: 5000 },
    () => (dead = true),
  );
  // A few bytes every 20 ms (a chat, a heartbeat of the client's own): the kernel takes them at once.
  const trickle = setInterval(() => (sent += 20), 20);
  while (!dead && Date.now() - started < 3000) await sleep(10);
  clearInterval(trickle);
  assert.equal(dead, true, 'found dead though the client kept sending');
  assert.ok(Date.now() - started < 1000, `after ${Date.now() - started} ms (interval 30 + timeout 80; busySilence 5000)`);
  client.terminate();
});
