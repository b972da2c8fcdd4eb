// Direct pass-through (routes/direct/route.ts) against no proxy at all. Targets: throughput
// ≥ 0.9×, connect → first byte p50 ≤ +1 ms.
//
// Two places for the destination, both echo servers of the bench's own:
//   - loopback, in this process: nothing limits the rate but CPU. Every byte crosses the kernel
//     twice more through a proxy than without one, and the two cores run the bench, the echo
//     server and the proxy, so no relay reaches 0.9× here; the row "minimal Node relay" (a bare
//     net.Socket pipe in its own process) shows how close any Node relay gets, and so what is the
//     proxy's own overhead and what is the machine's.
//   - a host on a 1 Gbit/s link: an echo server in a network namespace of the bench's own behind
//     a veth pair shaped with tbf to 1 Gbit/s each way (a LAN or VPN host), addressed from the
//     benchmarking range 198.18.0.0/15 (RFC 2544) and checked to route through that veth. This is where the
//     target is judged: a user's direct traffic goes to other machines over a link, and the
//     question is whether the proxy costs them throughput there. Skipped, with the reason, where
//     network namespaces cannot be made (not root, no `ip`/`tc`).
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import net from 'node:net';
import { once } from 'node:events';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { startBenchProxy } from './npm-layout.js';
import { socksOpener, tcpOpener, type Opener } from './multiplex.js';
import { bulkEcho, firstByteLatency, judge, median } from './measure.js';

const LINK = {
  ns: `pxodirect${process.pid}`,
  hostIf: `vpxd${process.pid % 100000}h`,
  nsIf: `vpxd${process.pid % 100000}n`,
  hostIp: '198.18.79.1',
  nsIp: '198.18.79.2',
  rate: '1gbit',
  port: 7000,
};

interface Figures {
  mibs: number;
  p50: number;
  p99: number;
}

async function measure(openers: Record<string, Opener>, bulkBytes: number, rounds: number, latencyRounds: number): Promise<Record<string, Figures>> {
  const mibs: Record<string, number[]> = {};
  for (const [name, open] of Object.entries(openers)) await bulkEcho(open, Math.min(bulkBytes, 32 << 20), `${name} (warm-up)`);
  for (let r = 0; r < rounds; r++)
    for (const [name, open] of Object.entries(openers)) (mibs[name] ??= []).push(await bulkEcho(open, bulkBytes, `${name}, round ${r + 1}`));
  const out: Record<string, Figures> = {};
  for (const [name, open] of Object.entries(openers)) out[name] = { mibs: median(mibs[name]!), ...(await firstByteLatency(open, latencyRounds, name)) };
  return out;
}

function print(title: string, figures: Record<string, Figures>): void {
  console.log(title);
  console.log('path                        MiB/s   p50 ms   p99 ms');
  for (const [name, f] of Object.entries(figures))
    console.log(`${name.padEnd(25)} ${f.mibs.toFixed(1).padStart(7)}   ${f.p50.toFixed(2).padStart(6)}   ${f.p99.toFixed(2).padStart(6)}`);
}

function verdict(where: string, proxy: Figures, none: Figures): string {
  const ratio = proxy.mibs / none.mibs;
  const added = proxy.p50 - none.p50;
  return `${where}: throughput ${ratio.toFixed(2)} × (target ≥ 0.9 ×: ${judge(ratio >= 0.9, [ratio])}), p50 +${added.toFixed(2)} ms (target ≤ +1 ms: ${judge(added <= 1, [added])})`;
}

const MINIMAL_RELAY = `
const net = require('node:net');
const [target] = process.argv.slice(1);
net.createServer((c) => {
  const u = net.connect(Number(target), '127.0.0.1');
  u.setNoDelay(true); c.setNoDelay(true);
  c.pipe(u); u.pipe(c);
  c.on('error', () => u.destroy()); u.on('error', () => c.destroy());
}).listen(0, '127.0.0.1', function () { console.log(this.address().port); });
`;

async function childPort(proc: ChildProcess): Promise<number> {
  const [line] = (await once(proc.stdout!, 'data')) as [Buffer];
  return Number(line.toString().trim());
}

function run(cmd: string, args: string[]): { ok: boolean; err: string } {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  return { ok: r.status === 0, err: (r.stderr || r.stdout || String(r.error ?? '')).trim() };
}

