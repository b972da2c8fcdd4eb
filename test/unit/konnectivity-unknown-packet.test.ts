// konnectivity/grpc-dialer.ts against a server that sends packet kinds this client does not know
// (a newer apiserver-network-proxy): upstream's client (konnectivity-client/pkg/client/client.go
// serve) passes over them, so a dial and its bytes go on as if they had not come.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import grpc from '@grpc/grpc-js';
import { decodePacket, encodePacket, PROXY_METHOD, type Packet } from '../../src/konnectivity/packet.js';
import { GrpcDialer } from '../../src/konnectivity/grpc-dialer.js';

/** Packet{type=9}: a kind client.proto does not have (yet). */
const UNKNOWN_KIND = Buffer.from('0809', 'hex');

test('a packet of an unknown kind decodes as such, and a dial passes over it', async (t) => {
  assert.deepEqual(decodePacket(UNKNOWN_KIND), { type: 'UNKNOWN', kind: '9' });
  const dir = await mkdtemp(path.join(os.tmpdir(), 'proxyout-konn-unknown-'));
  const socket = path.join(dir, 'k.sock');
  const server = new grpc.Server();
  server.addService(
    {
      Proxy: {
        path: PROXY_METHOD,
        requestStream: true,
        responseStream: true,
        requestSerialize: encodePacket,
        requestDeserialize: decodePacket,
        // Raw bytes out: the test writes what a newer server would.
        responseSerialize: (b: Buffer) => b,
        responseDeserialize: (b: Buffer) => b,
        originalName: 'proxy',
      },
    },
    {
      Proxy: (call: grpc.ServerDuplexStream<Packet, Buffer>) => {
        call.on('error', () => undefined);
        call.on('data', (p: Packet) => {
          if (p.type !== 'DIAL_REQ') return;
          call.write(UNKNOWN_KIND);
          call.write(encodePacket({ type: 'DIAL_RSP', random: p.random, connectID: 1n, error: '' }));
          call.write(UNKNOWN_KIND);
          call.write(encodePacket({ type: 'DATA', connectID: 1n, data: Buffer.from('hello'), error: '' }));
          call.write(encodePacket({ type: 'CLOSE_RSP', connectID: 1n, error: '' }));
        });
        call.on('end', () => call.end());
      },
    },
  );
  await new Promise<number>((resolve, reject) =>
    server.bindAsync(`unix://${socket}`, grpc.ServerCredentials.createInsecure(), (err, port) => (err ? reject(err) : resolve(port))),
  );
  const dialer = new GrpcDialer({ address: { kind: 'unix', path: socket }, tls: {}, label: 'k' });
  t.after(async () => {
    dialer.close();
    server.forceShutdown();
    await rm(dir, { recursive: true, force: true });
  });
  const stream = await dialer.dial('10.0.0.1', 80, AbortSignal.timeout(10_000));
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  assert.equal(Buffer.concat(chunks).toString(), 'hello');
});
