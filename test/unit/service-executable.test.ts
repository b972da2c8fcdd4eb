// service-install names the stable executable the user reaches us by — a `kubectl-proxyout` on
// PATH that resolves to our own file (krew's ~/.krew/bin link, Homebrew's, npm's global bin
// link) — not the versioned file an upgrade removes; npm's link runs through its
// `#!/usr/bin/env node` with the PATH the unit keeps, and really starts that way.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { executableLines, serviceExecutable, versionedDirectory } from '../../src/service/executable.js';
import { binScriptPath } from '../../src/core/self.js';
import { runCli } from '../helpers/proxy-process.js';

function tmp(t: { after(fn: () => void): void }): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'proxyout-exe-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function executable(file: string, text = '#!/bin/sh\nexit 0\n'): string {
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, text);
  chmodSync(file, 0o755);
  return file;
}

function link(target: string, at: string): string {
  mkdirSync(path.dirname(at), { recursive: true });
  symlinkSync(target, at);
  return at;
}

test('single executable (krew): the ~/.krew/bin link on PATH, not the versioned store file', (t) => {
  const home = tmp(t);
  const store = executable(path.join(home, '.krew/store/proxyout/v0.1.0/kubectl-proxyout'));
  const krewBin = link(store, path.join(home, '.krew/bin/kubectl-proxyout'));
  // Another program of the same name earlier on PATH, and a relative entry, are passed over.
  const other = executable(path.join(home, 'other/kubectl-proxyout'));
  const self = { sea: true, execPath: store, binScript: '/nonexistent' };
  const found = serviceExecutable(self, [path.dirname(other), '.krew/bin', '/usr/bin', path.dirname(krewBin)].join(':'), home);
  assert.deepEqual(found, { command: krewBin, args: [], stableName: krewBin });

  // None on PATH: today's behaviour, with the versioned directory named for the warning.
  const fallback = serviceExecutable(self, '/usr/bin:/bin', home);
  assert.deepEqual(fallback, { command: store, args: [], versioned: store });
  assert.equal(versionedDirectory(store), 'v0.1.0');
  // What the command prints for each.
  assert.deepEqual(executableLines(found), [`runs: ${krewBin} (${krewBin} is on your PATH: upgrades keep it)`]);
  const [runs, warning] = executableLines(fallback);
  assert.equal(runs, `runs: ${store} (no kubectl-proxyout on your PATH is this program)`);
  assert.match(
    warning!,
    /^warning: .*\/v0\.1\.0\/kubectl-proxyout is in a versioned directory \(v0\.1\.0\): an upgrade \(kubectl krew upgrade, brew upgrade, a new node\) removes it .*put kubectl-proxyout on your PATH/,
  );
});

test('Homebrew: the bin link into the Cellar', (t) => {
  const prefix = tmp(t);
  const cellar = executable(path.join(prefix, 'Cellar/kubectl-proxyout/0.2.1/bin/kubectl-proxyout'));
  const bin = link('../Cellar/kubectl-proxyout/0.2.1/bin/kubectl-proxyout', path.join(prefix, 'bin/kubectl-proxyout'));
  assert.deepEqual(serviceExecutable({ sea: true, execPath: cellar, binScript: '' }, `${prefix}/bin`, prefix).command, bin);
  assert.equal(versionedDirectory(cellar), '0.2.1');
  assert.equal(versionedDirectory('/usr/local/lib/node_modules/kubectl-proxyout/bin/kubectl-proxyout'), undefined);
});

