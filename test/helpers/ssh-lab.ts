// A small network of real OpenSSH servers for the ssh route's tests:
//
//   this process ──TCP 127.0.0.1:P──▶ jump1 (netns A, sshd -i per connection, inetd style)
//                                        │ veth 10.77.12.0/24
//                                        ▼
//                                     jump2 (netns B, sshd -D on 10.77.12.2:2222)
//                                        │ veth 10.77.23.0/24
//                                        ▼
//                                     target (netns C, echo servers on 10.77.23.3; "target.internal"
//                                             in jump2's /etc/hosts only)
//
// The 10.77.x addresses exist only inside the namespaces the lab creates: this host has no
// interface on those networks, so only the chain reaches the target (the tests never dial them
// from here: on a machine with a default route that would send packets off the machine). The
// target's "whoami" port tells who dialled it: always jump2's 10.77.23.2.
// jump1 is reached from the host through a loopback listener that hands each accepted socket to
// `ip netns exec A sshd -i` (the socket itself is the sshd's stdin/stdout), so restarting jump1
// is killing those sshd processes.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { once } from 'node:events';

export const JUMP2 = { host: '10.77.12.2', port: 2222 };
/** Every lab address is in here; the host routes it nowhere (see startSshLab). */
const LAB_NET = '10.77.0.0/16';
export const TARGET = { ip: '10.77.23.3', name: 'target.internal', echoPort: 7000, closedPort: 7001, whoamiPort: 7002 };

export interface SshLab {
  dir: string;
  /** The lab's network namespaces: jump1's (a), jump2's (b), the target's (c). */
  namespaces: { a: string; b: string; c: string };
  /** jump1's loopback port on this host. */
  jump1Port: number;
  /** SSH connections to jump1 still open (each its own sshd on the jump host). */
  readonly jump1Sessions: number;
  /** A command whose stdin/stdout is a fresh jump1 sshd (for ProxyCommand). */
  jump1Command: string;
  /** Unencrypted user key, and a passphrase-protected copy of another key (for the agent). */
  userKey: string;
  encryptedKey: string;
  /** "name type base64" lines for known_hosts (jump1 also has an RSA and an ECDSA host key). */
  knownHostsLines: { jump1: string; jump2: string; jump1Rsa: string; jump1Ecdsa: string };
  /** SHA256 fingerprints as ssh-keygen -l prints them. */
  fingerprints: { jump1: string; jump2: string };
  /** Starts an ssh-agent holding the encrypted key; returns its socket. */
  startAgent(): Promise<string>;
  /** Drops every connection to jump1 and refuses for `downMs`, then serves again (same host key). */
  restartJump1(downMs: number): Promise<void>;
  /**
   * Stops jump2's sshd processes (SIGSTOP): a jump host that hangs. Its kernel still accepts and
   * acknowledges what arrives, until its buffers are full; nothing answers. resumeJump2() undoes it.
   */
  hangJump2(): void;
  resumeJump2(): void;
  /** Ends every session on jump2 (SIGTERM to their sshd processes, as a restart does); it keeps listening. */
  endJump2Sessions(): void;
  /** Writes an ssh config with these extra lines per host; returns its path. */
  writeConfig(name: string, extra?: { jump1?: string[]; jump2?: string[]; all?: string[] }): string;
  close(): Promise<void>;
}

