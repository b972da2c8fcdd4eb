// An SSH server of ssh2's own (its Server class) on 127.0.0.1, for the chain's lifecycle tests:
// what a real sshd (test/helpers/ssh-lab.ts) cannot be made to do on cue — hold a login or a
// channel open for a while, or end every session right after login. Any public key logs in;
// direct-tcpip channels are served here as echo streams (nothing leaves the process), or with
// `dialOut` connected to their destination as sshd does, and the server counts logins, live
// connections and live channels.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { once } from 'node:events';
import net, { type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Connection, ServerChannel } from 'ssh2';
import type { SshHop } from '../../src/ssh/chain.js';
import { loadSsh2 } from '../../src/ssh/ssh2-lib.js';

export interface Ssh2ServerOptions {
  /** Delay before answering each authentication request. */
  authDelayMs?: number;
  /** Delay before confirming each direct-tcpip channel. */
  openDelayMs?: number;
  /** Ends each session this long after its login. */
  endAfterLoginMs?: number;
  /** Serve direct-tcpip channels as sshd does, by connecting to their destination, instead of echoing. */
  dialOut?: boolean;
}

export interface Ssh2TestServer {
  port: number;
  dir: string;
  /** Successful logins so far. */
  readonly logins: number;
  /** Direct-tcpip channels confirmed so far. */
  readonly channelsOpened: number;
  /** Connections and channels not yet closed. */
  readonly connections: Set<Connection>;
  readonly channels: Set<ServerChannel>;
  /** A hop for SshChainConnection: our key, known_hosts listing the host key (ed25519). */
  hop(extra?: Partial<SshHop>): SshHop;
  close(): Promise<void>;
}

export async function startSsh2Server(options: Ssh2ServerOptions = {}): Promise<Ssh2TestServer> {
  const ssh2 = await loadSsh2();
  const dir = mkdtempSync(path.join(tmpdir(), 'ssh2-server-'));
  // About 1 in 200 ed25519 keys ssh2 generates is one its own parser calls malformed (ssh2
  // 1.17): a hop using it could not log in ("unreadable: … Malformed OpenSSH private key").
  const keyPair = () => {
    for (;;) {
      const pair = ssh2.utils.generateKeyPairSync('ed25519');
      if (!(ssh2.utils.parseKey(pair.private) instanceof Error)) return pair;
    }
  };
  const hostKey = keyPair();
  const userKey = keyPair();
  writeFileSync(path.join(dir, 'user_key'), userKey.private, { mode: 0o600 });
  const later = (ms: number | undefined, fn: () => void) => (ms ? setTimeout(fn, ms) : fn());
  const connections = new Set<Connection>();
  const channels = new Set<ServerChannel>();
  let logins = 0;
  let channelsOpened = 0;
  const server = new ssh2.Server({ hostKeys: [hostKey.private] }, (conn) => {
    connections.add(conn);
    conn.on('close', () => connections.delete(conn));
    conn.on('error', () => undefined);
    conn.on('authentication', (ctx) => later(options.authDelayMs, () => (ctx.method === 'publickey' ? ctx.accept() : ctx.reject(['publickey']))));
    conn.on('ready', () => {
      logins++;
      if (options.endAfterLoginMs !== undefined) setTimeout(() => conn.end(), options.endAfterLoginMs);
    });
    conn.on('tcpip', (accept, _reject, info) =>
      later(options.openDelayMs, () => {
        const channel = accept();
        channelsOpened++;
        channels.add(channel);
        channel.on('close', () => channels.delete(channel));
        if (options.dialOut) {
          const out = net.connect(info.destPort, info.destIP);
          out.on('error', () => channel.destroy());
          channel.on('close', () => out.destroy());
          channel.pipe(out).pipe(channel);
        } else {
          channel.pipe(channel);
        }
      }),
    );
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  const knownHosts = path.join(dir, 'known_hosts');
  writeFileSync(knownHosts, `[127.0.0.1]:${port} ${hostKey.public.split(' ').slice(0, 2).join(' ')}\n`);
  return {
    port,
    dir,
    get logins() {
      return logins;
    },
    get channelsOpened() {
      return channelsOpened;
    },
    connections,
    channels,
    hop: (extra = {}) => ({
      alias: 'hop',
      hostName: '127.0.0.1',
      port,
      user: 'tester',
      identityFiles: [path.join(dir, 'user_key')],
      identityFilesConfigured: true,
      identitiesOnly: false,
      hostKeyPolicy: 'yes',
      knownHostsFiles: [knownHosts],
      globalKnownHostsFiles: [],
      hashKnownHosts: false,
      serverAliveIntervalMs: 15_000,
      serverAliveCountMax: 3,
      ...extra,
    }),
    async close() {
      for (const c of connections) c.end();
      await new Promise((resolve) => server.close(resolve));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Resolves once `condition` holds, checking every 20 ms; rejects with `what` after `ms`. */
export async function eventually(condition: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(what);
    await new Promise((r) => setTimeout(r, 20));
  }
}
