// Small building blocks for the fault and load tests: raw SOCKS5 streams to echo and HTTP pods,
// deadline-bounded waits, and what /proc says about the proxy process.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import type net from 'node:net';
import { once } from 'node:events';
import type { Duplex, Writable } from 'node:stream';
import { socks5Connect, Reader } from './socks-client.js';
import { DeterministicByteStream } from '../sim/cluster.js';

export interface OpenStream {
  socket: net.Socket;
  reader: Reader;
}

/** A SOCKS5 stream that must be accepted; bytes that came with the reply stay readable. */
export async function openStream(socks: string, host: string, port: number): Promise<OpenStream> {
  const { reply, socket, rest } = await socks5Connect(socks, host, port);
  assert.equal(reply, 0, `SOCKS reply for ${host}:${port}`);
  if (rest.length > 0) socket.unshift(rest);
  return { socket, reader: new Reader(socket) };
}

/** Writes payload and reads exactly as many bytes back (an echo round trip). */
export async function roundTrip(s: OpenStream, payload: Buffer, timeoutMs = 10_000): Promise<Buffer> {
  s.socket.write(payload);
  return s.reader.read(payload.length, timeoutMs);
}

/** Sends an HTTP/1.1 GET over a raw stream (Host header is cosmetic for the sim backends). */
export function sendGet(s: OpenStream, path: string, close = false): void {
  s.socket.write(`GET ${path} HTTP/1.1\r\nHost: pod\r\n${close ? 'Connection: close\r\n' : ''}\r\n`);
}

/** Resolves once the socket is closed (by the peer or us); fails the test after timeoutMs. */
export function closedWithin(socket: net.Socket, timeoutMs: number, what = 'stream'): Promise<void> {
  if (socket.destroyed && socket.closed) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what} still open after ${timeoutMs} ms`)), timeoutMs);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve();
    });
    // A reset is a close too (a broken upstream resets its client: listeners/relay.ts).
    socket.on('error', () => undefined);
    socket.resume();
  });
}

/** Open file descriptors of a process (Linux /proc). */
export function fdCount(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

/** Resident set size of a process in bytes (Linux /proc). */
export function rssOf(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) * 1024;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Reads the response to GET /bytes/N from a raw stream: checks every body byte against the
 * simulator's deterministic stream as it arrives, so a cut-short body can still be proven intact.
 */
export class Download {
  status = 0;
  received = 0;
  /** Some body byte differed from what the pod sent. */
  corrupt = false;
  closed = false;
  private head: Buffer | undefined = Buffer.alloc(0);
  private readonly gen = new DeterministicByteStream();
  private waiters: Array<() => void> = [];

  constructor(readonly socket: net.Socket) {
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.once('close', () => {
      this.closed = true;
      this.wake();
    });
    socket.resume();
  }

  private onData(chunk: Buffer): void {
    if (this.head) {
      this.head = Buffer.concat([this.head, chunk]);
      const end = this.head.indexOf('\r\n\r\n');
      if (end < 0) return;
      this.status = Number(/^HTTP\/1\.1 (\d+)/.exec(this.head.toString('latin1'))?.[1] ?? 0);
      chunk = this.head.subarray(end + 4);
      this.head = undefined;
    }
    if (chunk.length === 0) return;
    if (!this.gen.next(chunk.length).equals(chunk)) this.corrupt = true;
    this.received += chunk.length;
    this.wake();
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  /** Until at least n body bytes arrived (or the stream closed); fails after timeoutMs. */
  async until(n: number, timeoutMs = 20_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.received < n && !this.closed) {
      if (Date.now() > deadline) throw new Error(`only ${this.received} of ${n} body bytes within ${timeoutMs} ms`);
      await new Promise<void>((r) => {
        const t = setTimeout(r, 100);
        this.waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
  }
}

/** One GET on a raw stream to an HTTP server (Host: guest); resolves with the whole response once its body is in. */
export function httpGet(stream: Duplex, path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    stream.setEncoding('utf8');
    stream.on('data', (c: string) => {
      text += c;
      const m = /Content-Length: (\d+)\r\n[\s\S]*?\r\n\r\n/i.exec(text);
      if (m && text.length >= text.indexOf('\r\n\r\n') + 4 + Number(m[1])) resolve(text);
    });
    stream.once('error', reject);
    stream.write(`GET ${path} HTTP/1.1\r\nHost: guest\r\n\r\n`);
  });
}

/**
 * Writes 1 MiB chunks to `out` until one has not drained for `quietMs`: nothing moves any more,
 * every buffer on the way to a reader that reads nothing is full. Fails after `maxMiB`.
 */
export async function writeUntilStalled(out: Writable, quietMs = 1000, maxMiB = 512): Promise<void> {
  const chunk = Buffer.alloc(1 << 20, 0x61);
  for (let i = 0; i < maxMiB; i++) {
    if (out.write(chunk)) continue;
    const drained = await Promise.race([once(out, 'drain').then(() => true), sleep(quietMs).then(() => false)]);
    if (!drained) return;
  }
  throw new Error(`${maxMiB} MiB went to a reader that reads nothing`);
}

/** Writes "ping" and resolves with the first chunk an echo sends back (rejects on the stream's error). */
export function echoes(stream: Duplex): Promise<string> {
  const back = new Promise<string>((resolve, reject) => {
    stream.once('data', (d: Buffer) => resolve(d.toString()));
    stream.once('error', reject);
  });
  stream.write('ping');
  return back;
}
