// How users get it: the krew manifest rendered from the built archive passes krew's manifest
// rules (internal/index/validation/validate.go) and, installed the way krew lays plugins out
// (store/<plugin>/<version>/ + bin/kubectl-<plugin>, receipts aside), runs as `kubectl proxyout`
// through kubectl's plugin discovery with no node on PATH; `npm pack` ships what a user needs and
// nothing else, and the tarball installed into a temporary global prefix runs as `kubectl proxyout`.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, readdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import yaml from 'js-yaml';
import { repoRoot } from '../helpers/proxy-process.js';
import { packagedArchive, skipUnlessPackaged } from '../helpers/package.js';
import { krewBinary } from '../helpers/krew.js';

const kubectl = spawnSync('sh', ['-c', 'command -v kubectl'], { encoding: 'utf8' }).stdout.trim();
const noKubectl = kubectl ? false : 'kubectl is not installed';
let dir: string;
let kubectlOnly: string;

before(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'proxyout-dist-'));
  kubectlOnly = path.join(dir, 'kubectl-only');
  mkdirSync(kubectlOnly);
  if (kubectl) symlinkSync(kubectl, path.join(kubectlOnly, 'kubectl'));
});
after(() => rmSync(dir, { recursive: true, force: true }));

function run(file: string, args: string[], opts: { env?: NodeJS.ProcessEnv; cwd?: string } = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(file, args, { encoding: 'utf8', timeout: 120_000, maxBuffer: 16 << 20, ...opts }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
    );
  });
}

interface Platform {
  selector?: { matchLabels?: Record<string, string>; matchExpressions?: Array<{ key: string }> };
  uri?: string;
  sha256?: string;
  bin?: string;
  files?: Array<{ from?: string; to?: string }>;
}
interface KrewPlugin {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string };
  spec?: { version?: string; shortDescription?: string; description?: string; caveats?: string; platforms?: Platform[] };
}

/** krew's ValidatePlugin(name, p) and validatePlatform/validateSelector, rule for rule; the first problem, or undefined. */
function krewProblem(name: string, p: KrewPlugin): string | undefined {
  if (p.apiVersion !== 'krew.googlecontainertools.github.com/v1alpha2') return `apiVersion ${p.apiVersion}`;
  if (p.kind !== 'Plugin') return `kind ${p.kind}`;
  if (!/^[\w-]+$/.test(name) || /^(CON|PRN|AUX|NUL|COM[1-9]|LPT[1-9])$/i.test(name)) return `unsafe name ${name}`;
  if (p.metadata?.name !== name) return `named ${p.metadata?.name}, not ${name}`;
  const spec = p.spec ?? {};
  if (!spec.shortDescription) return 'no short description';
  if (/[\r\n]/.test(spec.shortDescription)) return 'line break in the short description';
  if (!spec.platforms?.length) return 'no platform';
  if (!spec.version) return 'no version';
  // krew's semver.Parse: a leading "v", then semver 2.0.
  if (!/^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$/.test(spec.version)) return `version ${spec.version}`;
  for (const pl of spec.platforms) {
    if (!pl.uri) return '`uri` has to be set';
    if (!pl.sha256) return '`sha256` sum has to be set';
    if (!/^[a-f0-9]{64}$/.test(pl.sha256)) return `sha256 ${pl.sha256}`;
    if (!pl.bin) return '`bin` has to be set';
    if (pl.files !== undefined && (pl.files.length === 0 || pl.files.some((f) => !f.from || !f.to))) return '`files` is invalid';
    const sel = pl.selector;
    if (!sel) return 'nil selector';
    if (sel.matchLabels === undefined && !sel.matchExpressions?.length) return 'empty selector';
    const keys = [...Object.keys(sel.matchLabels ?? {}), ...(sel.matchExpressions ?? []).map((e) => e.key)];
    if (keys.some((k) => k !== 'os' && k !== 'arch')) return `selector key ${keys.find((k) => k !== 'os' && k !== 'arch')}`;
    if (sel.matchLabels !== undefined && Object.keys(sel.matchLabels).length === 0) return '`matchLabels` specified but empty';
    if (sel.matchExpressions !== undefined && sel.matchExpressions.length === 0) return '`matchExpressions` specified but empty';
  }
  return undefined;
}

const GOOS: Record<string, string> = { linux: 'linux', darwin: 'darwin', win32: 'windows' };
const GOARCH: Record<string, string> = { x64: 'amd64', arm64: 'arm64' };

