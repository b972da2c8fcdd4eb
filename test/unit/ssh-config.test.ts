import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { SshConfigFile, SshConfigError, matchList } from '../../src/ssh/config.js';
import { parseJumpSpec, resolveChain, sshDashW } from '../../src/ssh/chain.js';
import { scratchDir } from '../helpers/scratch-dir.js';

const HOME = '/home/u';
const cfg = (text: string) => SshConfigFile.fromText(text, { file: `${HOME}/.ssh/config`, home: HOME, localUser: 'local' });
const hops = (text: string, target: string) => resolveChain(cfg(text), target, { authSock: '' });
const route = (text: string, target: string) => hops(text, target).map((h) => `${h.user}@${h.hostName}:${h.port}`);

test('Host patterns: wildcards, "?" is exactly one character, negation rejects the whole line', () => {
  assert.equal(matchList(['*.example.com'], 'a.example.com'), true);
  assert.equal(matchList(['db?'], 'db1'), true);
  assert.equal(matchList(['db?'], 'db'), false); // ssh-config's own glob would take this
  assert.equal(matchList(['*', '!bastion'], 'bastion'), false);
  assert.equal(matchList(['!bastion'], 'web'), false); // only negations: nothing matches
  const c = cfg('Host * !bastion\n  ProxyJump bastion\nHost bastion\n  HostName 192.0.2.1\n');
  assert.equal(c.optionsFor('web').get('proxyjump')?.[0], 'bastion');
  assert.equal(c.optionsFor('bastion').get('proxyjump'), undefined);
});

test('the first value obtained wins; IdentityFile accumulates; keys are case-insensitive', () => {
  const c = cfg('Host web\n  hostname 10.0.0.5\n  IdentityFile ~/.ssh/web\nHost *\n  HostName other\n  Port 2200\n  User=ops\n  IdentityFile ~/.ssh/all\n');
  const o = c.optionsFor('web');
  assert.deepEqual([o.get('hostname'), o.get('port'), o.get('user'), o.get('identityfile')], [['10.0.0.5'], ['2200'], ['ops'], ['~/.ssh/web', '~/.ssh/all']]);
  assert.deepEqual(hops('Host web\n  HostName 10.0.0.5\n  IdentityFile ~/.ssh/web\n', 'web')[0]!.identityFiles, [`${HOME}/.ssh/web`]);
});

test('ProxyJump chains of any length, with user@host:port, each hop read from the config', () => {
  const text = [
    'Host target',
    '  HostName 10.2.0.10',
    '  ProxyJump j1,admin@j2:2202,j3',
    'Host j1',
    '  HostName 192.0.2.1',
    '  User one',
    '  ProxyJump j0',
    'Host j2',
    '  HostName 10.1.0.2',
    '  ProxyJump ignored-because-J-overrides',
    'Host j3',
    '  HostName 10.1.0.3',
    'Host j0',
    '  HostName 198.51.100.7',
    '  Port 2222',
    '',
  ].join('\n');
  assert.deepEqual(route(text, 'target'), ['local@198.51.100.7:2222', 'one@192.0.2.1:22', 'admin@10.1.0.2:2202', 'local@10.1.0.3:22', 'local@10.2.0.10:22']);
  assert.deepEqual(route('Host a\n  ProxyJump ssh://u@[fd00::1]:2022\n', 'root@a:2200'), ['u@fd00::1:2022', 'root@a:2200']);
  assert.deepEqual(route('Host a\n  ProxyJump b\nHost b\n  ProxyJump none\n', 'a'), ['local@b:22', 'local@a:22']);
  assert.throws(() => hops('Host a\n  ProxyJump b\nHost b\n  ProxyJump a\n', 'a'), /longer than 16 hops \(a loop\?\)/);
});

