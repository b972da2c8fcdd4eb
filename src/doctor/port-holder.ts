// Which process listens on a TCP port, for doctor's "address in use": on Linux from /proc (the
// listening socket's inode in /proc/net/tcp{,6}, then the process whose fd links to it — what
// `ss -ltnp` reads); elsewhere undefined. Only processes we may read are found (our own, or all as root).
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

export interface PortHolder {
  pid: number;
  /** The program, and the script a runtime (node, python…) runs: never the other arguments, which may hold secrets. */
  program: string;
}

const LISTEN = '0A';

/** The inodes of listening sockets on `port` (any address). */
function listeningInodes(port: number): Set<string> {
  const inodes = new Set<string>();
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
      if (f.length > 9 && f[3] === LISTEN && f[1]!.endsWith(`:${hexPort}`)) inodes.add(f[9]!);
    }
  }
  return inodes;
}

export function portHolder(port: number, platform: NodeJS.Platform = process.platform): PortHolder | undefined {
  return portHolders(port, platform)[0];
}

/**
 * Every process listening on `port`, on any address: the one in the way of a bind is among them,
 * but not always the first (another may hold the same port number on another address).
 */
export function portHolders(port: number, platform: NodeJS.Platform = process.platform): PortHolder[] {
  if (platform !== 'linux') return [];
  const inodes = listeningInodes(port);
  if (inodes.size === 0) return [];
  const wanted = new Set([...inodes].map((i) => `socket:[${i}]`));
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((name) => /^\d+$/.test(name));
  } catch {
    return [];
  }
  const holders: PortHolder[] = [];
  for (const pid of pids) {
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue; // gone, or not ours to read
    }
    for (const fd of fds) {
      let target: string;
      try {
        target = readlinkSync(`/proc/${pid}/fd/${fd}`);
      } catch {
        continue;
      }
      if (!wanted.has(target)) continue;
      let argv: string[] = [];
      try {
        argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
      } catch {
        /* exited meanwhile */
      }
      holders.push({ pid: Number(pid), program: programOf(argv) });
      break;
    }
  }
  return holders;
}

const basename = (file: string) => file.slice(file.lastIndexOf('/') + 1);

/** "kubectl-proxyout", "node kubectl-proxyout", "redis-server": argv[0], and argv[1] after a runtime. */
export function programOf(argv: readonly string[]): string {
  const program = basename((argv[0] ?? '').split(' ')[0]!);
  const runtime = /^(node|nodejs|bun|deno|python[0-9.]*|ruby|perl)$/.test(program);
  const script = runtime ? argv.slice(1).find((a) => !a.startsWith('-')) : undefined;
  return script ? `${program} ${basename(script)}` : program;
}

/** A kubectl-proxyout process: the plugin by its name, the single executable, or node running our bin. */
export function isProxyout(holder: PortHolder): boolean {
  return /(^|\s)kubectl-proxyout(-[a-z0-9-]+)?$/.test(holder.program);
}
