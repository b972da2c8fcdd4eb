// The unparsed pipe (unparsed-pipe-client.ts): what reading the API server's TLS and writing the
// bytes to a local socket costs a Node.js process with no protocol work at all. Set beside the
// proxy's, it shows what the proxy's own WebSocket, SPDY and relay code costs on top; it is no
// strict floor (another batching of the same reads and writes could cost less).
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const client = path.join(path.dirname(fileURLToPath(import.meta.url)), 'unparsed-pipe-client.js');

export interface UnparsedPipe {
  pid: number;
  /** Each connection to it is one port-forward of the pod's port, unparsed. */
  port: number;
  stop(): void;
}

/** Starts the pipe forwarder for `pod`:`port` through the API server `kubeconfig` names. */
export async function startUnparsedPipe(kubeconfig: string, token: string, namespace: string, pod: string, port: number): Promise<UnparsedPipe> {
  const config = await readFile(kubeconfig, 'utf8');
  const server = /^\s*server:\s*(\S+)/m.exec(config)?.[1];
  const ca = /^\s*certificate-authority:\s*(\S+)/m.exec(config)?.[1];
  if (!server || !ca) throw new Error('Node.js unparsed pipe: the kubeconfig names no server or CA file');
  const child = spawn(process.execPath, [client, server, ca, token, namespace, pod, String(port)], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  const listening = await Promise.race([
    new Promise<number>((resolve) => child.stdout.on('data', () => /"port":(\d+)/.test(out) && resolve(Number(/"port":(\d+)/.exec(out)![1])))),
    once(child, 'exit').then(() => Promise.reject(new Error('Node.js unparsed pipe: the forwarder exited before it listened'))),
  ]);
  return { pid: child.pid!, port: listening, stop: () => child.kill('SIGTERM') };
}

/**
 * Reads `bytes` through the pipe (WebSocket and SPDY headers count as bytes: under 0.1 %), then
 * closes: MiB/s from the open to that byte. Throws naming the path when it ends short or stalls.
 */
export async function pipeDownload(pipe: UnparsedPipe, bytes: number, what: string, stallMs = 30_000): Promise<number> {
  const started = performance.now();
  const socket = net.connect(pipe.port, '127.0.0.1');
  let received = 0;
  try {
    await new Promise<void>((resolve, reject) => {
      const stall = setTimeout(() => reject(new Error(`stalled after ${received} bytes`)), stallMs).unref();
      socket.on('data', (chunk: Buffer) => {
        received += chunk.length;
        stall.refresh();
        if (received >= bytes) {
          clearTimeout(stall);
          resolve();
        }
      });
      socket.on('error', reject);
      socket.on('close', () => reject(new Error(`ended after ${received} of ${bytes} bytes`)));
    });
  } catch (err) {
    throw new Error(`${what}: ${err instanceof Error ? err.message : String(err)}`);
  } finally {
    socket.destroy();
  }
  return bytes / 2 ** 20 / ((performance.now() - started) / 1000);
}