test('the krew manifest validator refuses what krew refuses', () => {
  const good: KrewPlugin = {
    apiVersion: 'krew.googlecontainertools.github.com/v1alpha2',
    kind: 'Plugin',
    metadata: { name: 'proxyout' },
    spec: { version: 'v0.1.0', shortDescription: 'x', platforms: [{ selector: { matchLabels: { os: 'linux' } }, uri: 'u', sha256: 'a'.repeat(64), bin: 'b' }] },
  };
  assert.equal(krewProblem('proxyout', good), undefined);
  const broken = (change: (p: any) => void) => {
    const p = structuredClone(good) as any;
    change(p);
    return krewProblem('proxyout', p);
  };
  assert.match(broken((p) => (p.spec.version = '0.1.0')) ?? '', /version/);
  assert.match(broken((p) => (p.spec.platforms[0].sha256 = 'A'.repeat(64))) ?? '', /sha256/);
  assert.match(broken((p) => (p.spec.platforms[0].selector = { matchLabels: { distro: 'x' } })) ?? '', /selector key distro/);
  assert.match(broken((p) => (p.spec.shortDescription = 'a\nb')) ?? '', /line break/);
  assert.match(broken((p) => delete p.spec.platforms[0].bin) ?? '', /bin/);
});

test('krew: the caveats say to stop the background proxies before an uninstall, which leaves them running', async () => {
  // krew runs no hook of the plugin's at uninstall (nor npm at `npm uninstall -g`): the daemons and
  // a login service go on, with no plugin left to stop them. Any archive name will do here.
  const archive = path.join(dir, 'kubectl-proxyout-linux-amd64.tar.gz');
  writeFileSync(archive, 'not an archive');
  const r = await run(process.execPath, [path.join(repoRoot, 'scripts', 'krew-manifest.mjs'), '--base-url', 'https://example.com/v0.1.0', archive]);
  assert.equal(r.code, 0, r.stderr);
  const caveats = (yaml.load(r.stdout) as KrewPlugin).spec?.caveats ?? '';
  assert.match(caveats, /Before `kubectl krew uninstall proxyout`.*\n +kubectl proxyout quit; kubectl proxyout service-uninstall/);
});

test("krew: a --version that is not package.json's is refused, not a manifest for a plugin that says another", async () => {
  // The release renders with --version set to its tag; the archives were built from package.json.
  const archive = path.join(dir, 'kubectl-proxyout-linux-amd64.tar.gz');
  writeFileSync(archive, 'not an archive');
  const pkg = (JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { version: string }).version;
  const script = path.join(repoRoot, 'scripts', 'krew-manifest.mjs');
  const r = await run(process.execPath, [script, '--version', 'v99.0.0', '--base-url', 'https://example.com/v99.0.0', archive]);
  assert.equal(r.code, 1, r.stdout);
  assert.equal(r.stdout, '');
  assert.match(r.stderr, new RegExp(`^--version v99\\.0\\.0: the archives are of version ${pkg.replaceAll('.', '\\.')} \\(package\\.json`));
  const same = await run(process.execPath, [script, '--version', `v${pkg}`, '--base-url', 'https://example.com/x', archive]);
  assert.equal(same.code, 0, same.stderr);
});

