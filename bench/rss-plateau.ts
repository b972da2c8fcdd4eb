// Does the proxy's memory grow with connections served? Four rounds of 15 s churn (16 clients:
// open a SOCKS5 stream to the echo pod, one byte each way, close), RSS 4 s after each round.
//   node dist/bench/rss-plateau.js            (MALLOC_ARENA_MAX=N in the environment is passed to the proxy)
import { readFileSync } from 'node:fs';
import { startTestCluster } from '../test/helpers/cluster.js';
import { startBenchProxy } from './npm-layout.js';
import { socks5Connect } from '../test/helpers/socks-client.js';

const rss = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;
const cluster = await startTestCluster({ namespace: 'data' });
const proxy = await startBenchProxy(['--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--log-level', 'warn']);
const pid = proxy.proc.pid!;

async function churn(ms: number): Promise<number> {
  let n = 0;
  const until = Date.now() + ms;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (Date.now() < until) {
        const { reply, socket, rest } = await socks5Connect(proxy.socks!, 'echo.data', 7000);
        if (reply !== 0) throw new Error(`SOCKS reply ${reply}`);
        socket.write('x');
        await new Promise<void>((r) => {
          if (rest.length) return r();
          socket.once('data', () => r());
          socket.resume();
        });
        socket.destroy();
        n++;
      }
    }),
  );
  return n;
}

const line = [`start ${rss(pid).toFixed(0)} MiB`];
for (let i = 0; i < 4; i++) {
  const n = await churn(15_000);
  await new Promise((r) => setTimeout(r, 4_000));
  line.push(`${n} connections → ${rss(pid).toFixed(0)} MiB`);
}
console.log(`proxy RSS (MALLOC_ARENA_MAX=${process.env.MALLOC_ARENA_MAX ?? 'unset'}): ${line.join('; ')}`);
await proxy.stop();
await cluster.close();
process.exit(0);
