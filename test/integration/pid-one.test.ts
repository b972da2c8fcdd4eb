// The CLI as a container's PID 1 (no init): the kernel drops any signal PID 1 has no handler for,
// so `docker stop` or a pod's deletion is heard only through handlers of our own. Run in a new
// PID namespace (unshare), against an API server that accepts and never answers.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { binPath } from '../helpers/proxy-process.js';

const skip = (process.platform !== 'linux' || process.getuid?.() !== 0) && 'needs root on Linux (a PID namespace)';
let dir: string;
let kubeconfig: string;
let hung: net.Server;
const held: net.Socket[] = [];

before(async () => {
  if (skip) return;
  hung = net.createServer((s) => held.push(s)).listen(0, '127.0.0.1');
  await once(hung, 'listening');
  dir = mkdtempSync(path.join(tmpdir(), 'proxyout-pid1-'));
  kubeconfig = path.join(dir, 'kubeconfig');
  const server = `https://127.0.0.1:${(hung.address() as net.AddressInfo).port}`;
  writeFileSync(
    kubeconfig,
    `apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "${server}", insecure-skip-tls-verify: true}}]\n` +
      `users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n`,
    { mode: 0o600 },
  );
});

after(() => {
  for (const s of held) s.destroy();
  hung?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Starts the CLI as PID 1 of a new PID namespace; resolves with its pid as seen from here. */
async function asPidOne(args: string[]) {
  const proc = spawn('unshare', ['--pid', '--fork', '--mount-proc', process.execPath, binPath, ...args], {
    env: { ...process.env, KUBECONFIG: kubeconfig, KUBECTL_PROXYOUT_STATE_DIR: path.join(dir, 'state') },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  proc.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const exited = once(proc, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  let pid: number | undefined;
  for (const deadline = Date.now() + 10_000; pid === undefined && Date.now() < deadline;) {
    await new Promise((r) => setTimeout(r, 50));
    const children = readFileSync(`/proc/${proc.pid}/task/${proc.pid}/children`, 'utf8').trim();
    if (children) pid = Number(children.split(' ')[0]);
  }
  assert.ok(pid, 'unshare started the CLI');
  assert.match(readFileSync(`/proc/${pid}/status`, 'utf8'), /^NSpid:\s+\d+\s+1$/m, 'the CLI is PID 1 of its namespace');
  return { pid, exited, stderr: () => stderr };
}

for (const [what, args] of [
  ['the foreground proxy', ['--listen-socks', '127.0.0.1:0']],
  ['exec, before CMD runs', ['exec', '--', 'sh', '-c', 'echo CMD ran >&2']],
] as const) {
  test(`${what}, as PID 1, stops at SIGTERM while the API server has not answered yet`, { skip }, async () => {
    const cli = await asPidOne([...args]);
    // Well inside the start, which waits up to 10 s for the API server's answer.
    await new Promise((r) => setTimeout(r, 1_500));
    const sent = Date.now();
    process.kill(cli.pid, 'SIGTERM');
    const [code] = await cli.exited;
    assert.ok(Date.now() - sent < 3_000, `it took ${Date.now() - sent} ms: ${cli.stderr()}`);
    assert.equal(code, 143, cli.stderr());
    assert.doesNotMatch(cli.stderr(), /CMD ran/);
  });
}
