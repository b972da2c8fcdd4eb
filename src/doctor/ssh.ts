// Per ssh route: does ~/.ssh/config give a chain the route follows, and does every hop of it let
// us in — reached, its host key known (or accepted with accept-new, as the route would), our key
// accepted. The login is the route's own (routes/ssh/route.ts start() with connectOnStart, i.e.
// ssh/connection.ts and ssh/hop-login.ts): doctor has no SSH client of its own, so what it
// reports is what the proxy would meet. A failure names its hop and says what to do.
import { abortable } from '../core/abort.js';
import { errorMessage } from '../core/errors.js';
import { formatHostPort } from '../core/address.js';
import { createLogger } from '../core/log.js';
import { SshRoute, type SshRouteOptions } from '../routes/ssh/route.js';
import type { SshRouteSpec } from '../routes/spec.js';
import { describeHop, type SshHop } from '../ssh/chain.js';
import { hopFailureOf, type HopFailureKind } from '../ssh/failures.js';
import { knownHostsName } from '../ssh/known-hosts.js';
import type { Check } from './report.js';

export interface SshCheckOptions {
  /** The whole login, every hop, must be done within this (doctor's --request-timeout). */
  timeoutMs: number;
  /** Where ~/.ssh/config is and $SSH_AUTH_SOCK (the process's by default). */
  route?: Pick<SshRouteOptions, 'sshConfig' | 'authSock'>;
}

export async function checkSshRoute(spec: SshRouteSpec, o: SshCheckOptions): Promise<Check[]> {
  const checks: Check[] = [];
  const add = (c: Omit<Check, 'scope'>) => checks.push({ scope: spec.name, ...c });
  const host = spec.ssh.host;
  // Silent: what goes wrong is the report's business, not a log line's.
  const route = new SshRoute(spec, { ...o.route, log: createLogger('silent'), connectOnStart: true });
  const started = Date.now();
  const deadline = AbortSignal.timeout(o.timeoutMs);
  try {
    await abortable(route.start(), deadline);
    const hops = route.hops!;
    add(configOk(host, hops));
    hops.forEach((hop, i) => add({ name: 'ssh-hop', status: 'ok', detail: `${position(i, hops)} ${describeHop(hop)}: host key accepted, logged in` }));
    checks.at(-1)!.detail += ` (whole chain: ${Date.now() - started} ms)`;
    return checks;
  } catch (err) {
    const hops = route.hops;
    if (!hops) {
      add({
        name: 'ssh-config',
        status: 'fail',
        detail: errorMessage(err),
        fix: `fix Host ${host} in ~/.ssh/config until \`ssh ${host}\` works from here; docs/usage.md "SSH routes" lists what the route follows and what it refuses`,
      });
      return checks;
    }
    add(configOk(host, hops));
    const failure = hopFailureOf(err);
    // No hop named: doctor's own deadline, with the login at the first hop not yet logged in.
    const at = failure ? hops.indexOf(failure.hop) : deadline.aborted ? Math.min(route.chainStatus()?.loggedIn ?? 0, hops.length - 1) : -1;
    if (at < 0) {
      add({ name: 'ssh-hop', status: 'fail', detail: errorMessage(err), fix: `try \`ssh -v ${host}\` from here` });
      return checks;
    }
    const hop = hops[at]!;
    hops.forEach((h, i) => {
      const where = `${position(i, hops)} ${describeHop(h)}`;
      if (i < at) add({ name: 'ssh-hop', status: 'ok', detail: `${where}: host key accepted, logged in` });
      else if (i > at) add({ name: 'ssh-hop', status: 'skip', detail: `${where}: not tried (${hop.alias} failed)` });
    });
    const detail = failure ? errorMessage(err) : `ssh hop ${describeHop(hop)}: the login did not complete within ${o.timeoutMs} ms (--request-timeout)`;
    checks.splice(1 + at, 0, {
      scope: spec.name,
      name: 'ssh-hop',
      status: 'fail',
      detail: `${position(at, hops)} ${detail}`,
      fix: fixFor(failure?.kind ?? 'timeout', hops, at, host),
    });
    return checks;
  } finally {
    await route.close();
  }
}

function configOk(host: string, hops: readonly SshHop[]): Omit<Check, 'scope'> {
  return { name: 'ssh-config', status: 'ok', detail: `ssh ${host}: ${hops.map((h) => h.alias).join(' → ')}` };
}

function position(i: number, hops: readonly SshHop[]): string {
  return `hop ${i + 1}/${hops.length}`;
}

/** What to do, per kind of failure (ssh/failures.ts tags them), in ssh's and ssh-keygen's terms. */
export function fixFor(kind: HopFailureKind, hops: readonly SshHop[], at: number, host: string): string {
  const hop = hops[at]!;
  const before = at > 0 ? hops[at - 1] : undefined;
  const knownHosts = hop.knownHostsFiles[0] ?? '~/.ssh/known_hosts';
  const name = hop.hostKeyAlias ?? knownHostsName(hop.hostName, hop.port);
  switch (kind) {
    case 'host-key-unknown':
      return `check the fingerprint with ${hop.alias}'s admin, then connect once with \`ssh ${host}\` and accept it (ssh records it in ${knownHosts}); or set StrictHostKeyChecking accept-new for ${hop.alias} in ~/.ssh/config`;
    case 'host-key-changed':
      return `if ${hop.alias} was reinstalled or its key rotated, remove the old key (ssh-keygen -R '${name}' -f ${knownHosts}) and connect once with \`ssh ${host}\` to record the new one; if not, do not connect: someone may be intercepting`;
    case 'host-key-revoked':
      return `${hop.alias}'s key is marked @revoked in known_hosts: ask its admin for the host's current key, and do not connect until then`;
    case 'host-key-type':
      return `${hop.alias} has no host key of the types asked for: fix HostKeyAlgorithms for it in ~/.ssh/config (or remove the setting)`;
    case 'auth':
      return `${hop.user}@${hop.alias} did not accept our keys: add your public key to ~${hop.user}/.ssh/authorized_keys there (ssh-copy-id), set IdentityFile for ${hop.alias} in ~/.ssh/config, or load a passphrase-protected key into ssh-agent (the route reads only unencrypted key files); \`ssh -v ${host}\` shows what is offered`;
    case 'unreachable':
      if (before)
        return `${before.alias} cannot reach ${formatHostPort(hop.hostName, hop.port)}: check HostName and Port of ${hop.alias} (as ${before.alias} resolves them), that sshd runs there, and that ${before.alias} allows forwarding (AllowTcpForwarding)`;
      if (hop.proxyCommand) return `the ProxyCommand of ${hop.alias} did not connect: run it by hand (\`${hop.proxyCommand}\`) and check what it prints`;
      return `check HostName and Port of ${hop.alias} in ~/.ssh/config, that sshd runs there, and the network from here (a VPN?)`;
    case 'timeout':
      return `${hop.alias} did not answer in time: check the network path to it${before ? ` from ${before.alias}` : ''}; on a slow link give doctor a longer --request-timeout (the route's wait is ConnectTimeout in ~/.ssh/config, 20 s by default)`;
    case 'protocol':
      return `the SSH handshake with ${hop.alias} failed: see the message, and try \`ssh -v ${host}\``;
    case 'closed':
      return `${hop.alias} closed the connection during login (sshd's MaxStartups or AllowUsers/DenyUsers, or a ProxyCommand that exited): see its sshd log, or try \`ssh -v ${host}\``;
  }
}
