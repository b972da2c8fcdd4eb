// Our client WebSocket (src/tunnel/websocket: handshake and byte socket) against `ws`'s server over
// real TLS and plain TCP, and against hand-written servers that break the handshake: the bytes
// both ways, pings answered, both close handshakes, a dropped connection, and every refusal.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createHash, randomBytes } from 'node:crypto';
import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import { setTimeout as delay } from 'node:timers/promises';
import { WebSocketServer, type WebSocket } from 'ws';
import { SimPki, type KeyAndCert } from '../sim/pki.js';
import { ByteWebSocket, type WebSocketEnd } from '../../src/tunnel/websocket/byte-socket.js';
import { UpgradeRefusal, upgradeToWebSocket } from '../../src/tunnel/websocket/handshake.js';
import type { ApiRequestOptions } from '../../src/cluster/api.js';

const PROTOCOL = 'SPDY/3.1+portforward.k8s.io';
let pki: SimPki;
let serving: KeyAndCert;
let server: https.Server;
let wss: WebSocketServer;
let port: number;
let onConnection: (ws: WebSocket) => void = () => undefined;

before(async () => {
  pki = new SimPki();
  serving = pki.servingCert();
  server = https.createServer({ key: serving.keyPem, cert: serving.certPem });
  // Echo the subprotocol as a Kubernetes API server does (ws would refuse it: "/" is no token).
  wss = new WebSocketServer({ noServer: true });
  server.on('upgrade', (req, socket, head) => {
    if (req.headers['sec-websocket-protocol'] !== PROTOCOL) {
      const body = 'unable to negotiate protocol';
      socket.end(`HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
      return;
    }
    delete req.headers['sec-websocket-protocol'];
    wss.once('headers', (headers) => headers.push(`Sec-WebSocket-Protocol: ${PROTOCOL}`));
    wss.handleUpgrade(req, socket, head, (ws) => onConnection(ws));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  port = (server.address() as net.AddressInfo).port;
});

after(() => {
  wss.close();
  server.close();
});

const conn = (): ApiRequestOptions => ({ ca: pki.caPem, headers: { Authorization: 'Bearer t' } });

async function open(keys: 'zero' | 'random' = 'zero'): Promise<{ client: ByteWebSocket; peer: WebSocket }> {
  const peer = new Promise<WebSocket>((r) => (onConnection = r));
  const up = await upgradeToWebSocket(new URL(`wss://localhost:${port}/api/v1/namespaces/a/pods/b/portforward`), conn(), PROTOCOL, 5000);
  assert.equal(up.protocol, PROTOCOL);
  assert.ok(up.reads, 'TLS straight to the server reads into slabs');
  return { client: new ByteWebSocket(up.socket, up.head, keys, up.reads), peer: await peer };
}

const ended = (client: ByteWebSocket): Promise<WebSocketEnd> => new Promise((r) => client.onClose(r));

test('bytes both ways intact (4 MiB each, random keys too); the server sees binary messages only', async () => {
  for (const keys of ['zero', 'random'] as const) {
    const { client, peer } = await open(keys);
    const up = randomBytes(4 << 20);
    const down = randomBytes(4 << 20);
    const atPeer: Buffer[] = [];
    let peerBytes = 0;
    const peerDone = new Promise<void>((resolve) =>
      peer.on('message', (d: Buffer, isBinary) => {
        assert.ok(isBinary);
        atPeer.push(d);
        if ((peerBytes += d.length) === up.length) resolve();
      }),
    );
    const got: Buffer[] = [];
    let gotBytes = 0;
    const clientDone = new Promise<void>((resolve) => {
      client.onData = (p) => {
        got.push(p);
        if ((gotBytes += p.length) === down.length) resolve();
      };
    });
    for (let at = 0; at < up.length; at += 50_000) {
      const a = up.subarray(at, Math.min(at + 20_000, up.length));
      const b = up.subarray(Math.min(at + 20_000, up.length), Math.min(at + 50_000, up.length));
      client.send([a, b], a.length + b.length);
    }
    for (let at = 0; at < down.length; at += 16_384) peer.send(down.subarray(at, at + 16_384));
    await Promise.all([peerDone, clientDone]);
    assert.deepEqual(Buffer.concat(atPeer), up, keys);
    assert.deepEqual(Buffer.concat(got), down, keys);
    client.close();
    assert.deepEqual(await ended(client), { code: 1000 });
  }
});

test('a server ping is answered with its payload; the server closing 1000 is a clean end, echoed', async () => {
  const { client, peer } = await open();
  let heard = 0;
  client.onHeard = () => heard++;
  peer.ping(Buffer.from('are you there'));
  const [pong] = (await once(peer, 'pong')) as [Buffer];
  assert.equal(pong.toString(), 'are you there');
  assert.ok(heard >= 1, 'a ping counts as hearing from the peer');
  const peerClosed = once(peer, 'close');
  peer.close(1000, 'done');
  assert.deepEqual(await ended(client), { code: 1000 });
  const [code] = (await peerClosed) as [number];
  assert.equal(code, 1000, 'our close frame echoed the code');
  assert.equal(client.isOpen, false);
});

test('a server closing with 1011 or dropping the connection ends the socket with an error', async () => {
  {
    const { client, peer } = await open();
    peer.close(1011, 'kubelet went away');
    const end = await ended(client);
    assert.equal(end.code, 1011);
    assert.match(end.error!.message, /closed the WebSocket \(1011: kubelet went away\)/);
  }
  {
    const { client, peer } = await open();
    peer.terminate();
    const end = await ended(client);
    assert.equal(end.code, 1006);
    assert.match(end.error!.message, /without a close frame/);
  }
});

test('a server breaking the framing (a text message) fails the socket with 1003 and tells the server', async () => {
  const { client, peer } = await open();
  const peerClosed = once(peer, 'close');
  peer.send('text');
  const end = await ended(client);
  assert.equal(end.code, 1003);
  assert.match(end.error!.message, /text message/);
  const [code] = (await peerClosed) as [number];
  assert.equal(code, 1003);
});

test('an exception behind onData fails only this connection, with 1011 to the server', async () => {
  const { client, peer } = await open();
  client.onData = () => {
    throw new Error('bug behind onData');
  };
  const peerClosed = once(peer, 'close');
  peer.send(Buffer.from('boom'));
  const end = await ended(client);
  assert.equal(end.code, 1011);
  assert.match(end.error!.message, /bug behind onData/);
  const [code] = (await peerClosed) as [number];
  assert.equal(code, 1011);
});

test('refusals: HTTP status with its body, another subprotocol, a wrong accept key, silence', async () => {
  const url = (p: number, scheme = 'wss') => new URL(`${scheme}://localhost:${p}/x`);
  await assert.rejects(
    upgradeToWebSocket(url(port), conn(), 'v4.channel.k8s.io', 5000),
    (err: unknown) => err instanceof UpgradeRefusal && err.status === 403 && err.body === 'unable to negotiate protocol',
  );

  // Hand-written plain servers answering the upgrade wrongly.
  const bad = async (answer: (key: string) => string, check: (err: Error) => boolean, timeoutMs = 5000) => {
    const s = net.createServer((socket) => {
      socket.on('error', () => undefined);
      socket.once('data', (d) => {
        const key = /sec-websocket-key: *(\S+)/i.exec(d.toString())![1]!;
        const reply = answer(key);
        if (reply) socket.write(reply);
      });
    });
    s.listen(0, '127.0.0.1');
    await once(s, 'listening');
    try {
      await assert.rejects(upgradeToWebSocket(url((s.address() as net.AddressInfo).port, 'ws'), { headers: {} }, PROTOCOL, timeoutMs), check);
    } finally {
      s.close();
    }
  };
  const accept = (key: string) => createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
  await bad(
    () => 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: AAAA\r\n\r\n',
    (err) => /wrong Sec-WebSocket-Accept/.test(err.message),
  );
  await bad(
    (key) =>
      `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept(key)}\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\n`,
    (err) => /extension we did not offer/.test(err.message),
  );
  await bad(
    (key) => `HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept(key)}\r\n\r\n`,
    (err) => /upgraded to "h2c"/.test(err.message),
  );
  await bad(
    () => '',
    (err) => /not answered within 300 ms/.test(err.message),
    300,
  );
  // A 101 with the right key: the subprotocol is reported for the caller to judge.
  const s = net.createServer((socket) => {
    socket.on('error', () => undefined);
    socket.once('data', (d) => {
      const key = /sec-websocket-key: *(\S+)/i.exec(d.toString())![1]!;
      socket.write(
        `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept(key)}\r\nSec-WebSocket-Protocol: v4.channel.k8s.io\r\n\r\n`,
      );
      // A frame right behind the 101 arrives as `head`, and is read first.
      socket.write(Buffer.from([0x82, 3, 0x61, 0x62, 0x63]));
    });
  });
  s.listen(0, '127.0.0.1');
  await once(s, 'listening');
  const up = await upgradeToWebSocket(url((s.address() as net.AddressInfo).port, 'ws'), { headers: {} }, PROTOCOL, 5000);
  assert.equal(up.protocol, 'v4.channel.k8s.io');
  const client = new ByteWebSocket(up.socket, up.head, 'random');
  const [piece] = await new Promise<Buffer[]>((r) => (client.onData = (p) => r([p])));
  assert.equal(piece!.toString(), 'abc');
  client.terminate();
  s.close();
});

test('a refusal whose body never ends is answered from its first 16 KiB at once, not at the timeout', async () => {
  let sent = 0;
  const s = net.createServer((socket) => {
    socket.on('error', () => undefined);
    socket.once('data', () => {
      socket.write('HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n');
      const chunk = `4000\r\n${'A'.repeat(0x4000)}\r\n`;
      const pump = () => {
        while (!socket.destroyed && socket.write(chunk)) sent += 0x4000;
      };
      socket.on('drain', pump);
      pump();
    });
  });
  s.listen(0, '127.0.0.1');
  await once(s, 'listening');
  try {
    const began = Date.now();
    await assert.rejects(
      upgradeToWebSocket(new URL(`ws://127.0.0.1:${(s.address() as net.AddressInfo).port}/x`), { headers: {} }, PROTOCOL, 10_000),
      (err: unknown) => err instanceof UpgradeRefusal && err.status === 403 && err.body === 'A'.repeat(16 * 1024),
    );
    assert.ok(Date.now() - began < 5_000, `refused after ${Date.now() - began} ms`);
    assert.ok(sent < 64 << 20, `${sent} bytes of body were read`);
  } finally {
    s.close();
  }
});

test('an error between the 101 and the WebSocket is no unhandled error event, direct or through an agent', async () => {
  const url = new URL(`wss://localhost:${port}/api/v1/namespaces/a/pods/b/portforward`);
  const agent = new https.Agent({ ca: pki.caPem });
  try {
    for (const [how, c] of [
      ['direct', conn()],
      ['through an agent', { ...conn(), agent }],
    ] as const) {
      const up = await upgradeToWebSocket(url, c, PROTOCOL, 5000);
      // The caller has not made its WebSocket yet: an error now would crash an unguarded process.
      up.socket.destroy(new Error(`in the gap (${how})`));
      // Not events.once: it listens for 'error' itself, which would hide the bug.
      await new Promise((resolve) => up.socket.once('close', resolve));
      assert.ok(up.socket.destroyed, how);
    }
  } finally {
    agent.destroy();
  }
});

test('TLS read into slabs: frames behind the 101 first and in order, SNI sent; through an agent the socket emits data', async () => {
  const accept = (key: string) => createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
  const frame = (text: string) => Buffer.concat([Buffer.from([0x82, text.length]), Buffer.from(text)]);
  const names: Array<string | false | null> = [];
  const s = tls.createServer({ key: serving.keyPem, cert: serving.certPem }, (socket) => {
    names.push(socket.servername);
    socket.on('error', () => undefined);
    socket.once('data', (d) => {
      const key = /sec-websocket-key: *(\S+)/i.exec(d.toString())![1]!;
      // The 101 and two frames in one write, two more writes at once, then one later.
      socket.write(
        Buffer.concat([
          Buffer.from(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept(key)}\r\n\r\n`),
          frame('one,'),
          frame('two,'),
        ]),
      );
      socket.write(frame('three,'));
      socket.write(frame('four,'));
      setTimeout(() => socket.write(frame('five')), 50);
    });
  });
  s.listen(0, '127.0.0.1');
  await once(s, 'listening');
  const url = new URL(`wss://localhost:${(s.address() as net.AddressInfo).port}/x`);
  const readAll = async (c: ApiRequestOptions, viaAgent: boolean) => {
    const up = await upgradeToWebSocket(url, c, PROTOCOL, 5000);
    assert.equal(up.reads === undefined, viaAgent, viaAgent ? 'an agent owns its socket' : 'direct TLS reads into slabs');
    const client = new ByteWebSocket(up.socket, up.head, 'zero', up.reads);
    let got = '';
    const all = new Promise<void>((resolve) => {
      client.onData = (p) => {
        got += p.toString();
        if (got.endsWith('five')) resolve();
      };
    });
    await Promise.race([all, delay(5_000, undefined, { ref: false })]);
    client.terminate();
    return got;
  };
  try {
    assert.equal(await readAll(conn(), false), 'one,two,three,four,five');
    const agent = new https.Agent({ ca: pki.caPem });
    assert.equal(await readAll({ ...conn(), agent }, true), 'one,two,three,four,five');
    agent.destroy();
    assert.deepEqual(names, ['localhost', 'localhost'], 'SNI names the host, as https does');
    // An unverifiable server fails the upgrade with the TLS error.
    await assert.rejects(upgradeToWebSocket(url, { headers: {} }, PROTOCOL, 5000), (err: Error) => /self-signed|unable to (get|verify)/i.test(err.message));
  } finally {
    s.close();
  }
});
