// Throughput and connect → first byte through konnectivity (the simulated apiserver-network-proxy
// server, grpc and http-connect modes, over mutual TLS), against dialling the same loopback
// backends directly. The simulated server folds the agent in, so this measures our dialer, the
// protocol and one extra hop on loopback — not a real server's agent round trip.
// Part of `npm run bench`; on its own (about 10 s):
//   npm run build && node dist/bench/konnectivity.js
import net from 'node:net';
import { pathToFileURL } from 'node:url';
import type { Duplex } from 'node:stream';
import { createKonnectivityDialer } from '../src/konnectivity/dialer.js';
import { GUEST, drain, startKonnectivityBed } from '../test/helpers/konnectivity.js';
import { firstByteLatency } from './measure.js';
import type { Opener } from './multiplex.js';

const BULK = Number(process.env.BENCH_KONNECTIVITY_BYTES ?? 64 * 1024 * 1024);
const ROUNDS = Number(process.env.BENCH_KONNECTIVITY_ROUNDS ?? 200);

export interface KonnectivityRow {
  path: string;
  mibPerSecond: number;
  firstByteP50: number;
  firstByteP99: number;
}

async function measure(path: string, openEcho: Opener, openBytes: Opener): Promise<KonnectivityRow> {
  const latency = await firstByteLatency(openEcho, ROUNDS, path);
  const started = process.hrtime.bigint();
  const got = await drain(await openBytes());
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  if (got.length !== BULK) throw new Error(`${path}: ${got.length} of ${BULK} bytes arrived`);
  return { path, mibPerSecond: BULK / 1024 / 1024 / seconds, firstByteP50: latency.p50, firstByteP99: latency.p99 };
}

function direct(target: { host: string; port: number }): Opener {
  return () =>
    new Promise<Duplex>((resolve, reject) => {
      const s = net.connect(target.port, target.host, () => resolve(s));
      s.once('error', reject);
    });
}

export async function benchKonnectivity(): Promise<KonnectivityRow[]> {
  const rows: KonnectivityRow[] = [];
  for (const mode of ['grpc', 'http-connect'] as const) {
    const bed = await startKonnectivityBed(mode, 'tls', { bytesSize: BULK });
    const dialer = await createKonnectivityDialer(bed.spec);
    try {
      if (rows.length === 0) {
        const echo = await bed.network.resolve(GUEST.echo.ip, GUEST.echo.port);
        const bytes = await bed.network.resolve(GUEST.bytes.ip, GUEST.bytes.port);
        if (typeof echo !== 'object' || typeof bytes !== 'object') throw new Error('the bench bed has no backends');
        rows.push(await measure('direct (loopback)', direct(echo), direct(bytes)));
      }
      const open =
        (t: { ip: string; port: number }): Opener =>
        () =>
          dialer.dial(t.ip, t.port, AbortSignal.timeout(10_000));
      rows.push(await measure(`konnectivity ${mode} (mTLS)`, open(GUEST.echo), open(GUEST.bytes)));
    } finally {
      dialer.close();
      await bed.close();
    }
  }
  return rows;
}

export async function reportKonnectivity(): Promise<void> {
  const rows = await benchKonnectivity();
  console.log(`\nKonnectivity (simulated server, ${BULK / 1024 / 1024} MiB bulk, ${ROUNDS} connects):`);
  console.log(`${'path'.padEnd(34)} MiB/s   connect→first byte p50 / p99 (ms)`);
  for (const r of rows) {
    console.log(`${r.path.padEnd(34)} ${r.mibPerSecond.toFixed(0).padStart(5)}   ${r.firstByteP50.toFixed(2)} / ${r.firstByteP99.toFixed(2)}`);
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await reportKonnectivity();
