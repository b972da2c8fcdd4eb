// The npm package's bin script loads the bundle with V8's code cache (bin/kubectl-proxyout): the
// cache is written once, private (0600 in 0700), accepted on later runs (not rewritten), replaced
// when it does not fit, and never in the way: a corrupt or unwritable cache only costs time, and
// NODE_DISABLE_COMPILE_CACHE=1 writes none. The package is laid out as npm installs it (bin/ and
// dist/pkg/ side by side) in a temporary directory. Cached bytecode runs as code, so a cache
// directory another user owns is never used, and one of ours open to others is closed first.
// The bundle, unlike node_modules, gets Node's deprecation warnings for what its dependencies use:
// none may reach a user's terminal.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { repoRoot, startProxyProcess } from '../helpers/proxy-process.js';
import { startTestCluster } from '../helpers/cluster.js';
import { curl } from '../helpers/curl.js';
import { SAMPLE } from '../sim/sample.js';

let dir: string;
let bin: string;

function run(args: string[], env: NodeJS.ProcessEnv, nodeFlags: string[] = [], cwd?: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [...nodeFlags, bin, ...args],
      { encoding: 'utf8', timeout: 60_000, env: { PATH: process.env.PATH, ...env }, cwd },
      (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
    );
  });
}

before(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'proxyout-codecache-'));
  const built = await new Promise<number>((resolve) =>
    execFile(process.execPath, [path.join(repoRoot, 'scripts', 'package.mjs'), '--bundle-only'], { cwd: repoRoot }, (err) => resolve(err ? 1 : 0)),
  );
  assert.equal(built, 0, 'the bundle builds');
  const pkg = path.join(dir, 'pkg');
  mkdirSync(path.join(pkg, 'bin'), { recursive: true });
  mkdirSync(path.join(pkg, 'dist', 'pkg'), { recursive: true });
  bin = path.join(pkg, 'bin', 'kubectl-proxyout');
  copyFileSync(path.join(repoRoot, 'bin', 'kubectl-proxyout'), bin);
  copyFileSync(path.join(repoRoot, 'bin', 'package.json'), path.join(pkg, 'bin', 'package.json'));
  copyFileSync(path.join(repoRoot, 'dist', 'pkg', 'kubectl-proxyout.cjs'), path.join(pkg, 'dist', 'pkg', 'kubectl-proxyout.cjs'));
  // As in the npm package: "type": "module" for the package, bin/package.json's "commonjs" for the
  // extensionless bin script.
  writeFileSync(path.join(pkg, 'package.json'), JSON.stringify({ name: 'kubectl-proxyout', type: 'module' }));
});
after(() => rmSync(dir, { recursive: true, force: true }));

/**
 * A cache of the test's own: the environment for run() and the directory the bin script keeps its
 * cache under there (compileCacheDir in bin/kubectl-proxyout: ~/Library/Caches on macOS, which
 * only HOME moves; $XDG_CACHE_HOME elsewhere).
 */
function ownCache(name: string): { env: NodeJS.ProcessEnv; cacheHome: string } {
  const base = path.join(dir, name);
  if (process.platform === 'darwin') return { env: { HOME: base }, cacheHome: path.join(base, 'Library', 'Caches') };
  return { env: { XDG_CACHE_HOME: base, HOME: dir }, cacheHome: base };
}

function cacheFiles(cacheHome: string): string[] {
  const v8 = path.join(cacheHome, 'kubectl-proxyout', 'v8');
  return existsSync(v8) ? readdirSync(v8).map((f) => path.join(v8, f)) : [];
}

test(
  'bin script: the code cache is written once (0600 in 0700), accepted after, and the output is the same',
  { skip: process.platform === 'win32' && 'POSIX modes' },
  async () => {
    const { env, cacheHome } = ownCache('cache-a');
    const first = await run(['--help'], env);
    assert.equal(first.code, 0, first.stderr);
    assert.match(first.stdout, /^USAGE/m);
    const [file, ...more] = cacheFiles(cacheHome);
    assert.ok(file, 'a cache file was written');
    assert.deepEqual(more, [], 'one cache file');
    assert.match(path.basename(file), new RegExp(`^bundle-[0-9a-f]{32}-${process.version.replace(/\./g, '\\.')}-${process.arch}\\.bin$`));
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.equal(statSync(path.dirname(file)).mode & 0o777, 0o700);
    const written = readFileSync(file);
    const mtime = statSync(file).mtimeMs;

    const second = await run(['--help'], env);
    assert.equal(second.code, 0, second.stderr);
    assert.equal(second.stdout, first.stdout);
    assert.equal(statSync(file).mtimeMs, mtime, 'an accepted cache is not written again');
    assert.deepEqual(readFileSync(file), written);

    // A cache V8 rejects (here: garbage) still runs, and is replaced by a good one.
    writeFileSync(file, Buffer.alloc(written.length, 0x5a));
    const third = await run(['status'], { ...env, KUBECTL_PROXYOUT_STATE_DIR: path.join(dir, 'state') });
    assert.equal(third.code, 0, third.stderr);
    assert.match(third.stdout, /no managed proxies/);
    assert.notDeepEqual(readFileSync(file), Buffer.alloc(written.length, 0x5a), 'the rejected cache was replaced');
  },
);