test('"ProxyCommand ssh -W %h:%p jump" is a jump; any other ProxyCommand runs with tokens expanded', () => {
  assert.deepEqual(sshDashW('ssh -q -W %h:%p admin@jump'), { host: 'jump', user: 'admin', port: undefined });
  assert.deepEqual(sshDashW('/usr/bin/ssh -l ops -p 2222 jump -W [%h]:%p'), { host: 'jump', user: 'ops', port: 2222 });
  assert.equal(sshDashW('ssh -o ProxyCommand=x -W %h:%p jump'), undefined);
  assert.equal(sshDashW('nc -X connect -x proxy:3128 %h %p'), undefined);
  assert.deepEqual(route('Host t\n  HostName 10.0.0.9\n  ProxyCommand ssh -W %h:%p j\nHost j\n  HostName 192.0.2.5\n', 't'), [
    'local@192.0.2.5:22',
    'local@10.0.0.9:22',
  ]);
  const [hop] = hops('Host t\n  HostName 10.0.0.9\n  User r\n  ProxyCommand nc -X connect -x proxy:3128 %h %p -- %r %n %%\n', 't');
  assert.equal(hop!.proxyCommand, 'nc -X connect -x proxy:3128 10.0.0.9 22 -- r t %');
  assert.throws(() => hops('Host t\n  ProxyCommand nc %Z\n', 't'), /host t .*ProxyCommand uses the token %Z, which is not supported/);
});

test('a ProxyCommand is the rest of its line exactly as written, quotes where they stood (readconf.c)', () => {
  const command = `sh -c 'echo "looking up jump"; exec nc "%h" %p' # not a comment to ssh`;
  for (const line of [`ProxyCommand ${command}`, `ProxyCommand=${command}  `, `\tproxycommand = ${command}`]) {
    const [hop] = hops(`Host t\n  HostName 10.0.0.9\n${line}\nHost other\n  ProxyCommand nc x y\n`, 't');
    assert.equal(hop!.proxyCommand, `sh -c 'echo "looking up jump"; exec nc "10.0.0.9" 22' # not a comment to ssh`, line);
  }
});

test('options we do not follow are refused at start, naming the option and the host', () => {
  const refused = (text: string, pattern: RegExp) =>
    assert.throws(
      () => hops(text, 'h'),
      (err: unknown) => err instanceof SshConfigError && pattern.test(err.message),
    );
  refused('Host h\n  PermitLocalCommand yes\n  LocalCommand echo hi\n', /host h .*PermitLocalCommand yes is not supported: runs LocalCommand/);
  refused('Host h\n  CertificateFile ~/.ssh/id-cert.pub\n', /host h .*CertificateFile .* certificate authentication is not supported/);
  refused('Host h\n  StrictHostKeyChecking no\n', /StrictHostKeyChecking no is not supported: host keys are always checked/);
  refused('Host h\n  StrictHostKeyChecking False\n', /StrictHostKeyChecking False is not supported: host keys are always checked/);
  refused('Host h\n  UserKnownHostsFile /dev/null\n', /UserKnownHostsFile \/dev\/null is not supported/);
  refused('Match exec "true"\n  User x\n', /"Match exec" is not supported/);
  // Options that only matter to an interactive ssh are ignored: we keep our own multiplexed connection.
  assert.equal(hops('Host h\n  ControlMaster auto\n  ControlPersist 10m\n  ForwardAgent yes\n  LocalForward 8080 x:80\n', 'h').length, 1);
  assert.equal(hops('Host h\n  StrictHostKeyChecking accept-new\n', 'h')[0]!.hostKeyPolicy, 'accept-new');
  assert.equal(hops('Host h\n  StrictHostKeyChecking ask\n', 'h')[0]!.hostKeyPolicy, 'yes');
  assert.equal(hops('Host h\n  StrictHostKeyChecking true\n', 'h')[0]!.hostKeyPolicy, 'yes');
});

