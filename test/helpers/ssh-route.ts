// Driving an SshRoute in tests: make one from a lab config, and push bytes through an echo
// stream checking them with sha256.
import { createHash, randomBytes } from 'node:crypto';
import type { Duplex } from 'node:stream';
import { SshRoute } from '../../src/routes/ssh/route.js';
import type { OpenRequest } from '../../src/core/types.js';
import type { Claim } from '../../src/routing/table.js';
import type { SshRouteSpec } from '../../src/routes/spec.js';

export function sshRoute(configFile: string, host: string, options: { authSock?: string; home?: string } = {}): SshRoute {
  const spec: SshRouteSpec = { kind: 'ssh', name: 'lab', ssh: { host }, include: [], exclude: [], cidrs: [], origin: 'test' };
  return new SshRoute(spec, {
    sshConfig: { file: configFile, home: options.home ?? '/nonexistent-home' },
    authSock: options.authSock ?? '',
    initialBackoffMs: 200,
    maxBackoffMs: 1000,
  });
}

/** Opens host:port through the route as the Router would (the claim is not used by ssh routes). */
export function openThrough(route: SshRoute, host: string, port: number, timeoutMs = 15_000): Promise<Duplex> {
  const signal = AbortSignal.timeout(timeoutMs);
  const request: OpenRequest = { destination: { host, port, type: /^[\d.]+$/.test(host) ? 'ipv4' : 'domain' }, frontEnd: 'socks5', client: 'test', signal };
  return route.open(request, { claimed: true, route: {} as never, reason: 'include', host, isIp: false } as Claim, signal).then((o) => o.stream);
}

/** Sends `size` random bytes, half-closes, and checks the echo's sha256 matches. */
export async function echoChecked(stream: Duplex, size: number): Promise<void> {
  const payload = randomBytes(size);
  const want = createHash('sha256').update(payload).digest('hex');
  const got = createHash('sha256');
  let received = 0;
  await new Promise<void>((resolve, reject) => {
    stream.on('data', (chunk: Buffer) => {
      got.update(chunk);
      received += chunk.length;
      if (received >= size) stream.end();
    });
    stream.once('end', resolve);
    stream.once('close', resolve);
    stream.once('error', reject);
    stream.write(payload);
  });
  const digest = got.digest('hex');
  if (received !== size || digest !== want)
    throw new Error(`echo mismatch: sent ${size} bytes (${want.slice(0, 12)}), got ${received} (${digest.slice(0, 12)})`);
  stream.destroy();
}
