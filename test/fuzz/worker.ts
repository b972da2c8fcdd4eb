// Worker entry: runs one target's fuzzing loop (engine.ts) and reports back. Before every input
// it copies the input into shared memory and bumps a counter, so the runner's watchdog can tell
// a hang from a slow run and knows which input hung even if this thread never yields again.
import { parentPort, workerData } from 'node:worker_threads';
import { minimise, runEngine, type FuzzTarget } from './engine.js';

export interface WorkerInput {
  target: string;
  /** fuzz: replay then mutate; minimise: report which corpus entries to keep. */
  mode: 'fuzz' | 'minimise';
  seconds: number;
  maxExecs?: number;
  seed: number;
  corpus: Uint8Array[];
  /** [0]: exec counter, [1]: length of the current input; the bytes follow at offset 8. */
  shared: SharedArrayBuffer;
}

const input = workerData as WorkerInput;
const header = new Int32Array(input.shared, 0, 2);
const bytes = new Uint8Array(input.shared, 8);

async function loadTarget(name: string): Promise<FuzzTarget> {
  if (name === 'socks') return (await import('./targets/socks.js')).socksTarget;
  if (name === 'http') return (await import('./targets/http.js')).httpTarget;
  if (name === 'spdy') return (await import('./targets/spdy.js')).spdyTarget;
  if (name === 'websocket') return (await import('./targets/websocket.js')).webSocketTarget;
  if (name === 'selftest') return (await import('./targets/selftest.js')).selftestTarget;
  if (name === 'selftest-hang') return (await import('./targets/selftest.js')).selftestHangTarget;
  throw new Error(`unknown fuzz target "${name}"`);
}

const target = await loadTarget(input.target);
if (input.mode === 'minimise') {
  parentPort!.postMessage({
    keep: await minimise(
      target,
      input.corpus.map((c) => Buffer.from(c)),
    ),
  });
} else {
  const result = await runEngine(target, {
    seconds: input.seconds,
    maxExecs: input.maxExecs,
    seed: input.seed,
    corpus: input.corpus.map((c) => Buffer.from(c)),
    beforeExec(current) {
      const n = Math.min(current.length, bytes.length);
      bytes.set(current.subarray(0, n));
      Atomics.store(header, 1, n);
      Atomics.add(header, 0, 1);
    },
  });
  parentPort!.postMessage(result);
}