test('npm: the global bin link runs through its #!/usr/bin/env node on the PATH the unit keeps — and starts', (t) => {
  const prefix = tmp(t);
  // npm links $prefix/bin/NAME to the package's bin script; ours is this checkout's.
  const npmLink = link(binScriptPath(), path.join(prefix, 'bin/kubectl-proxyout'));
  assert.match(readFileSync(npmLink, 'utf8').split('\n', 1)[0]!, /^#!\/usr\/bin\/env node$/);
  const self = { sea: false, execPath: process.execPath, binScript: binScriptPath() };
  const unitPath = `${path.dirname(npmLink)}:${path.dirname(process.execPath)}`;
  const found = serviceExecutable(self, unitPath, prefix);
  assert.deepEqual(found, { command: npmLink, args: [], stableName: npmLink });
  // As the service manager would run it: that command line, that PATH, the home as directory.
  const run = spawnSync(found.command, [...found.args, '--version'], { cwd: prefix, env: { PATH: unitPath, HOME: prefix }, encoding: 'utf8' });
  assert.equal(run.status, 0, run.stderr);
  assert.match(run.stdout, /^kubectl-proxyout\/\d/);

  // No node on that PATH: `env node` would fail (127), so our own node runs the stable link.
  const noNode = serviceExecutable(self, path.dirname(npmLink), prefix);
  assert.deepEqual(noNode, { command: process.execPath, args: [npmLink], stableName: npmLink });
  // No link on PATH at all: node and the bin script, as before.
  assert.deepEqual(serviceExecutable(self, '/nonexistent', prefix), { command: process.execPath, args: [binScriptPath()] });
});

test('the CLI runs the stable name and says so', { skip: process.platform !== 'linux' ? 'the CLI half runs on Linux' : false }, async (t) => {
  const home = tmp(t);
  const env = { HOME: home, XDG_CONFIG_HOME: '', XDG_STATE_HOME: '', KUBECTL_PROXYOUT_STATE_DIR: '', SSH_AUTH_SOCK: '', KUBECONFIG: '' };
  // A kubeconfig whose current context the unit will serve (service-install checks it).
  mkdirSync(path.join(home, '.kube'));
  writeFileSync(
    path.join(home, '.kube/config'),
    'apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: prod, context: {cluster: c, user: u}}]\ncurrent-context: prod\n',
    { mode: 0o600 },
  );
  const npmLink = link(binScriptPath(), path.join(home, 'npm/bin/kubectl-proxyout'));
  const unitPath = `${path.dirname(npmLink)}:${path.dirname(process.execPath)}:/usr/bin:/bin`;
  const dry = await runCli(['service-install', '--dry-run'], { env: { ...env, PATH: unitPath } });
  assert.equal(dry.code, 0, dry.stderr);
  assert.match(dry.stdout, new RegExp(`^ExecStart=${npmLink} --log-format json$`, 'm'));
  assert.match(dry.stdout, /^RestartPreventExitStatus=2 127 203$/m);
  assert.ok(dry.stderr.includes(`runs: ${npmLink} (${npmLink} is on your PATH: upgrades keep it)`), dry.stderr);
});

test('npm under nvm: the global link is found but is in a versioned directory, so the warning stays', (t) => {
  const home = tmp(t);
  const version = path.join(home, '.nvm/versions/node/v20.11.0');
  const script = executable(path.join(version, 'lib/node_modules/kubectl-proxyout/bin/kubectl-proxyout'), '#!/usr/bin/env node\n');
  const node = executable(path.join(version, 'bin/node'));
  const npmLink = link('../lib/node_modules/kubectl-proxyout/bin/kubectl-proxyout', path.join(version, 'bin/kubectl-proxyout'));
  const found = serviceExecutable({ sea: false, execPath: node, binScript: script }, `${path.dirname(npmLink)}:/usr/bin`, home);
  assert.deepEqual(found, { command: npmLink, args: [], stableName: npmLink, versioned: npmLink });
  const [runs, warning] = executableLines(found);
  assert.equal(runs, `runs: ${npmLink} (${npmLink} is on your PATH)`, 'not "upgrades keep it"');
  assert.match(warning!, /is in a versioned directory \(v20\.11\.0\)/);

  // A stable link whose `env node` finds a versioned node: that node is what an upgrade removes.
  const stable = link(script, path.join(home, 'bin/kubectl-proxyout'));
  const viaEnv = serviceExecutable({ sea: false, execPath: node, binScript: script }, `${path.dirname(stable)}:${path.dirname(node)}`, home);
  assert.deepEqual(viaEnv, { command: stable, args: [], stableName: stable, versioned: node });
});