/** Namespaces of labs whose test process died without cleaning up (a killed run): ours, by name. */
function removeStaleLabs(): void {
  const list = spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' }).stdout ?? '';
  for (const name of list.split('\n').map((l) => l.split(' ')[0]!)) {
    const m = /^pxo(\d+)[abc]$/.exec(name);
    if (!m || pidAlive(Number(m[1]))) continue;
    for (const pid of (spawnSync('ip', ['netns', 'pids', name], { encoding: 'utf8' }).stdout ?? '').split(/\s+/).filter(Boolean)) {
      try {
        process.kill(Number(pid), 'SIGKILL');
      } catch {
        // gone
      }
    }
    spawnSync('ip', ['netns', 'del', name]);
    rmSync(`/etc/netns/${name}`, { recursive: true, force: true });
  }
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Why the lab cannot run here, or undefined when it can. */
export function sshLabUnavailable(): string | undefined {
  if (process.getuid?.() !== 0) return 'needs root (network namespaces)';
  for (const tool of ['/usr/sbin/sshd', 'ssh-keygen', 'ssh-agent', 'ssh-add', 'ip']) {
    if (spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0) return `${tool} is not installed (apt-get install openssh-server openssh-client iproute2)`;
  }
  const probe = `pxoprobe${process.pid}`;
  const made = spawnSync('ip', ['netns', 'add', probe]);
  if (made.status !== 0) return `cannot create a network namespace: ${made.stderr.toString().trim()}`;
  spawnSync('ip', ['netns', 'del', probe]);
  return undefined;
}

function run(cmd: string, args: string[], input?: string): string {
  const r = spawnSync(cmd, args, { input, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')}: ${r.stderr || r.stdout}`);
  return r.stdout;
}

/** Waits for a line matching `pattern` on the child's stderr or stdout. */
async function waitFor(child: ChildProcess, pattern: RegExp, what: string): Promise<void> {
  let seen = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what} did not start: ${seen}`)), 10_000);
    const onData = (chunk: Buffer) => {
      seen += chunk.toString();
      if (pattern.test(seen)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stderr?.on('data', onData);
    child.stdout?.on('data', onData);
    child.once('exit', (code) => reject(new Error(`${what} exited (${code}): ${seen}`)));
  });
}

function sshdConfig(dir: string, name: string, listen?: string, moreHostKeys: string[] = []): string {
  const file = path.join(dir, `${name}_sshd_config`);
  writeFileSync(
    file,
    [
      ...(listen ? [`ListenAddress ${listen}`] : []),
      `HostKey ${dir}/${name}_host_key`,
      ...moreHostKeys.map((k) => `HostKey ${dir}/${k}`),
      `PidFile ${dir}/${name}.pid`,
      `AuthorizedKeysFile ${dir}/authorized_keys`,
      'PermitRootLogin prohibit-password',
      'PasswordAuthentication no',
      'KbdInteractiveAuthentication no',
      'UsePAM no',
      'StrictModes no',
      'AllowTcpForwarding yes',
      'UseDNS no',
      'LogLevel INFO',
      '',
    ].join('\n'),
  );
  return file;
}

export async function startSshLab(): Promise<SshLab> {
  const dir = mkdtempSync(path.join(tmpdir(), 'ssh-lab-'));
  const id = String(process.pid);
  const ns = { a: `pxo${id}a`, b: `pxo${id}b`, c: `pxo${id}c` };
  const children = new Set<ChildProcess>();
  const spawned = (child: ChildProcess) => {
    children.add(child);
    child.once('exit', () => children.delete(child));
    return child;
  };
  const cleanup = () => {
    for (const c of children) c.kill('SIGKILL');
    for (const n of Object.values(ns)) {
      // sshd's per-connection children are ours too (started in our namespaces): end them by pid.
      const pids = spawnSync('ip', ['netns', 'pids', n], { encoding: 'utf8' }).stdout ?? '';
      for (const pid of pids.split(/\s+/).filter(Boolean)) {
        try {
          process.kill(Number(pid), 'SIGKILL');
        } catch {
          // already gone
        }
      }
      spawnSync('ip', ['netns', 'del', n]);
    }
    rmSync(`/etc/netns/${ns.b}`, { recursive: true, force: true });
    // The last lab out takes the guard route away.
    const others = (spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' }).stdout ?? '').split('\n').some((l) => /^pxo\d+[abc]\b/.test(l));
    if (!others) spawnSync('ip', ['route', 'del', 'unreachable', LAB_NET]);
  };
  removeStaleLabs();
  process.once('exit', cleanup);
  // A guard for bugs: this host has no interface on the lab's networks, and a connection to them
  // that did not go through the chain must fail here, never leave the machine by its default route.
  run('ip', ['route', 'replace', 'unreachable', LAB_NET]);
  try {
    mkdirSync('/run/sshd', { recursive: true, mode: 0o755 });
    for (const n of Object.values(ns)) {
      run('ip', ['netns', 'add', n]);
      run('ip', ['-n', n, 'link', 'set', 'lo', 'up']);
    }
    const veth = (left: string, leftIp: string, right: string, rightIp: string, tag: string) => {
      run('ip', ['-n', left, 'link', 'add', `v${tag}l`, 'type', 'veth', 'peer', 'name', `v${tag}r`, 'netns', right]);
      run('ip', ['-n', left, 'addr', 'add', leftIp, 'dev', `v${tag}l`]);
      run('ip', ['-n', right, 'addr', 'add', rightIp, 'dev', `v${tag}r`]);
      run('ip', ['-n', left, 'link', 'set', `v${tag}l`, 'up']);
      run('ip', ['-n', right, 'link', 'set', `v${tag}r`, 'up']);
    };
    veth(ns.a, '10.77.12.1/24', ns.b, '10.77.12.2/24', '12');
    veth(ns.b, '10.77.23.2/24', ns.c, '10.77.23.3/24', '23');
    // jump2's resolver knows the target's name; `ip netns exec` bind-mounts /etc/netns/NS/hosts.
    mkdirSync(`/etc/netns/${ns.b}`, { recursive: true });
    writeFileSync(`/etc/netns/${ns.b}/hosts`, `127.0.0.1 localhost\n${TARGET.ip} ${TARGET.name}\n`);

    for (const name of ['jump1', 'jump2']) run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', name, '-f', `${dir}/${name}_host_key`]);
    // jump1 has the three key types a stock sshd generates; clients prefer ed25519 of them.
    run('ssh-keygen', ['-q', '-t', 'rsa', '-b', '2048', '-N', '', '-C', 'jump1', '-f', `${dir}/jump1_host_key_rsa`]);
    run('ssh-keygen', ['-q', '-t', 'ecdsa', '-N', '', '-C', 'jump1', '-f', `${dir}/jump1_host_key_ecdsa`]);
    run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'user', '-f', `${dir}/user_key`]);
    run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', 'not-typed-by-anyone', '-C', 'agent', '-f', `${dir}/agent_key`]);
    writeFileSync(`${dir}/authorized_keys`, readFileSync(`${dir}/user_key.pub`, 'utf8') + readFileSync(`${dir}/agent_key.pub`, 'utf8'));

    const cfg1 = sshdConfig(dir, 'jump1', undefined, ['jump1_host_key_rsa', 'jump1_host_key_ecdsa']);
    const cfg2 = sshdConfig(dir, 'jump2', `${JUMP2.host}:${JUMP2.port}`);
    const jump2 = spawned(spawn('ip', ['netns', 'exec', ns.b, '/usr/sbin/sshd', '-D', '-e', '-f', cfg2], { stdio: ['ignore', 'pipe', 'pipe'] }));
    await waitFor(jump2, /Server listening on/, 'jump2 sshd');

    writeFileSync(
      `${dir}/echo.mjs`,
      `import net from 'node:net';
       net.createServer((s) => s.end(s.remoteAddress + '\\n')).listen(${TARGET.whoamiPort}, '${TARGET.ip}');
       net.createServer((s) => { s.on('error', () => {}); s.pipe(s); }).listen(${TARGET.echoPort}, '${TARGET.ip}', () => console.log('ready'));`,
    );
    const echo = spawned(spawn('ip', ['netns', 'exec', ns.c, process.execPath, `${dir}/echo.mjs`], { stdio: ['ignore', 'pipe', 'pipe'] }));
    await waitFor(echo, /ready/, 'target echo server');

    // jump1: inetd style, each accepted socket becomes an sshd's stdin and stdout.
    const jump1Sessions = new Set<{ socket: net.Socket; child: ChildProcess }>();
    const serve = (socket: net.Socket) => {
      const child = spawned(spawn('ip', ['netns', 'exec', ns.a, '/usr/sbin/sshd', '-i', '-e', '-f', cfg1], { stdio: [socket, socket, 'ignore'] }));
      const session = { socket, child };
      jump1Sessions.add(session);
      child.once('exit', () => {
        jump1Sessions.delete(session);
        socket.destroy();
      });
      socket.on('error', () => undefined);
    };
    let listener = net.createServer({ pauseOnConnect: true }, serve);
    listener.listen(0, '127.0.0.1');
    await once(listener, 'listening');
    const jump1Port = (listener.address() as net.AddressInfo).port;

    const line = (name: string, label: string, suffix = '') =>
      `${label} ${readFileSync(`${dir}/${name}_host_key${suffix}.pub`, 'utf8').trim().split(/\s+/).slice(0, 2).join(' ')}`;
    const fp = (name: string) => run('ssh-keygen', ['-l', '-f', `${dir}/${name}_host_key.pub`]).split(/\s+/)[1]!;
    let agent: ChildProcess | undefined;
    let hung: number[] = [];
    const signalJump2 = (pids: number[], signal: NodeJS.Signals) => {
      for (const pid of pids) {
        try {
          process.kill(pid, signal);
        } catch {
          // gone
        }
      }
    };

    return {
      dir,
      namespaces: ns,
      jump1Port,
      get jump1Sessions() {
        return jump1Sessions.size;
      },
      jump1Command: `ip netns exec ${ns.a} /usr/sbin/sshd -i -f ${cfg1}`,
      userKey: `${dir}/user_key`,
      encryptedKey: `${dir}/agent_key`,
      knownHostsLines: {
        jump1: line('jump1', `[127.0.0.1]:${jump1Port}`),
        jump2: line('jump2', `[${JUMP2.host}]:${JUMP2.port}`),
        jump1Rsa: line('jump1', `[127.0.0.1]:${jump1Port}`, '_rsa'),
        jump1Ecdsa: line('jump1', `[127.0.0.1]:${jump1Port}`, '_ecdsa'),
      },
      fingerprints: { jump1: fp('jump1'), jump2: fp('jump2') },
      async startAgent() {
        const sock = `${dir}/agent.sock`;
        agent = spawned(spawn('ssh-agent', ['-D', '-a', sock], { stdio: ['ignore', 'pipe', 'pipe'] }));
        await waitFor(agent, /SSH_AUTH_SOCK/, 'ssh-agent');
        // ssh-add reads the passphrase from SSH_ASKPASS when there is no terminal.
        writeFileSync(`${dir}/askpass.sh`, '#!/bin/sh\necho not-typed-by-anyone\n', { mode: 0o700 });
        const added = spawnSync('ssh-add', [`${dir}/agent_key`], {
          env: { ...process.env, SSH_AUTH_SOCK: sock, SSH_ASKPASS: `${dir}/askpass.sh`, SSH_ASKPASS_REQUIRE: 'force', DISPLAY: ':0' },
          stdio: ['ignore', 'pipe', 'pipe'],
          encoding: 'utf8',
        });
        if (added.status !== 0) throw new Error(`ssh-add failed: ${added.stderr}`);
        return sock;
      },
      async restartJump1(downMs: number) {
        // close() only calls back once every accepted socket is gone: end the sessions first.
        const closed = new Promise<void>((resolve) => listener.close(() => resolve()));
        for (const s of jump1Sessions) {
          s.child.kill('SIGTERM');
          s.socket.destroy();
        }
        await closed;
        await new Promise((r) => setTimeout(r, downMs));
        listener = net.createServer({ pauseOnConnect: true }, serve);
        listener.listen(jump1Port, '127.0.0.1');
        await once(listener, 'listening');
      },
      hangJump2() {
        hung = (spawnSync('ip', ['netns', 'pids', ns.b], { encoding: 'utf8' }).stdout ?? '').split(/\s+/).filter(Boolean).map(Number);
        signalJump2(hung, 'SIGSTOP');
      },
      resumeJump2() {
        signalJump2(hung, 'SIGCONT');
        hung = [];
      },
      endJump2Sessions() {
        const pids = (spawnSync('ip', ['netns', 'pids', ns.b], { encoding: 'utf8' }).stdout ?? '').split(/\s+/).filter(Boolean).map(Number);
        signalJump2(
          pids.filter((pid) => pid !== jump2.pid),
          'SIGTERM',
        );
      },
      writeConfig(name, extra = {}) {
        const file = path.join(dir, name);
        writeFileSync(
          file,
          [
            'Host jump1',
            '  HostName 127.0.0.1',
            `  Port ${jump1Port}`,
            ...(extra.jump1 ?? []).map((l) => `  ${l}`),
            'Host jump2',
            `  HostName ${JUMP2.host}`,
            `  Port ${JUMP2.port}`,
            '  ProxyJump jump1',
            ...(extra.jump2 ?? []).map((l) => `  ${l}`),
            'Host *',
            '  User root',
            ...(extra.all ?? []).map((l) => `  ${l}`),
            '',
          ].join('\n'),
        );
        return file;
      },
      async close() {
        process.off('exit', cleanup);
        signalJump2(hung, 'SIGCONT');
        listener.close();
        for (const s of jump1Sessions) s.socket.destroy();
        agent?.kill();
        cleanup();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    cleanup();
    throw err;
  }
}
