// The masking policy of our port-forward WebSockets (both `ws` and our own tunnel client), read off the wire: a bare server (TLS or
// plain) answers the upgrade by hand and reports the 4-byte masking key of the client's first frame.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import net from 'node:net';
import tls from 'node:tls';
import WebSocket from 'ws';
import { SimPki, type KeyAndCert } from '../sim/pki.js';
import { framesVisibleOnPath, webSocketOptions } from '../../src/tunnel/ws-options.js';
import { dialTunnel } from '../../src/tunnel/spdy/tunnel.js';
import type { ApiRequestOptions } from '../../src/cluster/api.js';

const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
let pki: SimPki;
let serving: KeyAndCert;

before(() => {
  pki = new SimPki();
  serving = pki.servingCert();
});

/**
 * Serves one upgrade and resolves with the masking key of the first client frame: from `ws` with
 * webSocketOptions (per-stream v4 WebSockets) or from our own client (the SPDY tunnel, dialTunnel).
 */
async function firstMask(secure: boolean, conn: ApiRequestOptions, client: Client): Promise<Buffer> {
  let resolveMask!: (m: Buffer) => void;
  const mask = new Promise<Buffer>((r) => (resolveMask = r));
  const onSocket = (socket: net.Socket) => {
    let buf = Buffer.alloc(0);
    let upgraded = false;
    socket.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      if (!upgraded) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = buf.subarray(0, end).toString();
        const key = /sec-websocket-key: *(\S+)/i.exec(head)![1];
        const protocol = /sec-websocket-protocol: *(\S+)/i.exec(head)?.[1];
        const accept = createHash('sha1')
          .update(key + GUID)
          .digest('base64');
        socket.write(
          `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n${protocol ? `Sec-WebSocket-Protocol: ${protocol}\r\n` : ''}\r\n`,
        );
        upgraded = true;
        buf = buf.subarray(end + 4);
      }
      // Short frame: [FIN|opcode][MASK|len] then the key.
      if (buf.length >= 6) {
        assert.equal(buf[1]! & 0x80, 0x80, 'client frames are masked');
        resolveMask(Buffer.from(buf.subarray(2, 6)));
        socket.destroy();
      }
    });
    socket.on('error', () => undefined);
  };
  const server = secure ? tls.createServer({ key: serving.keyPem, cert: serving.certPem }, onSocket) : net.createServer(onSocket);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as net.AddressInfo).port;
  const url = new URL(`${secure ? 'wss' : 'ws'}://127.0.0.1:${port}/api/v1/namespaces/a/pods/b/portforward`);
  let stop = (): void => undefined;
  if (client === 'ws') {
    const ws = new WebSocket(url, [], webSocketOptions(url, conn));
    ws.on('error', () => undefined);
    ws.on('open', () => ws.send(Buffer.from('hello')));
    stop = () => ws.terminate();
  } else {
    const tunnel = await dialTunnel(url, conn, 5000);
    tunnel.send([Buffer.from('hello')], 5);
    stop = () => tunnel.terminate();
  }
  try {
    return await mask;
  } finally {
    stop();
    server.close();
  }
}

type Client = 'ws' | 'tunnel';
const clients: Client[] = ['ws', 'tunnel'];

const zero = Buffer.alloc(4);

for (const client of clients) {
  test(`${client}: verified TLS to the API server: all-zero masking key (nothing on the path can read frames)`, async () => {
    const conn: ApiRequestOptions = { headers: {}, ca: pki.caPem };
    assert.equal(framesVisibleOnPath(new URL('wss://x'), conn), false);
    assert.deepEqual(await firstMask(true, conn, client), zero);
  });

  test(`${client}: insecure-skip-tls-verify: random masking keys (a TLS-intercepting box could read frames)`, async () => {
    const conn: ApiRequestOptions = { headers: {}, rejectUnauthorized: false };
    assert.equal(framesVisibleOnPath(new URL('wss://x'), conn), true);
    const masks = [await firstMask(true, conn, client), await firstMask(true, conn, client)];
    assert.ok(!masks[0]!.equals(zero) || !masks[1]!.equals(zero), 'keys are random');
    assert.ok(!masks[0]!.equals(masks[1]!), 'a new key per frame/connection');
  });

  test(`${client}: an extra CA is trusted (--extra-ca, a TLS-intercepting proxy): random masking keys`, async () => {
    const conn: ApiRequestOptions = { headers: {}, ca: [pki.caPem], tlsMayBeIntercepted: true };
    assert.equal(framesVisibleOnPath(new URL('wss://x'), conn), true);
    const masks = [await firstMask(true, conn, client), await firstMask(true, conn, client)];
    assert.ok(!masks[0]!.equals(masks[1]!), 'a new key per frame/connection');
  });

  test(`${client}: plain http:// API server: random masking keys`, async () => {
    const conn: ApiRequestOptions = { headers: {} };
    assert.equal(framesVisibleOnPath(new URL('ws://x'), conn), true);
    const masks = [await firstMask(false, conn, client), await firstMask(false, conn, client)];
    assert.ok(!masks[0]!.equals(masks[1]!), 'random keys');
  });
}
