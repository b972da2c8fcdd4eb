// Direct pass-through (routing/direct-route.ts) against no proxy at all: a local echo server of
// the bench's own, reached straight and through the proxy's direct route (SOCKS5). Targets:
// throughput ≥ 0.9×, connect → first byte p50 ≤ +1 ms.
import net from 'node:net';
import { once } from 'node:events';
import { startBenchProxy } from './npm-layout.js';
import { socksOpener, tcpOpener, type Opener } from './multiplex.js';
import { bulkEcho, firstByteLatency, median } from './measure.js';

export async function reportDirect(kubeconfig: string, bulkBytes: number, rounds: number, latencyRounds: number): Promise<void> {
  const echo = net.createServer((s) => s.pipe(s)).listen(0, '127.0.0.1');
  await once(echo, 'listening');
  const port = (echo.address() as net.AddressInfo).port;
  const proxy = await startBenchProxy(['--kubeconfig', kubeconfig, '--listen-socks', '127.0.0.1:0', '--log-level', 'warn', '--direct']);
  try {
    const openers: Record<string, Opener> = {
      'no proxy': tcpOpener('127.0.0.1', port),
      'proxy, direct route': socksOpener(proxy.socks!, '127.0.0.1', port),
    };
    const mibs: Record<string, number[]> = {};
    for (let r = 0; r < rounds; r++) for (const [name, open] of Object.entries(openers)) (mibs[name] ??= []).push(await bulkEcho(open, bulkBytes));
    console.log('\nDirect pass-through (a local echo server of our own)');
    console.log('path                     MiB/s   p50 ms   p99 ms');
    const figures: Record<string, { mibs: number; p50: number; p99: number }> = {};
    for (const [name, open] of Object.entries(openers)) {
      const lat = await firstByteLatency(open, latencyRounds);
      figures[name] = { mibs: median(mibs[name]!), ...lat };
      console.log(`${name.padEnd(22)} ${figures[name].mibs.toFixed(1).padStart(7)}   ${lat.p50.toFixed(2).padStart(6)}   ${lat.p99.toFixed(2).padStart(6)}`);
    }
    const [a, b] = [figures['proxy, direct route']!, figures['no proxy']!];
    console.log(`target throughput ≥ 0.90 × no proxy: ${(a.mibs / b.mibs).toFixed(2)} × — ${a.mibs >= 0.9 * b.mibs ? 'met' : 'NOT met'}`);
    console.log(`target p50 ≤ no proxy + 1 ms: +${(a.p50 - b.p50).toFixed(2)} ms — ${a.p50 - b.p50 <= 1 ? 'met' : 'NOT met'}`);
  } finally {
    await proxy.stop();
    echo.close();
  }
}
