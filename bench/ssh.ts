// SSH jump hosts: our ssh route against OpenSSH's own ways through the same two-hop chain (the
// ssh lab: jump1 → jump2 in network namespaces, an echo server on the target behind them).
//   (a) proxy, ssh route      SOCKS5 → one kept SSH connection, a direct-tcpip channel per stream
//   (b) ssh -D                OpenSSH dynamic forwarding (a SOCKS5 server on loopback)
//   (c) ssh -W                a new `ssh -W target:port jump2` per connection (ProxyCommand style)
// Root and network namespaces are needed; without them the section says why and is skipped.
import { spawn, type ChildProcess } from 'node:child_process';
import { copyFile, mkdir, writeFile } from 'node:fs/promises';
import { Duplex } from 'node:stream';
import net from 'node:net';
import path from 'node:path';
import { sshLabUnavailable, startSshLab, TARGET } from '../test/helpers/ssh-lab.js';
import { startBenchProxy } from './npm-layout.js';
import { socksOpener, type Opener } from './multiplex.js';
import { bulkEcho, firstByteLatency, median } from './measure.js';

export async function reportSsh(kubeconfig: string, bulkBytes: number, rounds: number, latencyRounds: number): Promise<void> {
  const unavailable = sshLabUnavailable();
  if (unavailable) {
    console.log(`\nSSH jump hosts: skipped (${unavailable})`);
    return;
  }
  const lab = await startSshLab();
  const children: ChildProcess[] = [];
  let proxy: Awaited<ReturnType<typeof startBenchProxy>> | undefined;
  try {
    const home = path.join(lab.dir, 'home');
    await mkdir(path.join(home, '.ssh'), { recursive: true, mode: 0o700 });
    const knownHosts = path.join(home, '.ssh', 'known_hosts');
    await writeFile(knownHosts, `${lab.knownHostsLines.jump1}\n${lab.knownHostsLines.jump2}\n`);
    const sshConfig = path.join(home, '.ssh', 'config');
    await copyFile(lab.writeConfig('bench', { all: [`IdentityFile ${lab.userKey}`, `UserKnownHostsFile ${knownHosts}`, 'BatchMode yes'] }), sshConfig);
    const config = path.join(lab.dir, 'proxyout.yaml');
    await writeFile(config, `routes:\n  - name: jump\n    kind: ssh\n    ssh: { host: jump2 }\n    cidrs: [10.77.23.0/24]\n`);
    proxy = await startBenchProxy(['--kubeconfig', kubeconfig, '--config', config, '--listen-socks', '127.0.0.1:0', '--log-level', 'warn'], {
      env: { HOME: home, SSH_AUTH_SOCK: '' },
    });
    const dPort = await freePort();
    const d = spawn('ssh', ['-F', sshConfig, '-N', '-D', `127.0.0.1:${dPort}`, 'jump2'], { stdio: 'ignore' });
    children.push(d);
    await waitForPort(dPort);
    const sshW: Opener = async () => {
      const child = spawn('ssh', ['-F', sshConfig, '-W', `${TARGET.ip}:${TARGET.echoPort}`, 'jump2'], { stdio: ['pipe', 'pipe', 'ignore'] });
      return Duplex.from({ readable: child.stdout!, writable: child.stdin! }).on('close', () => child.kill());
    };
    const openers: Record<string, Opener> = {
      '(a) proxy, ssh route': socksOpener(proxy.socks!, TARGET.ip, TARGET.echoPort),
      '(b) ssh -D': socksOpener(`127.0.0.1:${dPort}`, TARGET.ip, TARGET.echoPort),
      '(c) ssh -W per connection': sshW,
    };
    const mibs: Record<string, number[]> = {};
    for (let r = 0; r < rounds; r++)
      for (const [name, open] of Object.entries(openers)) (mibs[name] ??= []).push(await bulkEcho(open, bulkBytes, `${name}, round ${r + 1}`));
    console.log('\nSSH jump hosts (two hops, network namespaces): echo through the chain');
    console.log('path                          MiB/s   first byte p50 ms   p99 ms');
    const figures: Record<string, { mibs: number; p50: number }> = {};
    for (const [name, open] of Object.entries(openers)) {
      const lat = await firstByteLatency(open, name.startsWith('(c)') ? Math.min(20, latencyRounds) : latencyRounds, name);
      figures[name] = { mibs: median(mibs[name]!), p50: lat.p50 };
      console.log(`${name.padEnd(27)} ${figures[name].mibs.toFixed(1).padStart(7)}   ${lat.p50.toFixed(2).padStart(17)}   ${lat.p99.toFixed(2).padStart(6)}`);
    }
    const [a, b] = [figures['(a) proxy, ssh route']!, figures['(b) ssh -D']!];
    console.log(`(a) vs ssh -D: throughput ${(a.mibs / b.mibs).toFixed(2)} ×, first byte ${(a.p50 / b.p50).toFixed(2)} ×`);
  } finally {
    await proxy?.stop();
    for (const c of children) c.kill();
    await lab.close();
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

async function waitForPort(port: number): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => (s.destroy(), resolve(true)));
      s.once('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`ssh -D did not listen on ${port}`);
}
