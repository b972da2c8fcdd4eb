// Measurements shared by the bench's tables (run.ts, latency.ts).
import type { Duplex } from 'node:stream';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import type { Opener } from './multiplex.js';

export interface FirstByte {
  p50: number;
  p99: number;
}

/** How long an echo may take before the round is a failure ("no echo within …"), never a slow sample. */
export const ECHO_TIMEOUT_MS = 10_000;

/** "opening failed: connect ECONNREFUSED …": an error's first line, for a failure's reason. */
export function reasonOf(err: unknown): string {
  const e = err as { code?: string; message?: string };
  const message = String(e?.message ?? err)
    .split('\n')[0]!
    .slice(0, 120);
  return e?.code && !message.includes(e.code) ? `${e.code}: ${message}` : message;
}

/**
 * `rounds` rounds of connect → one byte → its echo, the paths taking turns within each round so
 * all see the same machine; p50 and p99 per path. A round that fails (the path could not be
 * opened, the byte did not come back, came back different, or not within ECHO_TIMEOUT_MS) stops
 * the bench with the path, the round and the reason: never a sample, never dropped.
 */
export async function interleavedFirstByteRounds(paths: Array<{ name: string; echo: Opener }>, rounds: number): Promise<Record<string, FirstByte>> {
  if (!(rounds >= 1)) throw new RangeError(`first byte: ${rounds} rounds asked; a p50 needs at least one`);
  const times: Record<string, number[]> = {};
  for (let i = 0; i < rounds; i++) {
    for (const p of paths) {
      const started = process.hrtime.bigint();
      let stream: Duplex;
      try {
        stream = await p.echo();
      } catch (err) {
        throw new Error(`${p.name}: first byte, round ${i + 1} of ${rounds}: opening failed: ${reasonOf(err)}`);
      }
      const failure = await roundTrip(stream, Buffer.from('x'), true);
      if (failure) throw new Error(`${p.name}: first byte, round ${i + 1} of ${rounds}: ${failure}`);
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
export async function firstByteLatency(open: Opener, rounds: number, name = 'first byte'): Promise<FirstByte> {
  // A round whose byte does not come back is a failure, never a fast sample: the bench stops.
  const path = [{ name, echo: open }];
  await interleavedFirstByteRounds(path, 5);
  return (await interleavedFirstByteRounds(path, rounds))[name]!;
}

/**
 * Writes `payload` and reads as many bytes back: undefined when they came back equal, else why
 * not — the stream's error, its close before them ("closed after 0 of 1 bytes"), bytes that
 * differ, or nothing within `timeoutMs`. Every way out is an answer: a close or a stall never
 * leaves the caller waiting for ever.
 */
export function roundTrip(stream: Duplex, payload: Buffer, destroy = false, timeoutMs = ECHO_TIMEOUT_MS): Promise<string | undefined> {
  return new Promise((resolve) => {
    let got = Buffer.alloc(0);
    const finish = (failure: string | undefined) => {
      clearTimeout(timer);
      stream.off('data', onData);
      stream.off('error', onError);
      stream.off('close', onClose);
      stream.off('end', onClose);
      // An error after the answer (destroy() of a Duplex.from emits AbortError) is not a failure of
      // this round, and must not crash the bench as an unhandled 'error'.
      stream.on('error', () => undefined);
      if (destroy) stream.destroy();
      resolve(failure);
    };
    const onData = (d: Buffer) => {
      got = Buffer.concat([got, d]);
      if (got.length >= payload.length)
        finish(got.equals(payload) ? undefined : got.length > payload.length ? `${got.length} bytes came back for ${payload.length}` : 'wrong bytes came back');
    };
    const onError = (err: Error) => finish(`stream error: ${reasonOf(err)}`);
    const onClose = () => finish(`closed after ${got.length} of ${payload.length} bytes`);
    const timer = setTimeout(() => finish(`no echo within ${timeoutMs} ms (${got.length} of ${payload.length} bytes)`), timeoutMs);
    stream.on('data', onData);
    stream.on('error', onError);
    stream.once('end', onClose);
    stream.once('close', onClose);
    stream.write(payload);
  });
}

/**
 * Writes `total` bytes and reads them echoed back, each byte checked; MiB/s of payload moved each
 * way. Throws, naming `path` and why, when the path cannot be opened, the stream fails or closes
 * before all came back (a short read), a byte comes back different, or nothing moves for
 * `stallMs`: a failed round is never a figure.
 */
export async function bulkEcho(open: Opener, total: number, path: string, stallMs = 30_000): Promise<number> {
  let stream: Duplex;
  try {
    stream = await open();
  } catch (err) {
    throw new Error(`${path}: bulk echo: opening failed: ${reasonOf(err)}`);
  }
  const chunk = randomBytes(64 * 1024);
  const started = process.hrtime.bigint();
  let received = 0;
  let failed: string | undefined;
  let stall: NodeJS.Timeout | undefined;
  const done = new Promise<void>((resolve, reject) => {
    const fail = (why: string) => {
      if (failed) return;
      failed = why;
      clearTimeout(stall);
      reject(new Error(`${path}: bulk echo of ${total} bytes: ${why}`));
    };
    const arm = () => {
      clearTimeout(stall);
      stall = setTimeout(() => fail(`nothing came back for ${stallMs} ms (${received} of ${total} bytes)`), stallMs);
    };
    arm();
    stream.on('data', (d: Buffer) => {
      if (failed) return;
      // The same chunk is written over and over: byte n must be chunk[n % chunk.length].
      for (let at = 0; at < d.length && received + at < total;) {
        const offset = (received + at) % chunk.length;
        const n = Math.min(d.length - at, chunk.length - offset, total - received - at);
        if (!d.subarray(at, at + n).equals(chunk.subarray(offset, offset + n))) return fail(`wrong bytes at offset ${received + at}`);
        at += n;
      }
      received += d.length;
      arm();
      if (received >= total) {
        clearTimeout(stall);
        resolve();
      }
    });
    stream.on('error', (err) => fail(`stream error after ${received} of ${total} bytes: ${reasonOf(err)}`));
    stream.once('close', () => received < total && fail(`closed after ${received} of ${total} bytes`));
    stream.once('end', () => received < total && fail(`ended after ${received} of ${total} bytes`));
  });
  // The writes stop at the first failure (a stream that fails never drains); done says why.
  done.catch(() => undefined);
  let sent = 0;
  while (sent < total && !failed) {
    sent += chunk.length;
    if (!stream.write(chunk)) await Promise.race([new Promise((r) => stream.once('drain', r)), done.catch(() => undefined)]);
  }
  try {
    await done;
  } finally {
    stream.destroy();
  }
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  return total / (1 << 20) / seconds;
}

/** The median; NaN for no values (printed as such, and judge() says the target cannot be judged). */
export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? NaN;
}

/**
 * A target's verdict: "met" / "NOT met" only on complete data. Any side with failures, or a figure
 * that is missing (NaN, infinite: a median of nothing, a ratio over zero), makes it "cannot be
 * judged" with what is missing.
 */
export function judge(met: boolean, figures: number[], failures: Array<[path: string, count: number]> = []): string {
  const failing = failures.filter(([, n]) => n > 0);
  if (failing.length > 0) return `cannot be judged: ${failing.map(([p, n]) => `${p} had ${n} ${n === 1 ? 'failure' : 'failures'}`).join(', ')}`;
  if (figures.some((f) => !Number.isFinite(f))) return 'cannot be judged: a figure is missing';
  return met ? 'met' : 'NOT met';
}

/**
 * CPU seconds a process has used so far (Linux /proc): the sum of its threads' run time in
 * nanoseconds (`schedstat`), else user + system time in clock ticks (`stat`). Ticks are 10 ms: a
 * 64 MiB round measured in ticks moves by 0.16 s/GiB per tick, more than the differences the
 * benches look for. A thread that exits takes its time out of the sum (neither Node's nor Go's
 * threads do during a round).
 */
export function cpuSecondsOf(pid: number): number {
  if (existsSync(`/proc/${pid}/schedstat`)) {
    let ns = 0;
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
      } catch {
        // The thread exited between the listing and the read.
      }
    }
    return ns / 1e9;
  }
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/**
 * Both estimators, each judged: the ratio of the two medians, and the median of per-round ratios
 * (each proxy round against the kubectl round right beside it in time, which cancels the drift
 * of a shared 2-core machine; the rounds themselves swing by ±20 %).
 */
export function ratioLine(
  what: string,
  ours: number[],
  theirs: number[],
  target?: string,
  ok?: (ratio: number) => boolean,
  /** Whose figures `theirs` are. */
  versus = 'kubectl',
): string {
  const ofMedians = median(ours) / median(theirs);
  const paired = median(ours.map((o, i) => o / theirs[i]!));
  const figures = `${what}: ${ofMedians.toFixed(2)} × ${versus}, paired rounds ${paired.toFixed(2)} ×`;
  if (!target || !ok) return figures;
  const verdict =
    !Number.isFinite(ofMedians) || !Number.isFinite(paired)
      ? judge(false, [ofMedians, paired])
      : ok(ofMedians) && ok(paired)
        ? 'met'
        : ok(ofMedians) || ok(paired)
          ? 'met by one estimator only'
          : 'NOT met';
  return `${figures} (target ${target}: ${verdict})`;
}
