// The open-file limit (RLIMIT_NOFILE) the proxy runs under, and how many streams fit in it. Node
// raises the soft limit to the hard one at start, so this is the hard limit a shell's `ulimit -n`
// set (both limits), a container's or a service manager's. Past it, accepting a client fails
// with EMFILE, which libuv handles by closing the connection unseen: the client reads a reset and
// the proxy logs nothing. A --max-streams cap under the limit turns that into a refusal the client
// is told about (SOCKS 0x01, HTTP 503) and the log names; a budget of client connections
// (listeners/connection-budget.ts) keeps files back for the proxy's own.
import { readFile } from 'node:fs/promises';
import { execFile } from 'node:child_process';

/** Files kept back from clients: the runtime's, tunnels, API connections, the control socket, logs. */
const RESERVED = 64;

/** The soft RLIMIT_NOFILE of this process, or undefined when unlimited or unknown (Windows). */
export async function openFileLimit(platform: NodeJS.Platform = process.platform): Promise<number | undefined> {
  try {
    if (platform === 'win32') return undefined;
    if (platform === 'linux') {
      const line = /^Max open files\s+(\S+)/m.exec(await readFile('/proc/self/limits', 'utf8'));
      return parseLimit(line?.[1]);
    }
    // No procfs (macOS): a child shell inherits our limit and prints it.
    const out = await new Promise<string>((resolve, reject) =>
      execFile('/bin/sh', ['-c', 'ulimit -n'], { timeout: 5000 }, (err, stdout) => (err ? reject(err) : resolve(stdout))),
    );
    return parseLimit(out.trim());
  } catch {
    return undefined;
  }
}

function parseLimit(text: string | undefined): number | undefined {
  const n = Number(text);
  return text && Number.isSafeInteger(n) && n > 0 ? n : undefined;
}

/**
 * Streams that fit in `limit` open files: each holds up to two (the client's socket, and a
 * WebSocket's or a direct connection's), beside what the proxy keeps open anyway.
 */
export function streamsWithin(limit: number): number {
  return Math.max(1, Math.floor(clientsWithin(limit) / 2));
}

/** Client connections, open or idle, that fit in `limit` beside what the proxy keeps open anyway. */
export function clientsWithin(limit: number): number {
  return Math.max(1, limit - Math.min(RESERVED, Math.floor(limit / 2)));
}

/**
 * Clients and the upstream files of their streams together: half of what is kept back may go to
 * clients beyond the streams' cap, so that each is still told "too many streams" (SOCKS 0x01, HTTP
 * 503) rather than closed at accept; the other half stays the proxy's own.
 */
export function filesForClients(limit: number): number {
  return Math.max(1, limit - Math.floor(Math.min(RESERVED, Math.floor(limit / 2)) / 2));
}
