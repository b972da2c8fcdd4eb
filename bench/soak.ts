// The soak phase of `npm run bench`: streams held open and echoing through the proxy while the
// cluster misbehaves around them — web pods deleted and replaced, their backends reset, every
// watch dropped — and short downloads from those very pods keep coming. What we want to see:
// held streams (to a pod no fault touches) lose nothing, downloads are intact up to wherever a
// fault cut them, and the proxy's memory stays put.
import { randomBytes } from 'node:crypto';
import type net from 'node:net';
import type { SimCluster } from '../test/sim/cluster.js';
import { socks5Connect } from '../test/helpers/socks-client.js';
import { apiGet } from '../test/helpers/cluster.js';
import { Download, rssOf, sleep } from '../test/helpers/streams.js';
import { reasonOf } from './measure.js';
import { countFailure, describeFailures, type Failures } from './multiplex.js';

export interface SoakOptions {
  seconds: number;
  /** Echo streams held open for the whole soak. */
  held: number;
  /** Concurrent download loops against the pods that get faulted. */
  downloaders: number;
  /** One fault every this many ms, rotating through the three kinds. */
  faultEveryMs: number;
}

export interface SoakResult {
  seconds: number;
  held: number;
  heldCut: number;
  downloads: number;
  downloadsCut: number;
  /** Of those, cut while no fault was injected from their start to their end: not the faults' doing. */
  downloadsCutWithoutFault: number;
  downloadsRefused: number;
  /** Held streams that could not be opened, and downloads refused or failed before their request, by reason. */
  failures: { held: Failures; downloads: Failures };
  bytesMoved: number;
  bytesLost: number;
  faults: { podDeletions: number; backendResets: number; droppedWatches: number };
  rssStart: number;
  rssEnd: number;
}

interface Held {
  socket: net.Socket;
  sent: number;
  echoed: number;
  lost: number;
  cut: boolean;
}

/** One held stream: write a random chunk, wait for exactly it to come back, repeat until `until`; why not when it could not be opened. */
async function holdEcho(socks: string, until: () => boolean): Promise<Held | string> {
  let opened: Awaited<ReturnType<typeof socks5Connect>>;
  try {
    opened = await socks5Connect(socks, 'echo.data.svc.cluster.local', 7000);
  } catch (err) {
    return `SOCKS handshake failed: ${reasonOf(err)}`;
  }
  const { reply, socket, rest } = opened;
  if (reply !== 0) {
    socket.destroy();
    return `SOCKS reply ${reply}`;
  }
  const h: Held = { socket, sent: 0, echoed: 0, lost: 0, cut: false };
  let expected = Buffer.alloc(0);
  let got: Buffer = rest;
  let wake: (() => void) | undefined;
  socket.on('data', (c: Buffer) => {
    got = Buffer.concat([got, c]);
    wake?.();
  });
  socket.once('close', () => {
    h.cut = true;
    wake?.();
  });
  socket.on('error', () => undefined);
  socket.resume();
  while (!until() && !h.cut) {
    expected = randomBytes(1 + Math.floor(Math.random() * 32 * 1024));
    socket.write(expected);
    h.sent += expected.length;
    while (got.length < expected.length && !h.cut) await new Promise<void>((r) => (wake = r));
    const n = Math.min(got.length, expected.length);
    // Bytes that came back different, or never came back, are lost.
    let same = 0;
    while (same < n && got[same] === expected[same]) same++;
    h.echoed += same;
    h.lost += expected.length - same;
    got = got.subarray(n);
    await sleep(Math.random() * 50);
  }
  return h;
}

