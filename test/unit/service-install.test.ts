// service-install / service-uninstall with the platform, home and environment injected: the
// systemd user unit passes `systemd-analyze verify` with no warning, the launchd plist parses as a
// property list with the right keys, edits by the user are kept without --force, and the printed
// lines are the ones that start and stop the service.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { installService, serviceFile, uninstallService, type ServiceHost } from '../../src/service/install.js';
import { serviceSpec } from '../../src/service/spec.js';
import { socketDir } from '../../src/state/paths.js';
import { isUnchanged } from '../../src/service/units.js';
import { binPath, runCli } from '../helpers/proxy-process.js';

function hostFor(platform: NodeJS.Platform, env: NodeJS.ProcessEnv = {}): ServiceHost & { cleanup(): void } {
  const home = mkdtempSync(path.join(os.tmpdir(), 'proxyout-svc-'));
  return { platform, home, uid: 501, env: { PATH: '/usr/local/bin:/usr/bin:/bin', ...env }, cleanup: () => rmSync(home, { recursive: true, force: true }) };
}

function specFor(host: ServiceHost, extra: { kubeconfig?: string } = {}) {
  return serviceSpec({
    name: 'kubectl-proxyout',
    flags: {
      kubeconfig: extra.kubeconfig ?? 'kube/config',
      context: ['prod', 'staging'],
      'listen-socks': '127.0.0.1:1080',
      'listen-http': '127.0.0.1:3128',
      'proxy-auth-file': 'auth',
    },
    invocation: { command: process.execPath, args: ['/opt/kubectl-proxyout/bin/kubectl-proxyout'] },
    stateRoot: path.join(host.home, '.local/state/kubectl-proxyout'),
    env: host.env,
    cwd: path.join(host.home, 'work'),
    home: host.home,
  });
}

const verifyRuns = spawnSync('systemd-analyze', ['--version'], { stdio: 'ignore' }).status === 0;

test('systemd: a user unit with absolute paths, restart on failure, logs in the state dir, SSH_AUTH_SOCK passed; systemd-analyze verify is silent', (t) => {
  const host = hostFor('linux', { SSH_AUTH_SOCK: '/run/user/501/ssh-agent.sock', KUBECONFIG: 'relative/kc' });
  try {
    const spec = specFor(host, { kubeconfig: 'my dir/kc%1$x' });
    const r = installService(host, spec, { dryRun: false, force: false });
    assert.equal(r.file, path.join(host.home, '.config/systemd/user/kubectl-proxyout.service'));
    const text = readFileSync(r.file, 'utf8');
    const kc = path.join(host.home, 'work', 'my dir/kc%%1$$x');
    assert.ok(
      text.includes(
        `ExecStart=${process.execPath} /opt/kubectl-proxyout/bin/kubectl-proxyout --kubeconfig "${kc}" --context prod --context staging --listen-socks 127.0.0.1:1080 --listen-http 127.0.0.1:3128 --proxy-auth-file ${path.join(host.home, 'work/auth')} --log-format json\n`,
      ),
      text,
    );
    assert.match(text, /^Restart=on-failure$/m);
    // `systemctl --user reload` sends what makes the proxy re-read its routing table.
    assert.match(text, /^ExecReload=\/bin\/kill -HUP \$MAINPID$/m);
    assert.equal(r.reload, 'systemctl --user reload kubectl-proxyout.service');
    // A program that is gone (203/EXEC, env's 127) or refuses its arguments (2) is not restarted for ever.
    assert.match(text, /^RestartPreventExitStatus=2 127 203$/m);
    assert.match(text, /^PassEnvironment=SSH_AUTH_SOCK$/m);
    assert.match(text, new RegExp(`^StandardError=append:${host.home}/\\.local/state/kubectl-proxyout/logs/kubectl-proxyout\\.log$`, 'm'));
    assert.match(text, /^Environment=PATH=\/usr\/local\/bin:\/usr\/bin:\/bin$/m);
    assert.doesNotMatch(text, /KUBECONFIG/, '--kubeconfig given: $KUBECONFIG is not carried');
    assert.match(text, /^WantedBy=default\.target$/m);
    assert.deepEqual(r.next, [
      'systemctl --user import-environment SSH_AUTH_SOCK',
      'systemctl --user daemon-reload',
      'systemctl --user enable --now kubectl-proxyout.service',
    ]);
    assert.ok(isUnchanged(text));
    // The log file exists, 0600, before systemd's append: would make it 0644.
    assert.equal(statSync(path.join(host.home, '.local/state/kubectl-proxyout/logs/kubectl-proxyout.log')).mode & 0o777, 0o600);

    if (!verifyRuns) return t.skip('systemd-analyze is not installed (apt-get install systemd)');
    const v = spawnSync('systemd-analyze', ['verify', r.file], { encoding: 'utf8' });
    assert.equal(v.status, 0, v.stderr);
    assert.equal(v.stderr.trim(), '', 'no directive systemd ignores or refuses');
  } finally {
    host.cleanup();
  }
});