test(
  'krew: the rendered manifest passes krew rules; installed the krew way it runs as `kubectl proxyout` without node',
  { skip: skipUnlessPackaged(packagedArchive) || noKubectl },
  async () => {
    const version = `v${(JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { version: string }).version}`;
    const baseUrl = 'https://github.com/example/kubectl-proxyout/releases/download/' + version;
    const out = path.join(dir, 'proxyout.yaml');
    const r = await run(process.execPath, [
      path.join(repoRoot, 'scripts', 'krew-manifest.mjs'),
      '--base-url',
      baseUrl,
      '--version',
      version,
      '--out',
      out,
      packagedArchive,
    ]);
    assert.equal(r.code, 0, r.stderr);
    const manifest = yaml.load(readFileSync(out, 'utf8')) as KrewPlugin;
    assert.equal(krewProblem('proxyout', manifest), undefined);
    assert.match(manifest.spec!.caveats ?? '', /kubectl proxyout --context/);
    assert.ok((manifest.spec!.shortDescription ?? '').length <= 50);

    // What krew does: pick the platform whose selector matches this os/arch, check the archive's
    // sha256, unpack it into store/<name>/<version>/, link bin/kubectl-<name> to its `bin`.
    const mine = manifest.spec!.platforms!.find(
      (p) => p.selector?.matchLabels?.os === GOOS[process.platform] && p.selector?.matchLabels?.arch === GOARCH[process.arch],
    );
    assert.ok(mine, 'a platform for this machine');
    assert.equal(mine.uri, `${baseUrl}/${path.basename(packagedArchive)}`);
    assert.equal(mine.sha256, createHash('sha256').update(readFileSync(packagedArchive)).digest('hex'));
    const krewRoot = path.join(dir, 'krew');
    const store = path.join(krewRoot, 'store', 'proxyout', version);
    mkdirSync(store, { recursive: true });
    mkdirSync(path.join(krewRoot, 'bin'));
    const untar = await run('tar', ['-xzf', packagedArchive, '-C', store]);
    assert.equal(untar.code, 0, untar.stderr);
    const completer = process.platform === 'win32' ? 'kubectl_complete-proxyout.cmd' : 'kubectl_complete-proxyout';
    assert.deepEqual(readdirSync(store).sort(), ['LICENSE', 'README.md', completer, mine.bin!].sort());
    symlinkSync(path.join(store, mine.bin!), path.join(krewRoot, 'bin', 'kubectl-proxyout'));
    // krew links only the plugin; docs/usage.md has users copy the completer beside that link.
    copyFileSync(path.join(store, completer), path.join(krewRoot, 'bin', completer));

    const env = { PATH: [path.join(krewRoot, 'bin'), kubectlOnly].join(path.delimiter), HOME: dir };
    const list = await run('kubectl', ['plugin', 'list'], { env, cwd: dir });
    assert.match(list.stdout, new RegExp(`${path.join(krewRoot, 'bin', 'kubectl-proxyout').replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`));
    const help = await run('kubectl', ['proxyout', '--help'], { env, cwd: dir });
    assert.equal(help.code, 0, help.stderr);
    assert.match(help.stdout, /^USAGE\n {2}\$ kubectl proxyout \[flags\]/m);
    const completion = await run('kubectl', ['__complete', 'proxyout', 'disc'], { env, cwd: dir });
    assert.equal(completion.code, 0, completion.stderr);
    assert.match(completion.stdout, /^disconnect\tStop a managed proxy.*\n:4\n$/);
  },
);

test(
  'krew: `npm run krew-manifest -- --local` renders a manifest that a real krew installs from the local archive',
  { skip: skipUnlessPackaged(packagedArchive) || noKubectl, timeout: 660_000 },
  async (t) => {
    const krew = krewBinary();
    if ('skip' in krew) return t.skip(krew.skip);
    const out = path.join(dir, 'local-proxyout.yaml');
    const r = await run('npm', ['run', '--silent', 'krew-manifest', '--', '--local', '--out', out], { cwd: repoRoot });
    assert.equal(r.code, 0, r.stderr);
    const install = /kubectl krew install --manifest=(\S+) --archive=(\S+)/.exec(r.stdout);
    assert.ok(install, r.stdout);
    assert.equal(install[1], out);
    const krewRoot = path.join(dir, 'krew-real');
    const env = { ...process.env, KREW_ROOT: krewRoot, HOME: dir, KREW_NO_UPGRADE_CHECK: '1' };
    const installed = await run(krew.file, ['install', `--manifest=${install[1]}`, `--archive=${install[2]}`], { env });
    assert.equal(installed.code, 0, `${installed.stdout}${installed.stderr}`);
    assert.match(installed.stderr + installed.stdout, /Installed plugin: proxyout/);
    // krew's receipt and link (`krew list` would need the plugin index, fetched from the network).
    const receipt = yaml.load(readFileSync(path.join(krewRoot, 'receipts', 'proxyout.yaml'), 'utf8')) as KrewPlugin;
    assert.equal(receipt.metadata?.name, 'proxyout');
    assert.ok(readdirSync(path.join(krewRoot, 'bin')).includes('kubectl-proxyout'));
    const help = await run('kubectl', ['proxyout', '--help'], {
      env: { PATH: [path.join(krewRoot, 'bin'), kubectlOnly].join(path.delimiter), HOME: dir },
      cwd: dir,
    });
    assert.equal(help.code, 0, help.stderr);
    assert.match(help.stdout, /^USAGE\n {2}\$ kubectl proxyout \[flags\]/m);
  },
);

