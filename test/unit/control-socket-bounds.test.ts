// What one client of a daemon's control socket can make the daemon hold: a client that sends
// requests and never reads the answers (a script that pipes requests in and its output nowhere)
// made the daemon queue every answer, without bound. As a `watch` subscriber that falls behind,
// such a client is cut off once MAX_UNSENT_FEED_BYTES wait for it. Counts, not timings.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startControlServer } from '../../src/managed/control.js';

async function controlServer(t: { after(fn: () => unknown): void }): Promise<string> {
  const dir = mkdtempSync(path.join(tmpdir(), 'proxyout-control-'));
  const sock = path.join(dir, 'control.sock');
  const totals = { openStreams: 0, totalStreams: 0, failedStreams: 0, bytesFromClients: 0, bytesToClients: 0, failuresByReason: {} };
  const server = await startControlServer(sock, { status: () => ({ pid: process.pid, phase: 'running', uptimeMs: 1, totals }), stop: () => undefined });
  t.after(async () => {
    await server.closeWithin(0);
    rmSync(dir, { recursive: true, force: true });
  });
  return sock;
}

/** A client of the control socket, and whether the daemon has closed it. */
async function halfOpenClient(sock: string): Promise<{ socket: net.Socket; closed: () => boolean }> {
  const socket = net.connect({ path: sock, allowHalfOpen: true });
  await once(socket, 'connect');
  let closed = false;
  socket.on('close', () => (closed = true));
  socket.on('error', () => undefined);
  return { socket, closed: () => closed };
}

test('control socket: a client that sends requests and reads no answer is cut off, not queued for', async (t) => {
  const sock = await controlServer(t);
  const client = await halfOpenClient(sock);
  client.socket.pause(); // reads nothing
  const batch = '{"cmd":"status"}\n'.repeat(1000);
  // 100,000 status requests: ~17 MB of answers, past what the daemon may hold for one client (4 MiB).
  for (let i = 0; i < 100 && !client.closed(); i++) {
    if (!client.socket.write(batch)) await new Promise((r) => client.socket.once('drain', r).once('close', r));
  }
  // Let the daemon answer what it has read; then the connection must be gone.
  for (let i = 0; i < 50 && !client.closed(); i++) await new Promise((r) => setTimeout(r, 20));
  client.socket.resume();
  await new Promise((r) => setTimeout(r, 200));
  assert.equal(client.closed(), true, 'the daemon queued answers for a client that reads none');
  client.socket.destroy();
});
