// The baseline: a minimal port-forward client (v4.channel.k8s.io over `ws`) with no proxy in
// front, as a program that links client-go or client-node would open it. Independent of src/.
import { Duplex } from 'node:stream';
import WebSocket from 'ws';
import type { SimCluster } from '../test/sim/cluster.js';

export function barePortForward(sim: SimCluster, namespace: string, pod: string, port: number): Promise<Duplex> {
  const url = `${sim.server.replace(/^https/, 'wss')}/api/v1/namespaces/${namespace}/pods/${pod}/portforward?ports=${port}`;
  const ws = new WebSocket(url, ['v4.channel.k8s.io'], { ca: sim.caPem, headers: { Authorization: `Bearer ${sim.adminToken}` }, perMessageDeflate: false });
  const seenPrefix = [false, false];
  const stream = new Duplex({
    write(chunk: Buffer, _enc, cb) {
      ws.send(Buffer.concat([Buffer.from([0]), chunk]), cb);
    },
    read() {
      if (ws.isPaused) ws.resume();
    },
    destroy(err, cb) {
      ws.terminate();
      cb(err);
    },
  });
  return new Promise((resolve, reject) => {
    ws.on('message', (data: Buffer) => {
      const ch = data[0];
      let payload = data.subarray(1);
      if (!seenPrefix[ch]) {
        seenPrefix[ch] = true;
        payload = payload.subarray(2);
        if (seenPrefix[0] && seenPrefix[1]) resolve(stream);
      }
      if (ch === 0 && payload.length && !stream.push(payload)) ws.pause();
    });
    ws.on('error', (err) => {
      reject(err);
      stream.destroy(err);
    });
    ws.on('close', () => stream.push(null));
  });
}
