// A foreground proxy's direct route looks up several names at once, as a managed daemon's does:
// the bin script starts libuv's threadpool at 16 threads before Node's loader can start it at 4
// (bin/kubectl-proxyout, sizeThreadpool). With 4, the OS resolver got one direct name at a time,
// and a browser's page of hosts waited behind each look-up in turn. The proxy runs in a network
// namespace whose resolver (`ip netns exec` bind-mounts /etc/netns/NS/resolv.conf) never answers,
// and records the names it is asked.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { binPath, startProxyProcess } from '../helpers/proxy-process.js';
import { scratchDir } from '../helpers/scratch-dir.js';

function netnsUnavailable(): string | undefined {
  if (process.platform !== 'linux' || process.getuid?.() !== 0) return 'needs root on Linux (network namespaces)';
  if (spawnSync('sh', ['-c', 'command -v ip && command -v curl']).status !== 0) return 'ip (iproute2) and curl are needed';
  return undefined;
}

// Prints each name it is asked, once, and never answers.
const SILENT_RESOLVER = `
const seen = new Set();
const s = require('node:dgram').createSocket('udp4');
s.on('message', (m) => {
  const labels = [];
  for (let i = 12; m[i] > 0 && i < m.length; i += m[i] + 1) labels.push(m.subarray(i + 1, i + 1 + m[i]).toString('latin1'));
  const name = labels.join('.');
  if (!seen.has(name)) { seen.add(name); console.log(name); }
});
s.bind(53, '127.0.0.1', () => console.log('ready'));
`;

test('a foreground proxy looks up several direct names at once, and its children get the environment as it was', async (t) => {
  const unavailable = netnsUnavailable();
  if (unavailable) return t.skip(unavailable);
  const ns = `pxopool${process.pid}`;
  const dir = scratchDir('proxyout-threadpool-');
  const children: Array<ReturnType<typeof spawn>> = [];
  t.after(() => {
    for (const c of children) c.kill('SIGKILL');
    spawnSync('ip', ['netns', 'del', ns]);
    rmSync(`/etc/netns/${ns}`, { recursive: true, force: true });
    rmSync(dir, { recursive: true, force: true });
  });
  assert.equal(spawnSync('ip', ['netns', 'add', ns]).status, 0, 'ip netns add');
  spawnSync('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
  mkdirSync(`/etc/netns/${ns}`, { recursive: true });
  // One try of 6 s: in turn, the second name could not be asked before 6 s after the first.
  writeFileSync(`/etc/netns/${ns}/resolv.conf`, 'nameserver 127.0.0.1\noptions timeout:6 attempts:1\n');
  writeFileSync(`/etc/netns/${ns}/hosts`, '127.0.0.1 localhost\n');

  const resolver = spawn('ip', ['netns', 'exec', ns, process.execPath, '-e', SILENT_RESOLVER], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(resolver);
  const asked = new Set<string>();
  let firstAsked = 0;
  let ready!: () => void;
  const resolverReady = new Promise<void>((r) => (ready = r));
  resolver.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    for (const line of chunk.split('\n').filter(Boolean)) {
      if (line === 'ready') ready();
      else {
        firstAsked ||= Date.now();
        asked.add(line);
      }
    }
  });
  await resolverReady;

  const config = path.join(dir, 'routes.yaml');
  writeFileSync(config, 'routes:\n  - name: intranet\n    kind: direct\n    include: [stall.test]\n');
  const proxy = await startProxyProcess(['--config', config, '--listen-socks', '127.0.0.1:0', '--listen-http', 'off', '--connect-timeout', '8s'], {
    command: ['ip', 'netns', 'exec', ns, process.execPath, binPath],
    // Killed with the rest (t.after above) even when it never gets ready.
    onSpawn: (proc) => children.push(proc),
  });
  t.after(() => proxy.stop('SIGKILL'));

  const names = ['a.stall.test', 'b.stall.test', 'c.stall.test'];
  const clients = names.map((name) => {
    const c = spawn('ip', ['netns', 'exec', ns, 'curl', '-s', '--max-time', '10', '--socks5-hostname', proxy.socks!, `http://${name}/`], { stdio: 'ignore' });
    children.push(c);
    return c;
  });
  // Each name reaches the resolver while the others are still unanswered: at once, not in turn.
  const deadline = Date.now() + 30_000;
  while (asked.size < names.length && Date.now() < deadline && (!firstAsked || Date.now() - firstAsked < 5000)) await new Promise((r) => setTimeout(r, 50));
  assert.deepEqual([...asked].sort(), names, 'names the resolver was asked while none was answered');
  for (const c of clients) c.kill('SIGKILL');

  // The pool was sized by the variable, which is taken back: a command exec runs gets the user's environment.
  const { UV_THREADPOOL_SIZE: _unset, ...env } = process.env;
  const run = spawnSync(process.execPath, [binPath, 'exec', '--config', config, '--', 'sh', '-c', 'echo "pool=${UV_THREADPOOL_SIZE-unset}"'], {
    encoding: 'utf8',
    env: { ...env, KUBECTL_PROXYOUT_STATE_DIR: path.join(dir, 'state') },
    timeout: 30_000,
  });
  assert.match(run.stdout, /^pool=unset$/m, run.stderr);
});

test('code preloaded through NODE_OPTIONS, quoted or not, may have started the pool: the size is not claimed then', (t) => {
  if (process.platform === 'win32') return t.skip('the bin script leaves the pool alone on Windows');
  const dir = scratchDir('proxyout-threadpool-preload-');
  const probe = path.join(dir, 'probe.cjs');
  writeFileSync(probe, "process.on('exit', () => process.stderr.write(`\\npool=${globalThis.__proxyoutThreadpool}\\n`));\n");
  const { UV_THREADPOOL_SIZE: _unset, ...env } = process.env;
  const sizeWith = (nodeOptions: string) => {
    const run = spawnSync(process.execPath, [binPath, '--version'], { encoding: 'utf8', env: { ...env, NODE_OPTIONS: nodeOptions } });
    return /^pool=(.*)$/m.exec(run.stderr)?.[1];
  };
  assert.equal(sizeWith(`--require=${probe}`), 'undefined');
  assert.equal(sizeWith(`"--require" "${probe}"`), 'undefined');
  // Without a preload the size is claimed (16): the first test shows the pool has it.
});