/** The namespace host behind a shaped veth; undefined with the reason when it cannot be made. */
async function startLinkHost(): Promise<{ echo: ChildProcess; close(): void } | string> {
  if (process.getuid?.() !== 0) return 'needs root (network namespaces)';
  for (const tool of ['ip', 'tc']) if (spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0) return `${tool} is not installed (apt-get install iproute2)`;
  const close = () => {
    spawnSync('ip', ['netns', 'del', LINK.ns]);
    spawnSync('ip', ['link', 'del', LINK.hostIf]);
  };
  const steps: Array<[string, string[]]> = [
    ['ip', ['netns', 'add', LINK.ns]],
    ['ip', ['link', 'add', LINK.hostIf, 'type', 'veth', 'peer', 'name', LINK.nsIf, 'netns', LINK.ns]],
    ['ip', ['addr', 'add', `${LINK.hostIp}/30`, 'dev', LINK.hostIf]],
    ['ip', ['link', 'set', LINK.hostIf, 'up']],
    ['ip', ['-n', LINK.ns, 'addr', 'add', `${LINK.nsIp}/30`, 'dev', LINK.nsIf]],
    ['ip', ['-n', LINK.ns, 'link', 'set', LINK.nsIf, 'up']],
    ['ip', ['-n', LINK.ns, 'link', 'set', 'lo', 'up']],
    // 1 Gbit/s each way: tbf on both ends of the pair.
    ['tc', ['qdisc', 'add', 'dev', LINK.hostIf, 'root', 'tbf', 'rate', LINK.rate, 'burst', '256kb', 'latency', '50ms']],
    ['tc', ['-n', LINK.ns, 'qdisc', 'add', 'dev', LINK.nsIf, 'root', 'tbf', 'rate', LINK.rate, 'burst', '256kb', 'latency', '50ms']],
  ];
  // A crash or Ctrl-C must not leave the namespace and the veth behind.
  process.once('exit', close);
  for (const [cmd, args] of steps) {
    const r = run(cmd, args);
    if (!r.ok) {
      close();
      return `${cmd} ${args.join(' ')}: ${r.err}`;
    }
  }
  // The bulk traffic must go through our veth, never by another route off the machine.
  const route = spawnSync('ip', ['route', 'get', LINK.nsIp], { encoding: 'utf8' }).stdout ?? '';
  if (!route.includes(`dev ${LINK.hostIf}`)) {
    close();
    return `${LINK.nsIp} does not route through ${LINK.hostIf}: ${route.trim()}`;
  }
  const echo = spawn(
    'ip',
    [
      'netns',
      'exec',
      LINK.ns,
      process.execPath,
      '-e',
      `require('node:net').createServer((s) => { s.on('error', () => {}); s.pipe(s); }).listen(${LINK.port}, '${LINK.nsIp}', () => console.log('ready'));`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const ready = await Promise.race([once(echo.stdout!, 'data').then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 10_000).unref())]);
  const stop = () => {
    echo.kill();
    close();
    process.off('exit', close);
  };
  if (!ready) {
    stop();
    return 'the echo server in the namespace did not start within 10 s';
  }
  return { echo, close: stop };
}

export async function reportDirect(kubeconfig: string, bulkBytes: number, rounds: number, latencyRounds: number): Promise<void> {
  const echo = net.createServer((s) => s.pipe(s)).listen(0, '127.0.0.1');
  await once(echo, 'listening');
  const port = (echo.address() as net.AddressInfo).port;
  let minimal: ChildProcess | undefined;
  let proxy: Awaited<ReturnType<typeof startBenchProxy>> | undefined;
  let link: Awaited<ReturnType<typeof startLinkHost>> | undefined;
  try {
    minimal = spawn(process.execPath, ['-e', MINIMAL_RELAY, String(port)], { stdio: ['ignore', 'pipe', 'inherit'] });
    const minimalPort = await childPort(minimal);
    // The loopback echo server is reachable only through an allow list (dial-policy.ts).
    const config = path.join(path.dirname(kubeconfig), 'direct-allow.yaml');
    await writeFile(config, 'routes:\n  - name: direct\n    kind: direct\n    allow: [127.0.0.0/8]\n');
    proxy = await startBenchProxy(['--kubeconfig', kubeconfig, '--config', config, '--listen-socks', '127.0.0.1:0', '--log-level', 'warn', '--direct']);
    link = await startLinkHost();
    console.log('\nDirect pass-through (echo servers of our own)');
    const loop = await measure(
      {
        'no proxy': tcpOpener('127.0.0.1', port),
        'proxy, direct route': socksOpener(proxy!.socks!, '127.0.0.1', port),
        'minimal Node relay': tcpOpener('127.0.0.1', minimalPort),
      },
      bulkBytes,
      rounds,
      latencyRounds,
    );
    print('loopback (CPU-bound: the worst case)', loop);
    if (typeof link === 'string') {
      console.log(`a host on a 1 Gbit/s link: skipped (${link})`);
    } else {
      const onLink = await measure(
        { 'no proxy': tcpOpener(LINK.nsIp, LINK.port), 'proxy, direct route': socksOpener(proxy!.socks!, LINK.nsIp, LINK.port) },
        Math.min(bulkBytes, 128 << 20),
        rounds,
        latencyRounds,
      );
      print(`a host on a ${LINK.rate}/s link (network namespace, veth shaped with tbf)`, onLink);
      console.log(verdict('on the link', onLink['proxy, direct route']!, onLink['no proxy']!));
    }
    const relayShare = loop['proxy, direct route']!.mibs / loop['minimal Node relay']!.mibs;
    console.log(
      `${verdict('on loopback', loop['proxy, direct route']!, loop['no proxy']!)}; the proxy moves ${relayShare.toFixed(2)} × what a bare Node relay does`,
    );
  } finally {
    if (link && typeof link !== 'string') link.close();
    minimal?.kill();
    await proxy?.stop();
    echo.close();
  }
}