test('Include (relative to ~/.ssh, globs) and Match host/originalhost/user', () => {
  const home = scratchDir('sshcfg-');
  mkdirSync(path.join(home, '.ssh', 'conf.d'), { recursive: true });
  writeFileSync(path.join(home, '.ssh', 'conf.d', '10-jump.conf'), 'Host jump\n  HostName 192.0.2.44\n  Port 2022\n');
  writeFileSync(path.join(home, '.ssh', 'conf.d', '20-x.conf'), 'Host *.corp\n  ProxyJump jump\n');
  writeFileSync(path.join(home, '.ssh', 'config'), 'Include conf.d/*.conf\nMatch originalhost db.corp user local\n  Port 5022\n');
  const c = new SshConfigFile({ home, localUser: 'local' });
  assert.deepEqual(
    resolveChain(c, 'db.corp', { authSock: '' }).map((h) => `${h.hostName}:${h.port}`),
    ['192.0.2.44:2022', 'db.corp:5022'],
  );
  assert.deepEqual(
    resolveChain(c, 'ops@web.corp', { authSock: '' }).map((h) => `${h.user}@${h.hostName}:${h.port}`),
    ['local@192.0.2.44:2022', 'ops@web.corp:22'],
  );
  // No ~/.ssh/config at all: a plain host name still works.
  const empty = new SshConfigFile({ home: scratchDir('sshcfg-'), localUser: 'me' });
  assert.deepEqual(
    resolveChain(empty, 'host.example:2222', { authSock: '' }).map((h) => `${h.user}@${h.hostName}:${h.port}`),
    ['me@host.example:2222'],
  );
});

test('agent socket: IdentityAgent beats SSH_AUTH_SOCK, "none" turns it off; keep-alive defaults to 15 s', () => {
  const c = cfg('Host a\n  IdentityAgent ~/agent.sock\nHost b\n  IdentityAgent none\nHost d\n  ServerAliveInterval 5\n  ServerAliveCountMax 2\n');
  const env = { authSock: '/run/agent' };
  assert.equal(resolveChain(c, 'a', env)[0]!.agentSocket, `${HOME}/agent.sock`);
  assert.equal(resolveChain(c, 'b', env)[0]!.agentSocket, undefined);
  assert.equal(resolveChain(c, 'c', env)[0]!.agentSocket, '/run/agent');
  assert.deepEqual(
    [
      resolveChain(c, 'c', env)[0]!.serverAliveIntervalMs,
      resolveChain(c, 'd', env)[0]!.serverAliveIntervalMs,
      resolveChain(c, 'd', env)[0]!.serverAliveCountMax,
    ],
    [15_000, 5_000, 2],
  );
});

test('jump specs: [user@]host[:port], IPv6 in brackets, bad ones refused', () => {
  assert.deepEqual(parseJumpSpec('a@b:22'), { user: 'a', host: 'b', port: 22 });
  assert.deepEqual(parseJumpSpec('[::1]:2222'), { user: undefined, host: '::1', port: 2222 });
  assert.throws(() => parseJumpSpec('b:99999'), /not a jump host/);
  assert.throws(() => parseJumpSpec('@b'), /not a jump host/);
});

test('UserKnownHostsFile none and GlobalKnownHostsFile none are no files, as OpenSSH reads them, not files named "none"', () => {
  const [none] = hops('Host a\n  UserKnownHostsFile none\n  GlobalKnownHostsFile none\n', 'a');
  assert.deepEqual([none!.knownHostsFiles, none!.globalKnownHostsFiles], [[], []]);
  const [some] = hops('Host b\n  UserKnownHostsFile ~/.ssh/kh_a ~/.ssh/kh_b\n', 'b');
  assert.deepEqual(some!.knownHostsFiles, [`${HOME}/.ssh/kh_a`, `${HOME}/.ssh/kh_b`]);
});