test(
  'bin script: a relative $XDG_CACHE_HOME is ignored (XDG: invalid), not a cache in every working directory',
  { skip: process.platform !== 'linux' && 'XDG_CACHE_HOME is read on Linux only' },
  async () => {
    const home = path.join(dir, 'home-relative-xdg');
    const cwd = path.join(dir, 'some-project');
    mkdirSync(cwd, { recursive: true });
    const r = await run(['--help'], { HOME: home, XDG_CACHE_HOME: 'relative-cache' }, [], cwd);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(readdirSync(cwd), [], 'nothing written where the command ran');
    assert.equal(cacheFiles(path.join(home, '.cache')).length, 1, 'the cache is in ~/.cache');
  },
);

test(
  'bin script: NODE_DISABLE_COMPILE_CACHE=1 writes no cache; an unwritable cache directory only costs time',
  { skip: process.platform === 'win32' && 'POSIX modes' },
  async () => {
    const off = ownCache('cache-off');
    const r = await run(['--help'], { ...off.env, NODE_DISABLE_COMPILE_CACHE: '1' });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^USAGE/m);
    assert.equal(existsSync(path.join(off.cacheHome, 'kubectl-proxyout')), false);

    // A file where the cache directory should be: mkdir fails, the command does not.
    const blocked = ownCache('cache-blocked');
    mkdirSync(blocked.cacheHome, { recursive: true });
    writeFileSync(path.join(blocked.cacheHome, 'kubectl-proxyout'), 'not a directory');
    chmodSync(blocked.cacheHome, 0o500);
    const b = await run(['--help'], blocked.env);
    assert.equal(b.code, 0, b.stderr);
    assert.match(b.stdout, /^USAGE/m);
    assert.equal(b.stderr, '');
  },
);

test(
  'bin script: a cache directory of another user is not used; one of ours open to others is narrowed to 0700',
  { skip: process.getuid?.() !== 0 && 'needs root to make a directory another user owns' },
  async () => {
    const foreign = ownCache('cache-foreign');
    const v8 = path.join(foreign.cacheHome, 'kubectl-proxyout', 'v8');
    mkdirSync(v8, { recursive: true, mode: 0o700 });
    chownSync(v8, 65534, 65534);
    const r = await run(['--help'], foreign.env);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^USAGE/m);
    assert.deepEqual(readdirSync(v8), [], 'nothing read or written there');

    const open = ownCache('cache-open');
    const ours = path.join(open.cacheHome, 'kubectl-proxyout', 'v8');
    mkdirSync(ours, { recursive: true });
    chmodSync(ours, 0o777);
    const o = await run(['--help'], open.env);
    assert.equal(o.code, 0, o.stderr);
    assert.equal(statSync(ours).mode & 0o777, 0o700);
    assert.equal(cacheFiles(open.cacheHome).length, 1);
  },
);

test(
  "bin script: a bundle of the same size and mtime (an npm upgrade) never runs the old bundle's bytecode",
  { skip: process.platform === 'win32' && 'POSIX modes' },
  async () => {
    const { env, cacheHome } = ownCache('cache-upgrade');
    const bundleFile = path.join(dir, 'pkg', 'dist', 'pkg', 'kubectl-proxyout.cjs');
    const original = readFileSync(bundleFile, 'latin1');
    const before = statSync(bundleFile);
    try {
      const first = await run(['--help'], env);
      assert.equal(first.code, 0, first.stderr);
      assert.match(first.stdout, /A kubectl\/oc plugin that gives you/);
      // The same bundle with one word changed, same length, the same mtime: what npm installs.
      const changed = original.replace('A kubectl/oc plugin that gives you', 'A KUBECTL/OC PLUGIN THAT GIVES YOU');
      assert.equal(changed.length, original.length);
      assert.notEqual(changed, original);
      writeFileSync(bundleFile, changed, 'latin1');
      utimesSync(bundleFile, before.atime, before.mtime);
      const second = await run(['--help'], env);
      assert.equal(second.code, 0, second.stderr);
      assert.match(second.stdout, /A KUBECTL\/OC PLUGIN THAT GIVES YOU/, 'the new bundle runs');
      assert.equal(cacheFiles(cacheHome).length, 2, 'one cache per bundle');
    } finally {
      writeFileSync(bundleFile, original, 'latin1');
    }
  },
);

test(
  'bin script: a cache file another user could write is not read',
  { skip: process.getuid?.() !== 0 && 'needs root to give a file to another user' },
  async () => {
    const { env, cacheHome } = ownCache('cache-planted');
    assert.equal((await run(['--help'], env)).code, 0);
    const [file] = cacheFiles(cacheHome);
    // A good cache, but owned by someone else: used, it would stay as it is (an accepted cache is
    // not written again); not read, a fresh one of ours replaces it.
    chownSync(file!, 65534, 65534);
    const r = await run(['--help'], env);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^USAGE/m);
    assert.equal(statSync(file!).uid, process.getuid!(), 'the foreign file was not used but replaced');
  },
);

