// Connection latency with a real network's round trip between the client machine and the API
// server. On loopback a round trip costs almost nothing, so the bench's main tables cannot show
// what each path pays in round trips; here every byte to and from the simulated API server goes
// through a relay that delays it by RTT/2 each way (order kept), and the three port-forward paths
// open fresh connections to the same echo pod: (a) the proxy on a warm SPDY tunnel, (b) the proxy
// with a WebSocket per connection (TCP + TLS + upgrade each time), (c) kubectl port-forward (one
// SPDY tunnel, but it waits for the kubelet's replies before data moves).
import net from 'node:net';
import path from 'node:path';
import { writeFile } from 'node:fs/promises';
import type { SimCluster } from '../test/sim/cluster.js';
import { startBenchProxy } from './npm-layout.js';
import { socksOpener, startKubectlPortForward, tcpOpener, type Opener } from './multiplex.js';
import { firstByteLatency } from './measure.js';

/** A TCP relay to 127.0.0.1:targetPort that holds every chunk oneWayMs before passing it on. */
async function startDelayRelay(targetPort: number, oneWayMs: number): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(targetPort, '127.0.0.1');
    for (const s of [client, upstream]) {
      // Transparent: no Nagle delays of our own on top of the ones we simulate.
      s.setNoDelay(true);
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => undefined);
    }
    const pipe = (from: net.Socket, to: net.Socket) => {
      // Timers of one duration fire in the order they were set: the byte order is kept.
      from.on('data', (chunk: Buffer) => setTimeout(() => to.write(chunk), oneWayMs));
      from.on('end', () => setTimeout(() => to.end(), oneWayMs));
      from.on('close', () => setTimeout(() => to.destroy(), oneWayMs));
    };
    pipe(client, upstream);
    pipe(upstream, client);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise((r) => server.close(() => r()));
    },
  };
}

export async function reportRemoteLatency(sim: SimCluster, dir: string, echoPod: string, rttMs: number, rounds: number): Promise<void> {
  const relay = await startDelayRelay(Number(new URL(sim.server).port), rttMs / 2);
  const kubeconfig = path.join(dir, 'kubeconfig-remote');
  await writeFile(kubeconfig, sim.kubeconfigYaml({ server: `https://127.0.0.1:${relay.port}`, namespace: 'data' }), { mode: 0o600 });
  const base = ['--kubeconfig', kubeconfig, '--listen-socks', '127.0.0.1:0', '--log-level', 'warn'];
  const spdy = await startBenchProxy([...base, '--transport', 'spdy'], { timeoutMs: 60_000 });
  const ws = await startBenchProxy([...base, '--transport', 'websocket'], { timeoutMs: 60_000 });
  const kubectl = await startKubectlPortForward(kubeconfig, 'data', echoPod, 7000);
  const rows: Array<[string, Opener]> = [
    ['(a) proxy, SPDY tunnel', socksOpener(spdy.socks!, 'echo.data', 7000)],
    ['(b) proxy, WebSocket per stream', socksOpener(ws.socks!, 'echo.data', 7000)],
    ...(kubectl ? [['(c) kubectl port-forward', tcpOpener('127.0.0.1', kubectl.port)] as [string, Opener]] : []),
  ];
  console.log(`\nWith ${rttMs} ms round trip to the API server (a delaying relay; ${rounds} fresh connections each): connect → first echoed byte`);
  console.log('path                                p50 ms   p99 ms   p50 in RTTs');
  try {
    for (const [name, open] of rows) {
      const r = await firstByteLatency(open, rounds, name);
      console.log(`${name.padEnd(34)} ${r.p50.toFixed(1).padStart(7)}  ${r.p99.toFixed(1).padStart(7)}   ${(r.p50 / rttMs).toFixed(2).padStart(11)}`);
    }
  } finally {
    kubectl?.stop();
    await Promise.all([spdy.stop(), ws.stop()]);
    await relay.close();
  }
}