test('ProxyJump and ProxyCommand are one setting: the first read, "none" included, wins', () => {
  // A jump host that turns the proxy off must not pick up the Host * ProxyJump to itself.
  const off = 'Host bastion\n  HostName 10.0.0.1\n  ProxyCommand none\nHost *\n  ProxyJump bastion\n';
  assert.deepEqual(route(off, 'bastion'), ['local@10.0.0.1:22']);
  assert.deepEqual(route(off, 'web'), ['local@10.0.0.1:22', 'local@web:22']);
  // ProxyJump first, a ProxyCommand from Host * later: the jump, not a "both set" error.
  const jump = hops('Host target\n  ProxyJump bastion\nHost *\n  ProxyCommand nc %h %p\n', 'target');
  assert.deepEqual(
    jump.map((h) => [h.alias, h.proxyCommand]),
    [
      ['bastion', 'nc bastion 22'],
      ['target', undefined],
    ],
  );
  assert.deepEqual(route('Host h\n  ProxyJump none\n  ProxyCommand ssh -W %h:%p j\n', 'h'), ['local@h:22']);
});

test('Host words are patterns as written: no comma lists, case-sensitive; Match host ignores case, Match user does not', () => {
  const c = cfg('Host web1,web2\n  Port 2222\nHost Bastion\n  User upper\nHost *\n  User other\n');
  assert.equal(c.optionsFor('web1').get('port'), undefined);
  assert.deepEqual(c.optionsFor('web1,web2').get('port'), ['2222']);
  assert.deepEqual([c.optionsFor('bastion').get('user'), c.optionsFor('Bastion').get('user')], [['other'], ['upper']]);
  const m = cfg('Match host DB.example originalhost DB\n  Port 2200\nMatch user Ops\n  Port 2300\nMatch localuser LOCAL\n  Port 2400\n');
  assert.deepEqual(m.optionsFor('db', 'ops').get('port'), undefined);
  assert.deepEqual(cfg('Host db\n  HostName db.EXAMPLE\nMatch host DB.example originalhost DB\n  Port 2200\n').optionsFor('db').get('port'), ['2200']);
  assert.deepEqual(m.optionsFor('x', 'Ops').get('port'), ['2300']);
  // known_hosts patterns stay case-insensitive (hostfile.c match_hostname).
  assert.equal(matchList(['*.Example.COM'], 'a.example.com', true), true);
});

test('Match host sees HostName with %h and %% expanded', () => {
  const text = 'Host db1 db2\n  HostName %h.corp.example\nMatch host db?.corp.example\n  User ops\nMatch !host db?.corp.example\n  Port 2200\n';
  assert.deepEqual(route(text, 'db1'), ['ops@db1.corp.example:22']);
  assert.deepEqual(cfg('Host a\n  HostName 100%%.%h\nMatch host 100%.a\n  Port 2\n').optionsFor('a').get('port'), ['2']);
});

test('${VAR} in IdentityAgent, IdentityFile, UserKnownHostsFile and Include; "IdentityAgent $VAR"; unset is an error', () => {
  const home = scratchDir('sshcfg-');
  mkdirSync(path.join(home, '.ssh'), { recursive: true });
  writeFileSync(path.join(home, 'extra.conf'), 'Host inc\n  Port 2022\n');
  const env = { RUN: '/run/user/1', MY_AGENT: '/run/agent.sock', CONF: home };
  const text = [
    'Include ${CONF}/extra.conf',
    'Host a',
    '  IdentityAgent ${RUN}/agent.sock',
    '  IdentityFile ${RUN}/id_%r',
    '  UserKnownHostsFile ${RUN}/known_hosts',
    'Host b',
    '  IdentityAgent $MY_AGENT',
    'Host c',
    '  IdentityAgent $NOT_SET',
    'Host d',
    '  IdentityFile ${NOT_SET}/id',
    '',
  ].join('\n');
  writeFileSync(path.join(home, '.ssh', 'config'), text);
  const c = new SshConfigFile({ home, localUser: 'me', env });
  const [a] = resolveChain(c, 'a', { authSock: '' });
  assert.deepEqual([a!.agentSocket, a!.identityFiles, a!.knownHostsFiles], ['/run/user/1/agent.sock', ['/run/user/1/id_me'], ['/run/user/1/known_hosts']]);
  assert.equal(resolveChain(c, 'b', { authSock: '/other' })[0]!.agentSocket, '/run/agent.sock');
  assert.equal(resolveChain(c, 'c', { authSock: '/other' })[0]!.agentSocket, undefined);
  assert.equal(resolveChain(c, 'inc', { authSock: '' })[0]!.port, 2022);
  assert.throws(() => resolveChain(c, 'd', { authSock: '' }), /host d .*IdentityFile uses \$\{NOT_SET\}, which is not set in the environment/);
  writeFileSync(path.join(home, '.ssh', 'config'), 'Include ${NOPE}/x.conf\n');
  assert.throws(() => new SshConfigFile({ home, localUser: 'me', env }), /Include uses \$\{NOPE\}, which is not set/);
});