/** What `npm pack` runs as prepack after the build (tests run after the build): the bundle, in about a second. */
async function bundle(): Promise<void> {
  const r = await run(process.execPath, [path.join(repoRoot, 'scripts', 'package.mjs'), '--bundle-only'], { cwd: repoRoot });
  assert.equal(r.code, 0, r.stderr);
}

test('npm pack ships the bin script, the bundle and the docs: no sources, tests, simulator or dependencies', async () => {
  await bundle();
  const r = await run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', dir], { cwd: repoRoot });
  assert.equal(r.code, 0, r.stderr);
  const [info] = JSON.parse(r.stdout) as Array<{ filename: string; files: Array<{ path: string }> }>;
  const files = info!.files.map((f) => f.path);
  for (const needed of [
    'package.json',
    'bin/kubectl-proxyout',
    'bin/kubectl_complete-proxyout',
    'bin/package.json',
    'dist/pkg/kubectl-proxyout.cjs',
    'README.md',
    'LICENSE',
    'docs/usage.md',
  ]) {
    assert.ok(files.includes(needed), `${needed} is shipped`);
  }
  const unwanted = files.filter((f) => /^(test|dist\/test|dist\/src|src|scripts|bench|\.github)\//.test(f) || /\.d\.ts$|\.map$|sim/.test(f));
  assert.deepEqual(unwanted, []);
  const pjson = JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { dependencies?: object };
  assert.deepEqual(Object.keys(pjson.dependencies ?? {}), [], 'the bundle carries every dependency: nothing to install');
});

test('npm: the packed tarball installed into a temporary global prefix runs as `kubectl proxyout`', { skip: noKubectl }, async (t) => {
  await bundle();
  const packed = await run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', dir], { cwd: repoRoot });
  assert.equal(packed.code, 0, packed.stderr);
  const tarball = path.join(dir, (JSON.parse(packed.stdout) as Array<{ filename: string }>)[0]!.filename);
  const prefix = path.join(dir, 'prefix');
  // Offline, from npm's cache (tests send nothing off this machine); where the cache lacks a
  // dependency the test says so instead of reaching the registry — unless PROXYOUT_NPM_ONLINE=1
  // (CI) lets npm fetch what is missing.
  const online = process.env.PROXYOUT_NPM_ONLINE === '1';
  const install = await run('npm', [
    'install',
    '--global',
    '--prefix',
    prefix,
    online ? '--prefer-offline' : '--offline',
    '--no-audit',
    '--no-fund',
    '--ignore-scripts',
    tarball,
  ]);
  if (!online && install.code !== 0 && /ENOTCACHED/.test(install.stderr)) {
    return t.skip(
      `a dependency is not in npm's cache (PROXYOUT_NPM_ONLINE=1 lets npm fetch it): ${install.stderr.split('\n').find((l) => /request to/.test(l)) ?? 'ENOTCACHED'}`,
    );
  }
  assert.equal(install.code, 0, install.stderr);
  const binDir = process.platform === 'win32' ? prefix : path.join(prefix, 'bin');
  const env = { PATH: [binDir, path.dirname(process.execPath), kubectlOnly].join(path.delimiter), HOME: dir };
  const help = await run('kubectl', ['proxyout', '--help'], { env, cwd: dir });
  assert.equal(help.code, 0, help.stderr);
  assert.match(help.stdout, /^USAGE\n {2}\$ kubectl proxyout \[flags\]/m);
  assert.match(help.stdout, /service-install/);
  const status = await run('kubectl', ['proxyout', 'status'], { env: { ...env, KUBECTL_PROXYOUT_STATE_DIR: path.join(dir, 'state') }, cwd: dir });
  assert.equal(status.code, 0, status.stderr);
  assert.match(status.stdout, /no managed proxies/);
  const completion = await run('kubectl', ['__complete', 'proxyout', 'disc'], { env, cwd: dir });
  assert.equal(completion.code, 0, completion.stderr);
  assert.match(completion.stdout, /^disconnect\tStop a managed proxy.*\n:4\n$/, 'npm links kubectl_complete-proxyout');
  const installed =
    process.platform === 'win32' ? path.join(prefix, 'node_modules', 'kubectl-proxyout') : path.join(prefix, 'lib', 'node_modules', 'kubectl-proxyout');
  assert.deepEqual(readdirSync(installed).sort(), ['LICENSE', 'README.md', 'bin', 'dist', 'docs', 'package.json'], 'no node_modules');
});
