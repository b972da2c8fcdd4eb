// Recovery: how soon the proxy serves again after what a laptop lives through, and how many client
// requests fail on the way (target 0 after the wake or the return, whatever failed before).
// - A freeze (SIGSTOP, BENCH_RECOVERY_FREEZE_S, default 120 s) while the cluster moves on: pods
//   replaced, history compacted, watches ended, a Service created. From SIGCONT: time to the first
//   answer of that Service, and every failed request (one client, requests back to back, 5 s).
// - A dead path (a relay that stops carrying bytes, BENCH_RECOVERY_DEAD_S, default 60 s): from the
//   path's return, time to the first answer, and the requests that failed after it.
// Each scenario has its own simulated cluster and proxy.
import path from 'node:path';
import { startTestCluster, apiGet, type TestCluster } from '../test/helpers/cluster.js';
import { startTcpGate } from '../test/helpers/tcp-gate.js';
import { socks5Connect } from '../test/helpers/socks-client.js';
import { startBenchProxy } from './npm-layout.js';
import { countFailure, describeFailures, type Failures } from './multiplex.js';
import { reasonOf } from './measure.js';

const FREEZE_S = Number(process.env.BENCH_RECOVERY_FREEZE_S ?? 120);
const DEAD_S = Number(process.env.BENCH_RECOVERY_DEAD_S ?? 60);
const AFTER_MS = 5_000;

/** One GET through the proxy; undefined when it answered, else why not. */
async function request(socks: string, host: string, port: number): Promise<string | undefined> {
  let socket: Awaited<ReturnType<typeof socks5Connect>>['socket'] | undefined;
  try {
    const r = await socks5Connect(socks, host, port);
    socket = r.socket;
    if (r.reply !== 0) return `SOCKS reply ${r.reply}`;
    socket.removeAllListeners('data');
    if (r.rest.length) socket.unshift(r.rest);
    const text = await answerOf(socket);
    return /hello from/.test(text) ? undefined : `unexpected answer: ${text.slice(0, 60) || '(none)'}`;
  } catch (err) {
    return reasonOf(err);
  } finally {
    socket?.destroy();
  }
}

/** An HTTP/1.0 GET: the answer, read until the server closes (or 10 s pass). */
function answerOf(socket: import('node:net').Socket): Promise<string> {
  return new Promise((resolve) => {
    let text = '';
    const timer = setTimeout(() => resolve(text), 10_000);
    socket.setEncoding('utf8');
    socket.on('data', (c: string) => (text += c));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(text);
    });
    socket.resume();
    socket.write('GET / HTTP/1.0\r\nHost: bench\r\n\r\n');
  });
}

/** Requests back to back for `ms` to every host: failures by reason, and when `watched` first answered. */
async function requestsFor(
  socks: string,
  targets: Array<[string, number]>,
  watched: string,
  ms: number,
): Promise<{ failures: Failures; failed: number; total: number; firstOk?: number }> {
  const started = Date.now();
  const failures: Failures = {};
  let failed = 0;
  let total = 0;
  let firstOk: number | undefined;
  while (Date.now() - started < ms) {
    for (const [host, port] of targets) {
      const why = await request(socks, host, port);
      total++;
      if (why) {
        failed++;
        countFailure(failures, `${host}:${port}: ${why}`);
      } else if (host === watched && firstOk === undefined) firstOk = Date.now() - started;
    }
  }
  return { failures, failed, total, firstOk };
}

async function addService(cluster: TestCluster, name: string): Promise<void> {
  await cluster.sim.createPod({ namespace: 'shop', name: `${name}-1`, labels: { app: name }, ports: [{ containerPort: 8080, backend: 'http' }] });
  await cluster.sim.createService({ namespace: 'shop', name, selector: { app: name }, ports: [{ name: 'http', port: 80, targetPort: 8080 }] });
}

function line(what: string, r: Awaited<ReturnType<typeof requestsFor>>, from: string): string {
  const first = r.firstOk === undefined ? `no answer within ${AFTER_MS / 1000} s of ${from}` : `first answer ${r.firstOk} ms after ${from}`;
  const verdict = r.failed === 0 ? 'met' : 'NOT met';
  const reasons = r.failed ? `: ${describeFailures(r.failures)}` : '';
  return `  ${what}: ${first}; ${r.failed} of ${r.total} requests failed (target 0) — ${verdict}${reasons}`;
}

async function freeze(): Promise<string> {
  const cluster = await startTestCluster();
  const proxy = await startBenchProxy(['--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--log-level', 'warn']);
  try {
    for (const host of ['web.shop', 'api.shop']) await request(proxy.socks!, host, host === 'web.shop' ? 8080 : 80);
    proxy.proc.kill('SIGSTOP');
    const pods = await apiGet(cluster.sim, '/api/v1/namespaces/shop/pods?labelSelector=app%3Dweb');
    for (const pod of pods.items as Array<{ metadata: { name: string } }>) await cluster.sim.deletePod('shop', pod.metadata.name);
    for (let i = 0; i < 2; i++)
      await cluster.sim.createPod({
        namespace: 'shop',
        name: `web-slept-${i}`,
        labels: { app: 'web' },
        ports: [{ name: 'http', containerPort: 8081, backend: 'http' }],
      });
    await addService(cluster, 'slept');
    cluster.sim.compact();
    cluster.sim.dropWatches();
    await new Promise((r) => setTimeout(r, FREEZE_S * 1000));
    proxy.proc.kill('SIGCONT');
    const r = await requestsFor(
      proxy.socks!,
      [
        ['slept.shop', 80],
        ['web.shop', 8080],
        ['api.shop', 80],
      ],
      'slept.shop',
      AFTER_MS,
    );
    return line(`after a ${FREEZE_S} s freeze (SIGSTOP; pods replaced, history compacted, a Service created)`, r, 'SIGCONT');
  } finally {
    proxy.proc.kill('SIGCONT');
    cluster.sim.endLingeringStreams();
    await proxy.stop();
    await cluster.close();
  }
}

async function deadPath(): Promise<string> {
  const cluster = await startTestCluster();
  const api = new URL(cluster.sim.server);
  const gate = await startTcpGate({ host: api.hostname, port: Number(api.port) });
  const kubeconfig = path.join(cluster.dir, 'via-gate');
  await cluster.sim.writeKubeconfig(kubeconfig, { namespace: 'shop', server: gate.url });
  const proxy = await startBenchProxy(['--kubeconfig', kubeconfig, '--listen-socks', '127.0.0.1:0', '--log-level', 'warn']);
  try {
    await request(proxy.socks!, 'web.shop', 8080);
    gate.set('blackhole');
    await new Promise((r) => setTimeout(r, DEAD_S * 1000));
    gate.set('pass');
    const r = await requestsFor(
      proxy.socks!,
      [
        ['web.shop', 8080],
        ['api.shop', 80],
      ],
      'web.shop',
      AFTER_MS,
    );
    return line(`after a ${DEAD_S} s dead path (bytes silently dropped, then flowing)`, r, "the path's return");
  } finally {
    gate.set('pass');
    cluster.sim.endLingeringStreams();
    await proxy.stop();
    await gate.close();
    await cluster.close();
  }
}

export async function reportRecovery(): Promise<void> {
  console.log('\nRecovery (time to serve again, and client requests failed on the way):');
  console.log(await freeze());
  console.log(await deadPath());
}