test('the system file is read after the user file, first value wins; its relative Includes are under its directory', () => {
  const home = scratchDir('sshcfg-');
  const etc = scratchDir('sshcfg-etc-');
  mkdirSync(path.join(home, '.ssh'));
  mkdirSync(path.join(etc, 'ssh_config.d'));
  writeFileSync(path.join(home, '.ssh', 'config'), 'Host b\n  HostName 127.0.0.1\n  Port 2200\n');
  writeFileSync(path.join(etc, 'ssh_config.d', '10-user.conf'), 'Host *\n  User fromsys\n');
  writeFileSync(path.join(etc, 'ssh_config'), 'Include ssh_config.d/*.conf\nHost *\n  Port 22\n  HashKnownHosts yes\n');
  const systemFile = path.join(etc, 'ssh_config');
  const [hop] = resolveChain(new SshConfigFile({ home, localUser: 'me', systemFile }), 'b', { authSock: '' });
  assert.deepEqual([hop!.user, hop!.hostName, hop!.port, hop!.hashKnownHosts], ['fromsys', '127.0.0.1', 2200, true]);
  // A test's own home or file never reads /etc/ssh/ssh_config unless it names it.
  assert.equal(resolveChain(new SshConfigFile({ home, localUser: 'me' }), 'b', { authSock: '' })[0]!.hashKnownHosts, false);
  assert.equal(new SshConfigFile({ home, localUser: 'me', systemFile: null }).optionsFor('b').get('user'), undefined);
});

test('UserKnownHostsFile: %k (HostKeyAlias lowercased, else the host as asked for) and %i as `ssh -G` expands them; %C refused', (t) => {
  const text = 'Host Aliased\n  HostKeyAlias Gate.Example\nHost *\n  HostName 10.0.0.9\n  UserKnownHostsFile ~/kh/%k ~/kh/uid-%i\n';
  const files = (target: string) => hops(text, target)[0]!.knownHostsFiles;
  const uid = String(process.getuid?.());
  assert.deepEqual(files('Aliased'), [`${HOME}/kh/gate.example`, `${HOME}/kh/uid-${uid}`]);
  assert.deepEqual(files('MyHost'), [`${HOME}/kh/MyHost`, `${HOME}/kh/uid-${uid}`]);
  assert.throws(() => hops('Host t\n  UserKnownHostsFile ~/kh/%C\n', 't'), /UserKnownHostsFile uses the token %C, whose value depends on the OpenSSH version/);
  // The real ssh, where installed, agrees (its ~ is this user's home, so compare the tails).
  const dir = scratchDir('ssh-g-');
  writeFileSync(path.join(dir, 'config'), text);
  for (const target of ['Aliased', 'MyHost']) {
    const run = spawnSync('ssh', ['-G', '-F', path.join(dir, 'config'), target], { encoding: 'utf8' });
    if (run.error) return t.skip('ssh is not installed');
    const line = run.stdout.split('\n').find((l) => l.startsWith('userknownhostsfile '))!;
    const tails = line
      .split(' ')
      .slice(1)
      .map((f) => f.slice(f.indexOf('/kh/')));
    assert.deepEqual(
      tails,
      files(target).map((f) => f.slice(f.indexOf('/kh/'))),
    );
  }
});
