// A loopback port whose connection attempts go unanswered, as an address behind a VPN that is
// down or a firewall that drops: a child process listens with the smallest backlog and never
// accepts (its event loop blocked), and the queue is filled, so the kernel drops further SYNs.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';

const CHILD = `
const s = require('net').createServer().listen({ port: 0, host: '127.0.0.1', backlog: 0 }, () => {
  process.stdout.write(String(s.address().port) + '\\n');
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
});`;

export interface BlackHole {
  port: number;
  close(): void;
}

export async function blackHole(): Promise<BlackHole> {
  const child = spawn(process.execPath, ['-e', CHILD], { stdio: ['ignore', 'pipe', 'inherit'] });
  const [line] = (await once(child.stdout, 'data')) as [Buffer];
  const port = Number(line.toString().trim());
  // Fill the accept queue; these stay half-open (never accepted) until the child dies.
  const fillers = Array.from({ length: 4 }, () => net.connect(port, '127.0.0.1').on('error', () => undefined));
  await new Promise((r) => setTimeout(r, 200));
  return {
    port,
    close: () => {
      for (const f of fillers) f.destroy();
      child.kill('SIGKILL');
    },
  };
}
