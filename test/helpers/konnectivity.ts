// A konnectivity test bed: the simulated CA, a simulated konnectivity server in one mode (TLS or a
// unix socket), and guest-only backends: a raw echo (half-close aware) and a "bytes" source that
// writes N deterministic bytes then FIN. Guest addresses are 127.77.x.y, where nothing listens,
// so only the konnectivity server (which maps them) reaches the backends, and any mistaken direct
// dial stays on loopback and is refused.
import { createHash } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Duplex } from 'node:stream';
import { SimPki } from '../sim/pki.js';
import { sendDeterministicBytes } from '../sim/backends.js';
import { GuestNetwork } from '../sim/guest-network.js';
import { SimKonnectivityServer } from '../sim/konnectivity-server.js';
import type { KonnectivitySpec } from '../../src/konnectivity/options.js';

export const GUEST = {
  echo: { ip: '127.77.0.10', port: 7000 },
  bytes: { ip: '127.77.0.11', port: 8000 },
  refused: { ip: '127.77.0.12', port: 9000 },
  closedPort: { ip: '127.77.0.13', port: 9001 },
  timeout: { ip: '127.77.0.14', port: 9002 },
  blackHole: { ip: '127.77.0.15', port: 9003 },
  unrouted: { ip: '127.77.9.9', port: 80 },
} as const;

export type Transport = 'tls' | 'uds';

export interface KonnectivityBed {
  dir: string;
  server: SimKonnectivityServer;
  network: GuestNetwork;
  spec: KonnectivitySpec;
  /** Bytes the "bytes" backend sends per connection. */
  bytesSize: number;
  /** Bytes the "bytes" backend has handed to its sockets so far (all connections). */
  bytesSent(): number;
  close(): Promise<void>;
}

let pki: SimPki | undefined;
const sharedPki = () => (pki ??= new SimPki());

function listen(server: net.Server): Promise<number> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as net.AddressInfo).port)));
}

export async function startKonnectivityBed(
  mode: 'grpc' | 'http-connect',
  transport: Transport,
  opts: { bytesSize?: number; httpErrors?: 'current' | 'legacy' } = {},
): Promise<KonnectivityBed> {
  const bytesSize = opts.bytesSize ?? 4 * 1024 * 1024;
  const dir = await mkdtemp(path.join(os.tmpdir(), 'proxyout-konn-'));
  const sockets = new Set<net.Socket>();
  const track = (s: net.Socket) => {
    sockets.add(s);
    s.on('error', () => {});
    s.on('close', () => sockets.delete(s));
  };
  const echo = net.createServer({ allowHalfOpen: true }, (s) => {
    track(s);
    s.pipe(s);
  });
  let sent = 0;
  const bytes = net.createServer((s) => {
    track(s);
    sendDeterministicBytes(s, bytesSize, (k) => (sent += k));
  });
  const closed = net.createServer();
  const [echoPort, bytesPort, closedPort] = [await listen(echo), await listen(bytes), await listen(closed)];
  await new Promise((r) => closed.close(r));
  const network = new GuestNetwork()
    .set(GUEST.echo.ip, GUEST.echo.port, { host: '127.0.0.1', port: echoPort })
    .set(GUEST.bytes.ip, GUEST.bytes.port, { host: '127.0.0.1', port: bytesPort })
    .set(GUEST.refused.ip, GUEST.refused.port, 'refused')
    .set(GUEST.closedPort.ip, GUEST.closedPort.port, { host: '127.0.0.1', port: closedPort })
    .set(GUEST.timeout.ip, GUEST.timeout.port, 'timeout')
    .set(GUEST.blackHole.ip, GUEST.blackHole.port, 'hang');
  const ca = sharedPki();
  const serving = ca.servingCert();
  const client = ca.clientCert('konnectivity-client', 'system:konnectivity');
  const files = { ca: path.join(dir, 'ca.crt'), cert: path.join(dir, 'client.crt'), key: path.join(dir, 'client.key') };
  await writeFile(files.ca, ca.caPem);
  await writeFile(files.cert, client.certPem);
  await writeFile(files.key, client.keyPem, { mode: 0o600 });
  const uds = transport === 'uds' ? path.join(dir, 'konnectivity.sock') : undefined;
  const server = await SimKonnectivityServer.start({
    mode,
    network,
    uds,
    tls: uds ? undefined : { keyPem: serving.keyPem, certPem: serving.certPem, caPem: ca.caPem },
    httpErrors: opts.httpErrors,
  });
  const spec: KonnectivitySpec = uds ? { server: server.address, mode } : { server: server.address, mode, ...files };
  return {
    dir,
    server,
    network,
    spec,
    bytesSize,
    bytesSent: () => sent,
    async close() {
      await server.stop();
      for (const s of sockets) s.destroy();
      await Promise.all([echo, bytes].map((srv) => new Promise((r) => srv.close(r))));
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Reads a stream to its end: byte count and sha256. Rejects when it fails instead of ending. */
export function drain(stream: Duplex): Promise<{ length: number; sha256: string }> {
  return new Promise((resolve, reject) => {
    const h = createHash('sha256');
    let length = 0;
    stream.on('data', (c: Buffer) => {
      h.update(c);
      length += c.length;
    });
    stream.once('end', () => resolve({ length, sha256: h.digest('hex') }));
    stream.once('error', reject);
  });
}

/** Writes payload and reads back as many bytes (the echo backend), with backpressure both ways. */
export function echoRoundTrip(stream: Duplex, payload: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let got = 0;
    const onEnd = () => reject(new Error(`the stream ended after ${got} of ${payload.length} echoed bytes`));
    const onData = (c: Buffer) => {
      parts.push(c);
      got += c.length;
      if (got >= payload.length) {
        stream.off('data', onData);
        stream.off('error', reject);
        stream.off('end', onEnd);
        resolve(Buffer.concat(parts));
      }
    };
    stream.on('data', onData);
    stream.once('error', reject);
    stream.once('end', onEnd);
    let off = 0;
    const write = (): void => {
      while (off < payload.length) {
        const piece = payload.subarray(off, off + 256 * 1024);
        off += piece.length;
        if (!stream.write(piece)) return void stream.once('drain', write);
      }
    };
    write();
  });
}
