// Measurements shared by the bench's tables (run.ts, latency.ts).
import type { Duplex } from 'node:stream';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Opener } from './multiplex.js';

export interface FirstByte {
  p50: number;
  p99: number;
}

/**
 * `rounds` rounds of connect → one byte → its echo, the paths taking turns within each round so
 * all see the same machine; p50 and p99 per path. A byte that does not come back stops the bench.
 */
export async function interleavedFirstByteRounds(paths: Array<{ name: string; echo: Opener }>, rounds: number): Promise<Record<string, FirstByte>> {
  const times: Record<string, number[]> = {};
  for (let i = 0; i < rounds; i++) {
    for (const p of paths) {
      const started = process.hrtime.bigint();
      const ok = await roundTrip(await p.echo(), Buffer.from('x'), true);
      if (!ok) throw new Error(`${p.name}: the first byte did not come back`);
      (times[p.name] ??= []).push(Number(process.hrtime.bigint() - started) / 1e6);
    }
  }
  const out: Record<string, FirstByte> = {};
  for (const [name, t] of Object.entries(times)) {
    t.sort((a, b) => a - b);
    out[name] = { p50: t[Math.floor(t.length * 0.5)]!, p99: t[Math.min(t.length - 1, Math.floor(t.length * 0.99))]! };
  }
  return out;
}

/** Connect, send one byte, wait for its echo: the time a client waits for its first byte (after 5 warm-ups). */
export async function firstByteLatency(open: Opener, rounds: number): Promise<FirstByte> {
  // A round whose byte does not come back is a failure, never a fast sample: the bench stops.
  const path = [{ name: 'first byte', echo: open }];
  await interleavedFirstByteRounds(path, 5);
  return (await interleavedFirstByteRounds(path, rounds))['first byte']!;
}

export function roundTrip(stream: Duplex, payload: Buffer, destroy = false): Promise<boolean> {
  return new Promise((resolve) => {
    let got = Buffer.alloc(0);
    const onData = (d: Buffer) => {
      got = Buffer.concat([got, d]);
      if (got.length >= payload.length) {
        stream.off('data', onData);
        if (destroy) stream.destroy();
        resolve(got.equals(payload));
      }
    };
    stream.on('data', onData);
    stream.once('error', () => resolve(false));
    stream.write(payload);
  });
}

/** Writes `total` bytes and reads them echoed back; MiB/s of payload moved each way. */
export async function bulkEcho(open: Opener, total: number): Promise<number> {
  const stream = await open();
  const chunk = randomBytes(64 * 1024);
  const started = process.hrtime.bigint();
  let received = 0;
  const done = new Promise<void>((resolve, reject) => {
    stream.on('data', (d: Buffer) => {
      received += d.length;
      if (received >= total) resolve();
    });
    stream.on('error', reject);
  });
  let sent = 0;
  while (sent < total) {
    sent += chunk.length;
    if (!stream.write(chunk)) await new Promise((r) => stream.once('drain', r));
  }
  await done;
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  stream.destroy();
  return total / (1 << 20) / seconds;
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

/** CPU seconds (user + system) a process has used so far (Linux /proc). */
export function cpuSecondsOf(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}
