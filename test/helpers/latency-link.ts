// A link with a round-trip time, for benchmarks: a TCP relay on loopback that delivers each chunk
// half the round trip after it arrived, in order, in both directions. The kernel's netem qdisc
// would do this below TCP, but this machine's kernel lacks it; a relay in a process of its own is
// the stand-in. What it models: every round trip a protocol makes (TLS handshakes, upgrades, flow-
// control windows: SPDY WINDOW_UPDATE, HTTP/2) costs the link's RTT. What it does not: loss, and
// TCP's own window over the link — each side's TCP runs on loopback; the relay bounds what it holds
// in flight per direction (IN_FLIGHT_CAP, about the bandwidth-delay product of 1 Gbit/s at 80 ms).
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import { fileURLToPath } from 'node:url';

const IN_FLIGHT_CAP = 16 << 20;

export interface LatencyLink {
  /** Where clients connect: 127.0.0.1:port. */
  host: string;
  port: number;
  rttMs: number;
  pid: number;
  stop(): Promise<void>;
}

/** Starts the relay in a child process (its CPU is not the measured processes'). */
export async function startLatencyLink(target: { host: string; port: number }, rttMs: number): Promise<LatencyLink> {
  const child: ChildProcess = spawn(process.execPath, [fileURLToPath(import.meta.url), target.host, String(target.port), String(rttMs)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      const m = /^listening (\d+)\n/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    child.once('exit', (code) => reject(new Error(`latency link exited (${code}) before listening`)));
  });
  return {
    host: '127.0.0.1',
    port,
    rttMs,
    pid: child.pid!,
    stop: async () => {
      if (child.exitCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** One direction: chunks wait until due, then are written in order; reading pauses past the cap. */
function delayedPipe(from: net.Socket, to: net.Socket, oneWayMs: number): void {
  const queue: Array<{ due: number; chunk: Buffer }> = [];
  let held = 0;
  let timer: NodeJS.Timeout | undefined;
  let ended = false;
  let draining = false;
  const flush = () => {
    timer = undefined;
    const now = performance.now();
    // A receiver that does not keep up holds the chunks here (and so, past the cap, the sender).
    while (queue.length > 0 && queue[0]!.due <= now && to.writableLength < IN_FLIGHT_CAP) {
      const { chunk } = queue.shift()!;
      held -= chunk.length;
      to.write(chunk);
    }
    if (held <= IN_FLIGHT_CAP && from.isPaused()) from.resume();
    if (queue.length > 0 && queue[0]!.due <= now) {
      if (!draining) {
        draining = true;
        to.once('drain', () => {
          draining = false;
          if (timer === undefined) flush();
        });
      }
    } else if (queue.length > 0) timer = setTimeout(flush, Math.max(0, queue[0]!.due - now));
    else if (ended) to.end();
  };
  from.on('data', (chunk: Buffer) => {
    queue.push({ due: performance.now() + oneWayMs, chunk });
    held += chunk.length;
    if (held > IN_FLIGHT_CAP) from.pause();
    timer ??= setTimeout(flush, oneWayMs);
  });
  from.on('end', () => {
    ended = true;
    timer ??= setTimeout(flush, oneWayMs);
  });
}

function serve(targetHost: string, targetPort: number, rttMs: number): void {
  const oneWay = rttMs / 2;
  const sockets = new Set<net.Socket>();
  const server = net.createServer({ noDelay: true }, (client) => {
    const upstream = net.connect({ host: targetHost, port: targetPort, noDelay: true });
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      // A reset on one side resets the other, one way-time later, as a link would carry it.
      s.on('error', () => setTimeout(() => (s === client ? upstream : client).destroy(), oneWay));
    }
    delayedPipe(client, upstream, oneWay);
    delayedPipe(upstream, client, oneWay);
  });
  server.listen(0, '127.0.0.1', () => process.stdout.write(`listening ${(server.address() as net.AddressInfo).port}\n`));
  process.on('SIGTERM', () => {
    for (const s of sockets) s.destroy();
    server.close(() => process.exit(0));
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) serve(process.argv[2]!, Number(process.argv[3]), Number(process.argv[4]));
