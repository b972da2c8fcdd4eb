// Logging in to one hop of a chain (ssh2's Client over TCP, over a direct-tcpip channel of the
// hop before, or over a ProxyCommand's stdin/stdout), and opening direct-tcpip channels.
import { spawn } from 'node:child_process';
import { Duplex } from 'node:stream';
import type { Client, ClientChannel } from 'ssh2';
import type { Logger } from '../core/log.js';
import { loadSsh2 } from './ssh2-lib.js';
import { authHandler, loadCredentials } from './auth.js';
import type { SshHop } from './chain.js';
import { hopError, HostKeyRefusal } from './failures.js';
import { verifyHostKey } from './host-key-check.js';

export async function login(hop: SshHop, sock: Duplex | undefined): Promise<Client> {
  const ssh2 = await loadSsh2();
  const credentials = loadCredentials(hop);
  const client = new ssh2.Client();
  let refusal: HostKeyRefusal | undefined;
  return new Promise<Client>((resolve, reject) => {
    client.once('ready', () => {
      client.removeAllListeners('error');
      client.on('error', () => undefined);
      // ssh2 leaves Nagle on: a stream's small writes (a request, an echo) would wait for the
      // peer's delayed ACK, ~40 ms each. OpenSSH sets TCP_NODELAY too (sshconnect.c).
      if (!sock) client.setNoDelay(true);
      resolve(client);
    });
    client.once('error', (err: Error & { level?: string }) => {
      client.end();
      sock?.destroy();
      reject(refusal ?? hopError(err, hop));
    });
    client.once('close', () => reject(refusal ?? hopError(new Error('connection closed during login'), hop)));
    client.connect({
      ...(sock ? { sock } : { host: hop.hostName, port: hop.port, ...(hop.family === 4 ? { forceIPv4: true } : hop.family === 6 ? { forceIPv6: true } : {}) }),
      username: hop.user,
      // ssh2 takes `false` for "no more methods" (client.js doNextAuth); its typings leave it out.
      authHandler: authHandler(hop.user, credentials) as never,
      hostVerifier: (key: Buffer) => {
        refusal = verifyHostKey(hop, key);
        return refusal === undefined;
      },
      keepaliveInterval: hop.serverAliveIntervalMs,
      keepaliveCountMax: hop.serverAliveCountMax,
      readyTimeout: hop.connectTimeoutMs ?? 20_000,
    });
  });
}

export function forwardOut(client: Client, host: string, port: number): Promise<ClientChannel> {
  return new Promise((resolve, reject) => {
    try {
      client.forwardOut('127.0.0.1', 0, host, port, (err, channel) => (err ? reject(err) : resolve(channel)));
    } catch (err) {
      reject(err as Error);
    }
  });
}

/** ProxyCommand: run with the user's shell as ssh does (sshconnect.c: $SHELL -c "exec …"). */
export function proxyCommandStream(command: string, log: Logger | undefined): Duplex {
  const child = spawn(process.env.SHELL || '/bin/sh', ['-c', `exec ${command}`], { stdio: ['pipe', 'pipe', 'pipe'] });
  child.stderr.on('data', (chunk: Buffer) => log?.debug({ proxyCommand: command.split(/\s/)[0], stderr: chunk.toString('utf8').trim().slice(0, 300) }, 'ProxyCommand stderr'));
  const stream = Duplex.from({ readable: child.stdout, writable: child.stdin });
  child.once('error', (err) => stream.destroy(err));
  child.once('exit', () => stream.push(null));
  stream.once('close', () => child.kill());
  return stream;
}
