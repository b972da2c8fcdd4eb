// Runs the real executable (shebang, ESM loading, argv routing, help class, error printing),
// directly, through a symlink as npm installs it, and as a kubectl/oc plugin when available.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { accessSync, constants, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { once } from 'node:events';
import { delimiter, join } from 'node:path';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';

// Tests run from dist/test/integration, so the package root is three levels up.
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const BIN_DIR = join(ROOT, 'bin');
const BIN = join(BIN_DIR, 'kubectl-proxyout');
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
const manifest = JSON.parse(readFileSync(join(ROOT, 'oclif.manifest.json'), 'utf8')) as {
  commands: Record<string, { hidden?: boolean }>;
};

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

function run(file: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<Result> {
  return new Promise((resolve) => {
    // No TTY and a fixed width keep oclif's wrapping identical on every machine.
    const options = { env: { ...process.env, COLUMNS: '100', NO_COLOR: '1', ...env }, timeout: 60_000 };
    execFile(file, args, options, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

function which(command: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    const file = join(dir, command);
    try {
      accessSync(file, constants.X_OK);
      if (statSync(file).isFile()) return file;
    } catch {
      // not in this directory
    }
  }
  return undefined;
}

/** Root help: the foreground usage with serve's flags, plus the command list. */
function assertRootHelp(r: Result): void {
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /\$ kubectl proxyout \[flags\]/);
  for (const flag of ['--listen-socks', '--listen-http', '--context', '--kubeconfig', '--log-level', '--connect-timeout']) {
    assert.ok(r.stdout.includes(flag), `${flag} missing from help`);
  }
  assert.match(r.stdout, /-n, --namespace/);
  const commands = r.stdout.slice(r.stdout.indexOf('\nCOMMANDS\n'));
  assert.ok(commands.startsWith('\nCOMMANDS\n'), 'no COMMANDS section');
  assert.match(commands, /^ {2}help \[COMMAND\]/m);
  for (const [id, cmd] of Object.entries(manifest.commands)) {
    if (!cmd.hidden) assert.match(commands, new RegExp(`^ {2}${id.replaceAll(':', ' ')}\\b`, 'm'), `${id} not listed`);
  }
  assert.ok(!/^ {2}serve\b/m.test(commands), 'hidden serve command is listed');
}

test('--help shows the foreground usage, serve flags and the commands', async () => {
  assertRootHelp(await run(BIN, ['--help']));
});

test('-h and `help` are the same root help', async () => {
  const full = (await run(BIN, ['--help'])).stdout;
  assert.equal((await run(BIN, ['-h'])).stdout, full);
  assert.equal((await run(BIN, ['help'])).stdout, full);
});

test('serve --help works too', async () => {
  const r = await run(BIN, ['serve', '--help']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /\$ kubectl proxyout serve \[flags\]/);
  assert.match(r.stdout, /--listen-socks=<addr>\s+\[default: 127\.0\.0\.1:1080\]/);
  assert.match(r.stdout, /--connect-timeout=<duration>\s+\[default: 15s\]/);
});

/** The CLI run as a UID with no passwd entry (setpriv), from `/`. */
function asOtherUser(args: string[], env: NodeJS.ProcessEnv): Promise<Result> {
  return new Promise<Result>((resolve) =>
    execFile(
      'setpriv',
      ['--reuid', '54321', '--regid', '54321', '--clear-groups', process.execPath, BIN, ...args],
      { env, timeout: 60_000, cwd: '/' },
      (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
    ),
  );
}

test(
  'a user with no HOME, no SHELL and no passwd entry (a container’s arbitrary UID) gets help and status, not a crash',
  { skip: process.getuid?.() !== 0 && 'needs root (setpriv)' },
  async () => {
    const env: NodeJS.ProcessEnv = { ...process.env, COLUMNS: '100', NO_COLOR: '1' };
    // No SHELL either, as in most containers: oclif then asks the passwd entry for one.
    for (const name of ['HOME', 'SHELL', 'XDG_STATE_HOME', 'XDG_CONFIG_HOME', 'XDG_CACHE_HOME', 'KUBECTL_PROXYOUT_STATE_DIR', 'KUBECONFIG']) delete env[name];
    const as = (args: string[]) => asOtherUser(args, env);
    assertRootHelp(await as(['--help']));
    const status = await as(['status']);
    assert.doesNotMatch(status.stderr, /uv_os_homedir|uv_os_get_passwd|\n\s+at /, status.stderr);
    assert.equal(status.code, 0, status.stderr);
    const completion = await as(['__complete', 'st']);
    assert.match(completion.stdout, /^status\b/m, completion.stderr);
  },
);

test(
  'a HOME this user cannot read (an image’s HOME under another UID) puts no warning before the output',
  { skip: process.getuid?.() !== 0 && 'needs root (setpriv)' },
  async (t) => {
    const home = mkdtempSync(join(tmpdir(), 'proxyout-closed-home-')); // root's, 0700
    t.after(() => rmSync(home, { recursive: true, force: true }));
    const env: NodeJS.ProcessEnv = { ...process.env, HOME: home, COLUMNS: '100', NO_COLOR: '1' };
    for (const name of ['XDG_DATA_HOME', 'XDG_STATE_HOME', 'XDG_CONFIG_HOME', 'XDG_CACHE_HOME']) delete env[name];
    const as = (args: string[]) => asOtherUser(args, env);
    const r = await as(['--version']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stderr, '');
    assert.match(r.stdout, /^kubectl-proxyout\//);
    // The state directory under it cannot be looked at: one line saying so, and the way on.
    const status = await as(['status']);
    assert.equal(status.code, 1);
    assert.equal(
      status.stderr,
      `Error: cannot read the state directory ${home}/.local/state/kubectl-proxyout: EACCES: permission denied, stat '${home}/.local/state/kubectl-proxyout'; set KUBECTL_PROXYOUT_STATE_DIR to a directory of your own\n`,
    );
  },
);

test('--version prints the package version', async () => {
  const r = await run(BIN, ['--version']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, new RegExp(`^kubectl-proxyout/${pkg.version.replaceAll('.', '\\.')} `));
});

test('works through a symlink, as npm links bins', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'proxyout-bin-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const link = join(dir, 'kubectl-proxyout');
  symlinkSync(BIN, link);
  const r = await run(link, ['--version']);
  assert.equal(r.code, 0, r.stderr);
  assert.ok(r.stdout.includes(pkg.version));
});

test('a node older than package.json allows is one line saying so, not a failure later in a command', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'proxyout-old-node-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  // The only node here is a new one: this makes it report itself as 20.18 (and 18), as one would.
  const preload = (version: string) => {
    const file = join(dir, `node-${version}.cjs`);
    writeFileSync(
      file,
      `Object.defineProperty(process, 'versions', { value: { ...process.versions, node: '${version}' } });\n` +
        `Object.defineProperty(process, 'version', { value: 'v${version}' });\n`,
    );
    return { NODE_OPTIONS: `--require ${file}` };
  };
  for (const version of ['20.18.3', '18.20.4']) {
    for (const bin of [BIN, join(BIN_DIR, 'kubectl_complete-proxyout')]) {
      const r = await run(bin, ['--version'], preload(version));
      assert.equal(r.code, 1, `${bin} on ${version}: ${r.stdout}`);
      assert.equal(r.stdout, '');
      // The node the shebang finds on PATH, named by its path.
      assert.match(
        r.stderr,
        new RegExp(
          `^kubectl-proxyout: needs Node\\.js 20\\.19 or newer, and /\\S+ is v${version.replaceAll('.', '\\.')}: upgrade Node\\.js, or use the single-file binary of a release, which carries its own\\n$`,
        ),
      );
    }
  }
  const r = await run(BIN, ['--version'], preload('20.19.0'));
  assert.equal(r.code, 0, r.stderr);
});

for (const host of ['kubectl', 'oc']) {
  test(`${host} finds it as a plugin: ${host} proxyout --help`, async (t) => {
    const path = which(host);
    if (!path) {
      t.skip(`${host} is not on PATH; plugin discovery not checked`);
      return;
    }
    assertRootHelp(await run(path, ['proxyout', '--help'], { PATH: `${BIN_DIR}${delimiter}${process.env.PATH ?? ''}` }));
  });
}

/** Usage errors: non-zero, nothing on stdout, exactly one `Error: …` line on stderr. */
function assertOneLineError(r: Result, pattern: RegExp): void {
  assert.notEqual(r.code, 0);
  assert.equal(r.stdout, '');
  const lines = r.stderr.split('\n').filter((l) => l !== '');
  assert.equal(lines.length, 1, `expected one line, got:\n${r.stderr}`);
  assert.match(lines[0]!, /^Error: /);
  assert.match(lines[0]!, pattern);
}

test('a bad flag value is one line and a non-zero exit', async () => {
  assertOneLineError(await run(BIN, ['--log-level', 'nope']), /--log-level/);
  assertOneLineError(await run(BIN, ['--connect-timeout', 'soon']), /--connect-timeout: invalid duration/);
  // A namespace the API server could not have: short names would find nothing, as a usage error (2).
  for (const args of [
    ['-n', 'Bad_NS'],
    ['connect', '-n', 'shop.x'],
    ['exec', '-n', 'UPPER', '--', 'true'],
    ['service-install', '-n', `${'a'.repeat(64)}`],
  ]) {
    const r = await run(BIN, args);
    assertOneLineError(r, /--namespace: "[^"]+" cannot name a namespace: lowercase letters, digits and "-", at most 63/);
    assert.equal(r.code, 2, args.join(' '));
  }
});

test('flag-first argv reaches serve (its flags parse, its errors show)', async () => {
  assertOneLineError(await run(BIN, ['-n']), /--namespace expects a value/);
  assertOneLineError(await run(BIN, ['--listen-socks', 'off']), /nothing to listen on/);
  // "off" means none for either listener, as --help says.
  assertOneLineError(await run(BIN, ['--listen-socks', 'off', '--listen-http', 'off']), /nothing to listen on/);
});

test('an unknown command is an error, exit 2, naming the command it is likely a typo of, and the list', async () => {
  const r = await run(BIN, ['frobnicate']);
  assert.equal(r.code, 2);
  assertOneLineError(r, /^Error: command frobnicate not found \(see kubectl proxyout --help\)$/);
  assertOneLineError(await run(BIN, ['conect']), /^Error: command conect not found: did you mean connect\? \(see kubectl proxyout --help\)$/);
  assertOneLineError(await run(BIN, ['staus']), /^Error: command staus not found: did you mean status\? /);
  assertOneLineError(await run(BIN, ['version']), /^Error: command version not found \(the version: kubectl proxyout --version; /);
});

test('a destination where a command goes says how a client reaches it through the proxy, exit 2', async () => {
  // It said "command web.shop not found", and for a URL "command http not found".
  for (const [word, url] of [
    ['web.shop', 'http://web.shop/'],
    ['web.shop:8080', 'http://web.shop:8080/'],
    ['http://web.shop:8080/health', 'http://web.shop:8080/health'],
    ['10.96.0.1', 'http://10.96.0.1/'],
  ] as const) {
    const r = await run(BIN, [word]);
    assert.equal(r.code, 2, r.stderr);
    const quoted = url.replace(/[.]/g, '\\.');
    assertOneLineError(
      r,
      new RegExp(
        `^Error: ${word.replace(/[.]/g, '\\.')} is not a command: kubectl proxyout takes no destination\\. .*curl --proxy socks5h://127\\.0\\.0\\.1:1080 ${quoted} .*kubectl proxyout exec -- curl ${quoted}$`,
      ),
    );
  }
  // A loopback address and port: likely where to listen.
  assertOneLineError(
    await run(BIN, ['localhost:1080']),
    /^Error: localhost:1080 is not a command: to listen there, kubectl proxyout --listen-socks localhost:1080 /,
  );
  // A word like no host is still a mistyped command.
  assertOneLineError(await run(BIN, ['web']), /^Error: command web not found \(see kubectl proxyout --help\)$/);
});

test('a word too many after a command without arguments names that word, exit 2', async () => {
  // oclif read `quit extra` as a command "quit:extra" and said it was not found.
  for (const command of ['quit', 'doctor', 'connect']) {
    const r = await run(BIN, [command, 'extra']);
    assert.equal(r.code, 2, r.stderr);
    assertOneLineError(
      r,
      new RegExp(`^Error: Unexpected argument: extra \\(kubectl proxyout ${command} takes none; see kubectl proxyout ${command} --help\\)$`),
    );
  }
  assertOneLineError(await run(BIN, ['frobnicate', 'extra']), /^Error: command frobnicate not found \(see kubectl proxyout --help\)$/);
});

test('disconnect without an ID or --all, or with both, says which it lacks or has too many of', async () => {
  for (const [args, message] of [
    [['disconnect'], /^Error: give a connection ID \(see kubectl proxyout status\) or --all$/],
    [['disconnect', '--forget'], /^Error: give a connection ID \(see kubectl proxyout status\) or --all$/],
    [['disconnect', 'a1b2c3d4', '--all'], /^Error: give a connection ID or --all, not both$/],
  ] as const) {
    const r = await run(BIN, [...args]);
    assert.equal(r.code, 2, r.stderr);
    assertOneLineError(r, message);
  }
});

test('an API server that does not answer at start: one line, not also a log line that it tries again', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'proxyout-unreachable-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const closed = createServer().listen(0, '127.0.0.1');
  await once(closed, 'listening');
  const port = (closed.address() as AddressInfo).port;
  await new Promise((r) => closed.close(r));
  const kubeconfig = join(dir, 'kubeconfig');
  writeFileSync(
    kubeconfig,
    `apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters: [{name: k, cluster: {server: "https://127.0.0.1:${port}"}}]\n` +
      'users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n',
    { mode: 0o600 },
  );
  // The default log level: the route's own "trying again later" line came before the error.
  const r = await run(BIN, ['--kubeconfig', kubeconfig, '--listen-socks', '127.0.0.1:0']);
  assert.equal(r.code, 1, r.stderr);
  assertOneLineError(r, /^Error: cannot reach the API server https:\/\/127\.0\.0\.1:\d+ \(context "c"\): connect ECONNREFUSED/);
});

test('a startup failure is one `Error:` line, no stack, exit 1', async () => {
  const r = await run(BIN, ['--kubeconfig', join(tmpdir(), 'proxyout-no-such-kubeconfig'), '--listen-socks', '127.0.0.1:0', '--log-level', 'silent'], {
    KUBECONFIG: '',
  });
  assert.equal(r.code, 1, r.stderr);
  assertOneLineError(r, /./);
});

test('every example in a command help is marked as a command line, the eval one included', async () => {
  const r = await run(BIN, ['connect', '--help']);
  assert.equal(r.code, 0, r.stderr);
  const examples = r.stdout
    .slice(r.stdout.indexOf('EXAMPLES'))
    .split('\n')
    .slice(1)
    .filter((l) => l.trim() !== '');
  assert.ok(examples.length >= 3, r.stdout);
  // oclif marked only examples starting with the bin: the eval line stood without its "$ ".
  assert.ok(examples.includes('  $ eval "$(kubectl proxyout connect)"'), examples.join('\n'));
  for (const line of examples) assert.match(line, /^ {2}\$ /);
});

test("conflicting flags are one line naming both, without oclif's preamble", async () => {
  const r = await run(BIN, ['connect', '--no-proxy-auth', '--proxy-auth-file', '/nonexistent']);
  assert.equal(r.code, 2, r.stderr);
  // It began "Error: The following error occurred: --proxy-auth-file=…".
  assertOneLineError(r, /^Error: --proxy-auth-file=\/nonexistent cannot also be provided when using --no-proxy-auth$/);
});
