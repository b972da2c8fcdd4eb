// The test bed's processes (real-cluster.ts): each component started with its log in the cluster's
// directory, killed with the test process (setpriv's parent-death signal, and an exit hook), its
// unexpected exit reported, and stopped with SIGTERM then SIGKILL.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createWriteStream, existsSync, readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';

const SETPRIV = process.platform === 'linux' && existsSync('/usr/bin/setpriv') ? '/usr/bin/setpriv' : undefined;
const live = new Set<ChildProcess>();
// kube-apiserver stops listening and ends every watch at once on SIGTERM, then waits 60 s for its
// own loopback HTTP/2 connections to go idle (secure_serving.go: "Failed to shutdown server:
// context deadline exceeded"). Only port-forward tunnels already open would last longer: not
// waited for, as a kubelet's grace period would not.
const API_SERVER_GRACE_MS = 1_500;
process.on('exit', () => {
  for (const proc of live) proc.kill('SIGKILL');
});

function spawnComponent(file: string, args: string[], cwd: string): ChildProcess {
  const proc = SETPRIV
    ? spawn(SETPRIV, ['--pdeathsig', 'KILL', '--', file, ...args], { stdio: ['ignore', 'pipe', 'pipe'], cwd })
    : spawn(file, args, { stdio: ['ignore', 'pipe', 'pipe'], cwd });
  live.add(proc);
  proc.on('exit', () => live.delete(proc));
  return proc;
}

interface Component {
  name: string;
  proc: ChildProcess;
  log: string;
  exited?: { code: number | null; signal: NodeJS.Signals | null };
  stopping: boolean;
}

/** The last lines of a file, or "(no log)". */
export function tail(file: string, lines = 25): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/** A loopback port free a moment ago. */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  const srv = net.createServer();
  srv.listen(0, host);
  await once(srv, 'listening');
  const port = (srv.address() as net.AddressInfo).port;
  srv.close();
  await once(srv, 'close');
  return port;
}

export class Components {
  private readonly running = new Map<string, Component>();
  /** The whole bed is stopping: exits are expected. */
  private stopped = false;

  constructor(
    private readonly dir: string,
    private readonly progress: (line: string) => void,
  ) {}

  /** Starts `file` as component `name`, its output appended to `<dir>/<name>.log`. */
  launch(name: string, file: string, args: string[]): void {
    const log = path.join(this.dir, `${name}.log`);
    const out = createWriteStream(log, { flags: 'a' });
    const proc = spawnComponent(file, args, this.dir);
    proc.stdout!.pipe(out, { end: false });
    proc.stderr!.pipe(out, { end: false });
    const c: Component = { name, proc, log, stopping: false };
    proc.on('exit', (code, signal) => {
      c.exited = { code, signal };
      if (!c.stopping && !this.stopped) this.progress(`${name} exited (${code ?? signal}):\n${tail(log)}`);
    });
    this.running.set(name, c);
  }

  /** Throws (with its log's last lines) when a component exited that nobody stopped. */
  assertHealthy(): void {
    for (const c of this.running.values()) {
      if (c.exited && !c.stopping)
        throw new Error(`real cluster: ${c.name} exited (${c.exited.code ?? c.exited.signal}); last lines of ${c.log}:\n${tail(c.log)}`);
    }
  }

  /** SIGTERM, then SIGKILL after graceMs; forgets it. */
  async stop(name: string, graceMs = name.startsWith('kube-apiserver') ? API_SERVER_GRACE_MS : 5_000): Promise<void> {
    const c = this.running.get(name);
    if (!c) return;
    c.stopping = true;
    if (!c.exited) {
      const exit = once(c.proc, 'exit');
      c.proc.kill('SIGCONT'); // a test may have left it frozen
      c.proc.kill('SIGTERM');
      const killer = setTimeout(() => {
        this.progress(`${c.name} still running ${graceMs} ms after SIGTERM: SIGKILL`);
        c.proc.kill('SIGKILL');
      }, graceMs);
      await exit;
      clearTimeout(killer);
    }
    this.running.delete(name);
  }

  /** SIGKILL at once (a component that dies, not one stopped); forgets it. */
  async kill(name: string): Promise<void> {
    const c = this.running.get(name);
    if (!c) return;
    c.stopping = true;
    if (!c.exited) {
      const exit = once(c.proc, 'exit');
      c.proc.kill('SIGKILL');
      await exit;
    }
    this.running.delete(name);
  }

  /** Sends a signal to a running component (SIGSTOP/SIGCONT: a component that hangs, and resumes). */
  signal(name: string, sig: NodeJS.Signals): void {
    const c = this.running.get(name);
    if (!c || c.exited) throw new Error(`real cluster: ${name} is not running`);
    c.proc.kill(sig);
  }

  /** Stops the named components in this order, then any others. */
  async stopAll(order: string[]): Promise<void> {
    this.stopped = true;
    for (const name of [...order, ...this.running.keys()]) await this.stop(name);
  }

  /** Polls check() until it gives a value, failing early when a component dies. */
  async waitFor<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    let last: unknown;
    for (;;) {
      this.assertHealthy();
      try {
        const v = await check();
        if (v !== undefined) return v;
      } catch (err) {
        last = err;
      }
      if (Date.now() > deadline) throw new Error(`real cluster: ${what} not within ${timeoutMs} ms${last ? `: ${String(last)}` : ''}`);
      await delay(100);
    }
  }

  /** Each component's last log lines, for an error message. */
  logs(lines = 15): string {
    return [...this.running.values()].map((c) => `--- ${c.name} (${c.log}):\n${tail(c.log, lines)}`).join('\n');
  }
}