/** The LD_PRELOAD library test/helpers/large-malloc-log.c built into `dir`, or why it cannot be. */
async function largeMallocLog(): Promise<string | { skip: string }> {
  if (process.platform !== 'linux') return { skip: 'an LD_PRELOAD malloc log needs Linux and glibc' };
  const lib = path.join(dir, 'large-malloc-log.so');
  const source = path.join(repoRoot, 'test', 'helpers', 'large-malloc-log.c');
  const built = await new Promise<Error | null>((resolve) => execFile('cc', ['-shared', '-fPIC', '-O2', '-o', lib, source, '-ldl'], (err) => resolve(err)));
  return built ? { skip: `no C compiler to build the malloc log (${built.message.split('\n')[0]})` } : lib;
}

test('bin script: loading the bundle mallocs no block near its size to free (glibc would keep its trim threshold high)', async (t) => {
  const lib = await largeMallocLog();
  if (typeof lib !== 'string') return t.skip(lib.skip);
  const bundleSize = statSync(path.join(dir, 'pkg', 'dist', 'pkg', 'kubectl-proxyout.cjs')).size;
  const min = Math.floor(bundleSize / 2);
  const { env } = ownCache('cache-malloc');
  // Cache cold (it is written), warm (it is read), and off.
  for (const [what, extra] of [
    ['cold cache', {}],
    ['warm cache', {}],
    ['cache off', { NODE_DISABLE_COMPILE_CACHE: '1' }],
  ] as const) {
    const log = path.join(dir, `mallocs-${what.replace(' ', '-')}.txt`);
    const r = await run(['--help'], { ...env, ...extra, LD_PRELOAD: lib, LARGE_MALLOC_LOG: log, LARGE_MALLOC_MIN: String(min) });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^USAGE/m);
    const allocs = existsSync(log)
      ? readFileSync(log, 'utf8')
          .split('\n')
          .filter((l) => l.startsWith('alloc'))
      : [];
    // One block that large: the bundle's text, which the program keeps as its compiled script's
    // source (freed only when the process tears down). Any other (a read buffer, a copy to hash)
    // would be freed while it runs.
    assert.deepEqual(allocs, [`alloc ${bundleSize}`], `${what}: blocks of ≥ ${min} bytes (the bundle is ${bundleSize})`);
  }
  // The log sees a block handed out and given back.
  const probe = path.join(dir, 'mallocs-probe.txt');
  const script = `let b = Buffer.alloc(${bundleSize}); b = null; require('v8').setFlagsFromString('--expose-gc'); require('vm').runInNewContext('gc')();`;
  await new Promise<void>((resolve, reject) =>
    execFile(process.execPath, ['-e', script], { env: { ...process.env, LD_PRELOAD: lib, LARGE_MALLOC_LOG: probe, LARGE_MALLOC_MIN: String(min) } }, (err) =>
      err ? reject(err) : resolve(),
    ),
  );
  const seen = readFileSync(probe, 'utf8');
  assert.match(seen, new RegExp(`^alloc ${bundleSize}$`, 'm'), 'a Buffer of the bundle size is logged');
  assert.match(seen, new RegExp(`^free ${bundleSize}$`, 'm'), 'and its free at the collection');
});

test('bundle: no Node deprecation warning on stderr, the pending ones shown too (doctor, a proxy, a request)', async (t) => {
  const cluster = await startTestCluster();
  t.after(() => cluster.close());
  // Node 21+ warns at run time about what Node 20 warns of only with this flag: the built-in
  // punycode (node-fetch's URL parser) would print DEP0040 at every start of the package and binary.
  const pending = ['--pending-deprecation'];
  const env = { ...ownCache('cache-warnings').env, KUBECTL_PROXYOUT_STATE_DIR: path.join(dir, 'state-warnings') };
  // A port of its own to check: another proxy on 1080 is not this test's business.
  const doctor = await run(['doctor', '--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0'], env, pending);
  assert.equal(doctor.code, 0, doctor.stderr);
  assert.match(doctor.stdout, /all checks passed/);
  assert.deepEqual(
    doctor.stderr.split('\n').filter((l) => /^\(node:\d+\) /.test(l)),
    [],
    "Node's own warning lines on stderr",
  );
  const proxy = await startProxyProcess(['--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0'], {
    command: [process.execPath, ...pending, bin],
    env,
  });
  try {
    const r = await curl(['--proxy', `socks5h://${proxy.socks}`, `http://${SAMPLE.web.service}:${SAMPLE.web.servicePort}/`]);
    assert.equal(r.code, 0, r.stderr);
  } finally {
    // stop() fails the test on any "(node:PID) …" line the proxy wrote.
    await proxy.stop();
  }
});
