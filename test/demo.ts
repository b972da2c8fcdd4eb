// `npm run demo`: the simulated cluster with sample Services, and the real CLI in front of it.
// For people without a cluster: everything runs on loopback and stops with Ctrl-C.
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { SimCluster } from './sim/cluster.js';
import { seedSampleCluster } from './sim/sample.js';
import { binPath } from './helpers/proxy-process.js';

/** The conventional port if it is free, else any free port. */
async function freeOr(port: number): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(0));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(port)));
  });
}

const sim = await SimCluster.start({ quiet: true });
await seedSampleCluster(sim);
const dir = await mkdtemp(path.join(os.tmpdir(), 'proxyout-demo-'));
const kubeconfig = path.join(dir, 'kubeconfig');
await sim.writeKubeconfig(kubeconfig, { namespace: 'shop', context: 'demo' });

const socksPort = await freeOr(1080);
const httpPort = await freeOr(3128);
const proxy = spawn(
  process.execPath,
  [binPath, '--kubeconfig', kubeconfig, '--listen-socks', `127.0.0.1:${socksPort}`, '--listen-http', `127.0.0.1:${httpPort}`],
  {
    stdio: ['ignore', 'pipe', 'inherit'],
  },
);

let printed = false;
proxy.stdout.setEncoding('utf8').on('data', (text: string) => {
  process.stdout.write(text);
  const socks = /socks5h:\/\/(\S+)/.exec(text)?.[1];
  const http = /HTTP_PROXY=http:\/\/(\S+)/.exec(text)?.[1];
  if (printed || !socks) return;
  printed = true;
  console.log(`
Simulated cluster at ${sim.server} (kubeconfig ${kubeconfig}).
Try, in another terminal:

  curl --proxy socks5h://${socks} http://web.shop.svc.cluster.local:8080/
  curl --proxy socks5h://${socks} http://api.shop/whoami
  curl --proxy socks5h://${socks} http://hello.default/
  curl -x http://${http ?? '…'} http://web.shop:8080/bytes/64 | od -An -tx1 | head -2
  KUBECONFIG=${kubeconfig} kubectl get svc,pods,endpointslices -A

Press Ctrl-C to stop.`);
});

let stopping = false;
async function shutdown(code: number): Promise<void> {
  if (stopping) return;
  stopping = true;
  proxy.kill('SIGTERM');
  await new Promise((r) => proxy.once('exit', r));
  await sim.stop();
  await rm(dir, { recursive: true, force: true });
  process.exit(code);
}
process.on('SIGINT', () => void shutdown(0));
process.on('SIGTERM', () => void shutdown(0));
proxy.once('exit', (code) => {
  if (!stopping) {
    console.error(`the proxy exited with code ${code}`);
    void shutdown(1);
  }
});
