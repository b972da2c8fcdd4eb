// A hop reached through a ProxyCommand (ssh_config ProxyCommand, run as sshconnect.c runs it):
// the command's process ends with every login that fails, whatever fails first, and a command
// that exits with a failure is named with its status and its last word on stderr. And a chain
// that keeps failing the same way says so once.
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadSsh2 } from '../../src/ssh/ssh2-lib.js';
import { SshConfigFile } from '../../src/ssh/config.js';
import { resolveChain } from '../../src/ssh/chain.js';
import { loadCredentials } from '../../src/ssh/auth.js';
import { SshChainConnection } from '../../src/ssh/connection.js';
import { login, proxyCommandStream } from '../../src/ssh/hop-login.js';
import { createLogger } from '../../src/core/log.js';

before(async () => {
  await loadSsh2();
});

function tempDir(t: { after(fn: () => void): void }): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'proxyout-proxycommand-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Processes whose command line is exactly `line`. */
const running = (line: string): string[] =>
  execFileSync('sh', ['-c', `pgrep -fx '${line}' || true`], { encoding: 'utf8' })
    .split('\n')
    .filter(Boolean);

test('a login that fails before ssh2 takes the transport (the agent went away) ends the ProxyCommand, and nothing is left uncaught', async (t) => {
  const dir = tempDir(t);
  const agentSock = path.join(dir, 'agent.sock');
  const agent = net.createServer().listen(agentSock);
  await once(agent, 'listening');
  const marker = 'sleep 31.25';
  writeFileSync(path.join(dir, 'config'), `Host p\n  HostName 127.0.0.1\n  IdentityFile ${dir}/none\n  ProxyCommand ${marker}\n`);
  const hops = resolveChain(new SshConfigFile({ file: path.join(dir, 'config'), home: dir, localUser: 'root' }), 'p', { authSock: agentSock });
  loadCredentials(hops[0]!); // what the route checks at start: the agent is there
  agent.close(); // and then goes (a session ended, an agent restarted elsewhere)
  const uncaught: unknown[] = [];
  const onUncaught = (err: unknown) => uncaught.push(err);
  process.on('uncaughtException', onUncaught);
  t.after(() => process.off('uncaughtException', onUncaught));

  const chain = new SshChainConnection(hops, { initialBackoffMs: 60_000 });
  await assert.rejects(chain.connect(), /agent\.sock/);
  await chain.close();
  for (let i = 0; i < 50 && running(marker).length > 0; i++) await new Promise((r) => setTimeout(r, 20));
  assert.deepEqual(running(marker), [], 'the ProxyCommand was ended with the failed login');
  await new Promise((r) => setTimeout(r, 300));
  assert.deepEqual(uncaught, []);
});

test('a ProxyCommand that fails: the hop error names its exit status and its last line on stderr', async (t) => {
  const dir = tempDir(t);
  const command = `sh -c 'echo "looking up jump"; echo "nc: connect to 10.1.2.3 port 22 (tcp) failed: Connection refused" >&2; exit 1'`;
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', path.join(dir, 'key')]);
  writeFileSync(path.join(dir, 'config'), `Host p\n  HostName 127.0.0.1\n  IdentityFile ${dir}/key\n  ProxyCommand ${command}\n`);
  const [hop] = resolveChain(new SshConfigFile({ file: path.join(dir, 'config'), home: dir, localUser: 'root' }), 'p', { authSock: '' });
  await assert.rejects(
    login(hop!, proxyCommandStream(hop!.proxyCommand!, undefined), new AbortController().signal),
    /ProxyCommand exited with status 1: nc: connect to 10\.1\.2\.3 port 22 \(tcp\) failed: Connection refused/,
  );
});

test('a chain that keeps failing the same way warns once; each retry is logged at debug', async (t) => {
  const dir = tempDir(t);
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', path.join(dir, 'key')]);
  const closed = net.createServer().listen(0, '127.0.0.1');
  await once(closed, 'listening');
  const port = (closed.address() as net.AddressInfo).port;
  closed.close();
  writeFileSync(path.join(dir, 'config'), `Host gone\n  HostName 127.0.0.1\n  Port ${port}\n  IdentityFile ${dir}/key\n`);
  const hops = resolveChain(new SshConfigFile({ file: path.join(dir, 'config'), home: dir, localUser: 'root' }), 'gone', { authSock: '' });
  const lines: Array<{ level: number; msg: string }> = [];
  const log = createLogger('debug', { write: (line: string) => void lines.push(JSON.parse(line) as { level: number; msg: string }) });
  const chain = new SshChainConnection(hops, { log, initialBackoffMs: 20, maxBackoffMs: 40 });
  t.after(() => chain.close());
  await assert.rejects(chain.connect());
  const down = () => lines.filter((l) => /ssh chain (still )?down/.test(l.msg));
  for (let i = 0; i < 100 && down().length < 4; i++) await new Promise((r) => setTimeout(r, 20));
  assert.ok(down().length >= 4, `retried: ${down().length}`);
  assert.deepEqual(
    down().map((l) => l.msg),
    ['ssh chain down', ...Array(down().length - 1).fill('ssh chain still down')],
  );
  assert.equal(down()[0]!.level, 40, 'the first at warn');
});