test('systemd: a home with a space, a "%", non-ASCII letters and a "$" in PATH — systemd-analyze verify still finds nothing to refuse or ignore', (t) => {
  const home = mkdtempSync(path.join(os.tmpdir(), 'proxyout svc %é-'));
  const host: ServiceHost = { platform: 'linux', home, uid: 501, env: { PATH: '/opt/a$b:/usr/bin:/bin' } };
  try {
    const r = installService(host, specFor(host), { dryRun: false, force: false });
    const text = readFileSync(r.file, 'utf8');
    assert.ok(text.includes(`WorkingDirectory=${home.replace(/%/g, '%%')}\n`), text);
    assert.ok(text.includes(`StandardOutput=append:${path.join(home, '.local/state/kubectl-proxyout/logs/kubectl-proxyout.log').replace(/%/g, '%%')}\n`), text);
    assert.ok(text.includes('Environment="PATH=/opt/a$b:/usr/bin:/bin"\n'), 'a $ in Environment= is nothing special to systemd: not doubled');
    if (!verifyRuns) return t.skip('systemd-analyze is not installed (apt-get install systemd)');
    const v = spawnSync('systemd-analyze', ['verify', r.file], { encoding: 'utf8' });
    assert.equal(v.status, 0, v.stderr);
    assert.equal(v.stderr.trim(), '', 'no directive systemd ignores or refuses');
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
});

test('every unix socket path is fixed at install time: relative ones made absolute, unix: and unix:NAME where this shell would put them', () => {
  const spec = (listen: string, stateRoot = '/s') =>
    serviceSpec({
      name: 'x',
      flags: { 'listen-socks': listen },
      invocation: { command: '/bin/kubectl-proxyout', args: [] },
      stateRoot,
      env: {},
      cwd: '/w',
      home: '/h',
    }).args[1];
  assert.equal(spec('unix:run/socks.sock'), 'unix:/w/run/socks.sock', 'the service starts in the home, not here');
  assert.equal(spec('unix:./s.sock'), 'unix:/w/s.sock');
  assert.equal(spec('unix:/abs/s.sock'), 'unix:/abs/s.sock');
  assert.equal(spec('unix:~/s.sock'), 'unix:/h/s.sock', 'no shell expands a tilde after "unix:"');
  assert.equal(spec('unix:'), 'unix:/s/socks.sock');
  assert.equal(spec('unix:mine.sock'), 'unix:/s/mine.sock');
  // A state directory a URL cannot name as it is (macOS: "Application Support"): under $TMPDIR
  // as this shell has it, written into the unit (a launchd agent may see another TMPDIR, or none).
  const macState = '/Users/u/Library/Application Support/kubectl-proxyout';
  assert.equal(spec('unix:', macState), `unix:${socketDir(macState)}/socks.sock`);
  assert.notEqual(socketDir(macState), macState);
  assert.equal(spec('127.0.0.1:1080'), '127.0.0.1:1080');
});

test('systemd: $KUBECONFIG is kept (absolute) when no --kubeconfig is given', () => {
  const host = hostFor('linux', { KUBECONFIG: `a/kc${path.delimiter}/abs/kc2` });
  try {
    const spec = serviceSpec({
      name: 'x',
      flags: {},
      invocation: { command: '/usr/local/bin/kubectl-proxyout', args: [] },
      stateRoot: '/s',
      env: host.env,
      cwd: '/w',
      home: host.home,
    });
    assert.deepEqual(spec.args, ['--log-format', 'json']);
    assert.equal(spec.env.KUBECONFIG, `/w/a/kc${path.delimiter}/abs/kc2`);
    assert.equal(spec.command, '/usr/local/bin/kubectl-proxyout');
  } finally {
    host.cleanup();
  }
});

test("the shell's choice of a cloud CLI profile reaches the service's exec plugins; its secrets do not", () => {
  const env = { PATH: '/usr/bin', AWS_PROFILE: 'team-prod', AWS_REGION: 'eu-west-1', AWS_SECRET_ACCESS_KEY: 's3cr3t', CLOUDSDK_CONFIG: '/home/u/.gcloud-work' };
  const spec = serviceSpec({ name: 'x', flags: {}, invocation: { command: '/k', args: [] }, stateRoot: '/s', env, cwd: '/w', home: '/h' });
  assert.equal(spec.env.AWS_PROFILE, 'team-prod', 'aws eks get-token under the default profile is another identity');
  assert.equal(spec.env.AWS_REGION, 'eu-west-1');
  assert.equal(spec.env.CLOUDSDK_CONFIG, '/home/u/.gcloud-work');
  assert.equal(spec.env.AWS_SECRET_ACCESS_KEY, undefined);
});

test("systemd: the shell's proxy variables reach the service (it reaches API servers as connect did), those with a password do not", async () => {
  const host = hostFor('linux', {
    HTTPS_PROXY: 'http://alice:s3cr3t@proxy.corp:3128',
    https_proxy: 'proxy.corp:3128',
    HTTP_PROXY: 'socks5://:only-pw@proxy.corp:1080',
    NO_PROXY: '.internal,10.0.0.0/8,user@host',
  });
  try {
    const spec = serviceSpec({ name: 'x', flags: {}, invocation: { command: '/k', args: [] }, stateRoot: '/s', env: host.env, cwd: '/w', home: host.home });
    assert.equal(spec.env.https_proxy, 'proxy.corp:3128');
    assert.equal(spec.env.NO_PROXY, '.internal,10.0.0.0/8,user@host');
    assert.equal(spec.env.HTTPS_PROXY, undefined, 'a password is not written into a file others read');
    assert.equal(spec.env.HTTP_PROXY, undefined);
    assert.doesNotMatch(installService(host, spec, { dryRun: true, force: false }).text, /s3cr3t|only-pw/);
  } finally {
    host.cleanup();
  }
  // The real CLI says what it left out, and why.
  const dir = mkdtempSync(path.join(os.tmpdir(), 'proxyout-svc-cli-'));
  try {
    const kubeconfig = path.join(dir, 'kubeconfig');
    writeFileSync(
      kubeconfig,
      'apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "https://api.corp.example:6443"}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n',
    );
    const r = await runCli(['service-install', '--dry-run', '--listen-socks', 'unix:', '--kubeconfig', kubeconfig], {
      env: {
        HTTPS_PROXY: 'http://alice:s3cr3t@proxy.corp:3128',
        https_proxy: '',
        HTTP_PROXY: '',
        http_proxy: '',
        NO_PROXY: '',
        no_proxy: '',
        KUBECTL_PROXYOUT_STATE_DIR: path.join(dir, 'state'),
      },
    });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /warning: HTTPS_PROXY carries a password and is not written into the service file .*proxy-url in the kubeconfig/);
    assert.doesNotMatch(`${r.stdout}${r.stderr}`, /s3cr3t/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('under umask 000 the directories made for the unit are not writable by others', () => {
  for (const platform of ['linux', 'darwin'] as const) {
    const host = hostFor(platform);
    const before = process.umask(0);
    try {
      const r = installService(host, specFor(host), { dryRun: false, force: false });
      for (let dir = path.dirname(r.file); dir !== host.home; dir = path.dirname(dir)) {
        assert.equal(statSync(dir).mode & 0o022, 0, `${dir}: mode ${(statSync(dir).mode & 0o777).toString(8)}`);
      }
    } finally {
      process.umask(before);
      host.cleanup();
    }
  }
});

test('an edited file is neither overwritten nor removed without --force; an unchanged one is', () => {
  const host = hostFor('linux');
  try {
    const spec = specFor(host);
    const first = installService(host, spec, { dryRun: false, force: false });
    assert.equal(installService(host, spec, { dryRun: false, force: false }).changed, false, 'the same file again: nothing to do');
    const edited = readFileSync(first.file, 'utf8').replace('RestartSec=5s', 'RestartSec=30s');
    writeFileSync(first.file, edited);
    assert.throws(() => installService(host, spec, { dryRun: false, force: false }), /was changed after service-install wrote it.*--force/);
    assert.throws(() => uninstallService(host, 'kubectl-proxyout', { force: false }), /--force to remove it/);
    assert.equal(readFileSync(first.file, 'utf8'), edited, 'kept');
    const forced = installService(host, spec, { dryRun: false, force: true });
    assert.equal(readFileSync(forced.file, 'utf8'), first.text);
    assert.deepEqual(forced.next.at(-1), 'systemctl --user enable kubectl-proxyout.service && systemctl --user restart kubectl-proxyout.service');

    // enable's link is removed with the unit; a foreign file next to it is not touched.
    const wants = path.join(path.dirname(forced.file), 'default.target.wants');
    mkdirSync(wants);
    symlinkSync(forced.file, path.join(wants, 'kubectl-proxyout.service'));
    writeFileSync(path.join(wants, 'other.service'), '');
    const u = uninstallService(host, 'kubectl-proxyout', { force: false });
    assert.equal(u.removed, true);
    assert.ok(!existsSync(forced.file));
    assert.ok(!existsSync(path.join(wants, 'kubectl-proxyout.service')));
    assert.ok(existsSync(path.join(wants, 'other.service')));
    assert.deepEqual(u.next, [
      'systemctl --user stop kubectl-proxyout.service',
      'systemctl --user daemon-reload',
      'systemctl --user reset-failed kubectl-proxyout.service',
    ]);
    assert.equal(uninstallService(host, 'kubectl-proxyout', { force: false }).removed, false);
  } finally {
    host.cleanup();
  }
});

/** A property list (launchd.plist(5) subset: dict, array, string, integer, true, false) as JS values. */
function parsePlist(text: string): unknown {
  const body = text
    .replace(/<\?xml[^>]*\?>/, '')
    .replace(/<!--[\s\S]*?-->/g, '')
    .replace(/<!DOCTYPE[^>]*>/, '')
    .trim();
  const tokens = body.match(/<[^>]+>|[^<]+/g)!.filter((t) => t.trim() !== '');
  let i = 0;
  const unescape = (s: string) =>
    s
      .replace(/&lt;/g, '<')
      .replace(/&gt;/g, '>')
      .replace(/&quot;/g, '"')
      .replace(/&amp;/g, '&');
  const expect = (tag: string) => assert.equal(tokens[i++], tag);
  const value = (): unknown => {
    const tag = tokens[i++]!;
    if (tag === '<true/>') return true;
    if (tag === '<false/>') return false;
    if (tag === '<string>' || tag === '<integer>' || tag === '<key>') {
      const text = tokens[i]!.startsWith('<') ? '' : unescape(tokens[i++]!);
      expect(tag.replace('<', '</'));
      return tag === '<integer>' ? Number(text) : text;
    }
    if (tag === '<array>') {
      const out: unknown[] = [];
      while (tokens[i] !== '</array>') out.push(value());
      i++;
      return out;
    }
    if (tag === '<dict>') {
      const out: Record<string, unknown> = {};
      while (tokens[i] !== '</dict>') {
        assert.equal(tokens[i], '<key>', `a key in a dict, not ${tokens[i]}`);
        const key = value() as string;
        out[key] = value();
      }
      i++;
      return out;
    }
    throw new Error(`unexpected ${tag}`);
  };
  expect('<plist version="1.0">');
  const root = value();
  expect('</plist>');
  assert.equal(i, tokens.length);
  return root;
}

test('the proxy tuning given is carried as given, defaults are not; a longer --shutdown-grace lengthens the stop timeout (systemd TimeoutStopSec, launchd ExitTimeOut)', (t) => {
  const flags = { 'connect-timeout': '30s', 'max-streams': 0, transport: 'websocket', 'allow-host-network-pods': true, 'shutdown-grace': '2m' };
  for (const platform of ['linux', 'darwin'] as const) {
    const host = hostFor(platform);
    try {
      const spec = serviceSpec({
        name: 'x',
        flags,
        invocation: { command: '/usr/local/bin/kubectl-proxyout', args: [] },
        stateRoot: path.join(host.home, 's'),
        env: host.env,
        cwd: '/w',
        home: host.home,
      });
      assert.deepEqual(spec.args, [
        '--connect-timeout',
        '30s',
        '--shutdown-grace',
        '2m',
        '--max-streams',
        '0',
        '--transport',
        'websocket',
        '--allow-host-network-pods',
        '--log-format',
        'json',
      ]);
      assert.equal(spec.stopTimeoutSec, 130, 'the grace, and 10 s to close and exit');
      const text = installService(host, spec, { dryRun: true, force: false }).text;
      if (platform === 'linux') assert.match(text, /^TimeoutStopSec=130s$/m);
      else assert.equal((parsePlist(text) as Record<string, unknown>).ExitTimeOut, 130);
    } finally {
      host.cleanup();
    }
  }
  // Nothing given: nothing carried, the service managers' own stop timeouts.
  const host = hostFor('linux');
  t.after(() => host.cleanup());
  const plain = serviceSpec({ name: 'x', flags: {}, invocation: { command: '/k', args: [] }, stateRoot: '/s', env: host.env, cwd: '/w', home: host.home });
  assert.deepEqual(plain.args, ['--log-format', 'json']);
  assert.doesNotMatch(installService(host, plain, { dryRun: true, force: false }).text, /TimeoutStopSec/);
});

test('launchd: a LaunchAgent plist that parses, with the command, KeepAlive on failure and logs; bootstrap line for gui/UID', () => {
  const host = hostFor('darwin');
  try {
    const spec = specFor(host, { kubeconfig: 'a&b<c>/kc' });
    const r = installService(host, spec, { dryRun: false, force: false });
    assert.equal(r.file, path.join(host.home, 'Library/LaunchAgents/kubectl-proxyout.plist'));
    const text = readFileSync(r.file, 'utf8');
    assert.match(text, /^<\?xml version="1\.0" encoding="UTF-8"\?>\n/);
    const plist = parsePlist(text) as Record<string, any>;
    assert.equal(plist.Label, 'kubectl-proxyout');
    assert.deepEqual(plist.ProgramArguments, [spec.command, ...spec.args]);
    assert.ok(plist.ProgramArguments.includes(path.join(host.home, 'work', 'a&b<c>/kc')));
    assert.deepEqual(plist.KeepAlive, { SuccessfulExit: false });
    assert.equal(plist.RunAtLoad, true);
    assert.equal(plist.StandardOutPath, spec.logFile);
    assert.equal(plist.StandardErrorPath, spec.logFile);
    assert.equal(plist.EnvironmentVariables.PATH, '/usr/local/bin:/usr/bin:/bin');
    assert.equal(plist.WorkingDirectory, host.home);
    assert.deepEqual(r.next, [`launchctl bootstrap gui/501 ${r.file}`]);
    assert.equal(r.reload, 'launchctl kill SIGHUP gui/501/kubectl-proxyout');
    if (spawnSync('plutil', ['-help'], { stdio: 'ignore' }).status !== null) {
      const lint = spawnSync('plutil', ['-lint', r.file], { encoding: 'utf8' });
      assert.equal(lint.status, 0, lint.stdout + lint.stderr);
    }
    assert.deepEqual(installService(host, spec, { dryRun: true, force: false }).next, [
      `launchctl bootout gui/501/kubectl-proxyout`,
      `launchctl bootstrap gui/501 ${r.file}`,
    ]);
    assert.deepEqual(uninstallService(host, 'kubectl-proxyout', { force: false }).next, ['launchctl bootout gui/501/kubectl-proxyout']);
  } finally {
    host.cleanup();
  }
});

test('Windows and other platforms: a one-line refusal', () => {
  const host = hostFor('win32');
  try {
    assert.throws(() => serviceFile(host, 'kubectl-proxyout'), /supports Linux .* and macOS .*, not win32/);
  } finally {
    host.cleanup();
  }
});

/** A home for the real CLI with a kubeconfig whose context "prod" exists (service-install checks it), and the env that points there. */
function cliHome(prefix: string) {
  const home = mkdtempSync(path.join(os.tmpdir(), prefix));
  const env = { HOME: home, XDG_CONFIG_HOME: '', XDG_STATE_HOME: '', KUBECTL_PROXYOUT_STATE_DIR: '', SSH_AUTH_SOCK: '', KUBECONFIG: '' };
  mkdirSync(path.join(home, '.kube'));
  writeFileSync(
    path.join(home, '.kube/config'),
    'apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: prod, context: {cluster: c, user: u}}]\n',
    { mode: 0o600 },
  );
  return { home, env };
}

test(
  'the CLI: --dry-run prints the unit and writes nothing; install prints the start lines; uninstall removes it',
  { skip: process.platform !== 'linux' ? 'the CLI half runs on Linux (the platform halves above run anywhere)' : false },
  async () => {
    const { home, env } = cliHome('proxyout-svc-cli-');
    try {
      const dry = await runCli(['service-install', '--dry-run', '--context', 'prod'], { env });
      assert.equal(dry.code, 0, dry.stderr);
      assert.match(dry.stdout, /^ExecStart=.*kubectl-proxyout --context prod --log-format json$/m);
      const file = path.join(home, '.config/systemd/user/kubectl-proxyout.service');
      assert.ok(!existsSync(file));
      const real = await runCli(['service-install', '--context', 'prod'], { env });
      assert.equal(real.code, 0, real.stderr);
      assert.equal(
        real.stdout,
        `wrote ${file}\nruns: ${process.execPath} ${binPath} (no kubectl-proxyout on your PATH is this program)\nlogs: ${home}/.local/state/kubectl-proxyout/logs/kubectl-proxyout.log\nstart it with:\n  systemctl --user daemon-reload\n  systemctl --user enable --now kubectl-proxyout.service\nafter editing its config file or kubeconfig, reload it (the routing table is read again) with:\n  systemctl --user reload kubectl-proxyout.service\n`,
      );
      assert.equal(readFileSync(file, 'utf8').trimEnd(), dry.stdout.trimEnd());
      writeFileSync(file, readFileSync(file, 'utf8') + '# mine\n');
      const refused = await runCli(['service-install', '--context', 'prod'], { env });
      assert.equal(refused.code, 1);
      assert.match(refused.stderr, /^Error: .* was changed after service-install wrote it .*--force/);
      const removed = await runCli(['service-uninstall', '--force'], { env });
      assert.equal(removed.code, 0, removed.stderr);
      assert.match(removed.stdout, /^removed .*\nstop the running service with:\n  systemctl --user stop kubectl-proxyout\.service\n/);
      assert.ok(!existsSync(file));
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  },
);

test(
  'the CLI warns when the service leaves TCP listeners without credentials, or port mappings, open to every local user',
  { skip: process.platform !== 'linux' ? 'the CLI half runs on Linux' : false },
  async () => {
    const { home, env } = cliHome('proxyout-svc-open-');
    const authFile = path.join(home, 'auth');
    writeFileSync(authFile, 'me:a-long-random-password\n', { mode: 0o600 });
    const warnings = async (...flags: string[]) => {
      const r = await runCli(['service-install', '--dry-run', '--context', 'prod', ...flags], { env });
      assert.equal(r.code, 0, r.stderr);
      return r.stderr.split('\n').filter((l) => l.startsWith('warning: ') && !l.includes('versioned directory'));
    };
    try {
      const open = await warnings('--listen-http', '127.0.0.1:3128');
      assert.equal(open.length, 1, open.join('\n'));
      assert.match(open[0]!, /^warning: --listen-socks and --listen-http on TCP without --proxy-auth-file: every local user can use your cluster access/);
      assert.deepEqual(await warnings('--proxy-auth-file', authFile), []);
      assert.deepEqual(await warnings('--listen-socks', 'unix:'), []);
      const mapped = await warnings('--proxy-auth-file', authFile, '--forward', '0=web.shop:80');
      assert.equal(mapped.length, 1, mapped.join('\n'));
      assert.match(mapped[0]!, /^warning: port mappings \(--forward\) cannot ask for a password/);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  },
);

test('newlines and carriage returns in a context name, $KUBECONFIG or PATH inject nothing: systemd escapes, a plist character references', (t) => {
  const host = hostFor('linux', { PATH: '/usr/bin:/bin\r:/opt', KUBECONFIG: '/h/kube\nExecStartPre=/bin/touch /tmp/pwned' });
  try {
    const spec = serviceSpec({
      name: 'kubectl-proxyout',
      flags: { context: ['prod\nExecStartPre=/bin/touch /tmp/pwned', 'st\raging'], 'listen-socks': '127.0.0.1:1080' },
      invocation: { command: process.execPath, args: ['/opt/kubectl-proxyout/bin/kubectl-proxyout'] },
      stateRoot: path.join(host.home, '.local/state/kubectl-proxyout'),
      env: host.env,
      cwd: path.join(host.home, 'work'),
      home: host.home,
    });
    const r = installService(host, spec, { dryRun: false, force: false });
    const text = readFileSync(r.file, 'utf8');
    const directives = text
      .split('\n')
      .filter((l) => /^[A-Za-z]+=/.test(l))
      .map((l) => l.slice(0, l.indexOf('=')));
    assert.equal(directives.includes('ExecStartPre'), false, text);
    assert.equal(text.includes('\r'), false, 'no carriage return reaches the file');
    assert.match(text, /ExecStart=.* --context "prod\\x0aExecStartPre=\/bin\/touch \/tmp\/pwned" --context "st\\x0daging"/);
    if (!verifyRuns) return t.skip('systemd-analyze is not installed (apt-get install systemd)');
    const v = spawnSync('systemd-analyze', ['verify', r.file], { encoding: 'utf8' });
    assert.equal(v.status, 0, v.stderr);
    assert.equal(v.stderr.trim(), '', 'no directive systemd ignores or refuses');
  } finally {
    host.cleanup();
  }
  const mac = hostFor('darwin', { KUBECONFIG: '/h/kube\nconfig\r' });
  try {
    const spec = serviceSpec({
      name: 'x',
      flags: { context: ['a\nb'], 'listen-socks': '127.0.0.1:1080' },
      invocation: { command: '/bin/kubectl-proxyout', args: [] },
      stateRoot: path.join(mac.home, 's'),
      env: mac.env,
      cwd: mac.home,
      home: mac.home,
    });
    const text = readFileSync(installService(mac, spec, { dryRun: false, force: false }).file, 'utf8');
    assert.match(text, /<string>a&#10;b<\/string>/);
    assert.match(text, /<string>\/h\/kube&#10;config&#13;<\/string>/);
  } finally {
    mac.cleanup();
  }
});