export async function soak(sim: SimCluster, socks: string, proxyPid: number, o: SoakOptions): Promise<SoakResult> {
  const deadline = Date.now() + o.seconds * 1000;
  const over = () => Date.now() >= deadline;
  const result: SoakResult = {
    seconds: o.seconds,
    held: o.held,
    heldCut: 0,
    downloads: 0,
    downloadsCut: 0,
    downloadsCutWithoutFault: 0,
    downloadsRefused: 0,
    failures: { held: {}, downloads: {} },
    bytesMoved: 0,
    bytesLost: 0,
    faults: { podDeletions: 0, backendResets: 0, droppedWatches: 0 },
    rssStart: rssOf(proxyPid),
    rssEnd: 0,
  };
  const holding = Array.from({ length: o.held }, () => holdEcho(socks, over));

  const faultsSoFar = (): number => result.faults.podDeletions + result.faults.backendResets + result.faults.droppedWatches;
  const download = async (): Promise<void> => {
    while (!over()) {
      const size = 1024 + Math.floor(Math.random() * (1 << 20));
      // A handshake that fails (reset, closed) is counted with its reason like a refusal; thrown,
      // it would end this loop and, unhandled until the soak ends, the whole bench.
      const opened = await socks5Connect(socks, 'web.shop.svc.cluster.local', 8080).catch((err: unknown) => `SOCKS handshake failed: ${reasonOf(err)}`);
      if (typeof opened === 'string' || opened.reply !== 0) {
        result.downloadsRefused++;
        countFailure(result.failures.downloads, typeof opened === 'string' ? opened : `SOCKS reply ${opened.reply}`);
        if (typeof opened !== 'string') opened.socket.destroy();
        await sleep(50);
        continue;
      }
      const { socket, rest } = opened;
      if (rest.length) socket.unshift(rest);
      socket.on('error', () => undefined);
      const d = new Download(socket);
      const faultsBefore = faultsSoFar();
      socket.write(`GET /bytes/${size} HTTP/1.1\r\nHost: web\r\nConnection: close\r\n\r\n`);
      await new Promise((r) => socket.once('close', r));
      result.downloads++;
      result.bytesMoved += d.received;
      if (d.corrupt) result.bytesLost += d.received;
      if (d.received < size) {
        result.downloadsCut++;
        if (faultsSoFar() === faultsBefore) result.downloadsCutWithoutFault++;
      }
    }
  };
  const downloading = Array.from({ length: o.downloaders }, download);

  let replacement = 0;
  for (let i = 0; !over(); i++) {
    await sleep(o.faultEveryMs);
    if (over()) break;
    const list = await apiGet<{ items: Array<{ metadata: { name: string; labels?: Record<string, string>; deletionTimestamp?: string } }> }>(
      sim,
      '/api/v1/namespaces/shop/pods',
    );
    const pods = list.items.filter((p) => p.metadata.labels?.app === 'web' && !p.metadata.deletionTimestamp).map((p) => p.metadata.name);
    const victim = pods[Math.floor(Math.random() * pods.length)];
    if (!victim) continue;
    if (i % 3 === 0) {
      await sim.deletePod('shop', victim);
      await sim.createPod({ namespace: 'shop', name: `web-soak-${++replacement}`, labels: { app: 'web' }, ports: [{ name: 'http', containerPort: 8081 }] });
      result.faults.podDeletions++;
    } else if (i % 3 === 1) {
      sim.resetPodConnections('shop', victim);
      result.faults.backendResets++;
    } else {
      sim.dropWatches();
      result.faults.droppedWatches++;
    }
  }

  await Promise.all(downloading);
  result.rssEnd = rssOf(proxyPid);
  for (const h of await Promise.all(holding)) {
    if (typeof h === 'string') {
      countFailure(result.failures.held, h);
      continue;
    }
    result.bytesMoved += h.sent + h.echoed;
    result.bytesLost += h.lost;
    if (h.cut) result.heldCut++;
    h.socket.destroy();
  }
  return result;
}

/** The soak's line in the bench report: every held stream that failed to open and every refused download, with its reason. */
export function describeSoak(r: SoakResult, mib: (bytes: number) => string): string {
  const f = r.faults;
  const heldFailed = Object.values(r.failures.held).reduce((a, b) => a + b, 0);
  return (
    `soak ${r.seconds} s: ${r.held} streams held (${heldFailed} could not be opened: ${describeFailures(r.failures.held)}; ${r.heldCut} cut), ` +
    `${r.downloads} downloads (${r.downloadsCut} cut short, ${r.downloadsCutWithoutFault} of them with no fault injected meanwhile; ${r.downloadsRefused} refused: ${describeFailures(r.failures.downloads)}), ` +
    `${mib(r.bytesMoved)} MiB moved; faults: ${f.podDeletions} pod deletions, ${f.backendResets} backend resets, ${f.droppedWatches} dropped watches; ` +
    `bytes lost ${r.bytesLost}; proxy RSS ${mib(r.rssStart)} → ${mib(r.rssEnd)} MiB`
  );
}
