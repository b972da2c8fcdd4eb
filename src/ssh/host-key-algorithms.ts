// HostKeyAlgorithms as OpenSSH reads and applies it (ssh_config(5)):
// - readconf.c: the names are checked when the config is read; one no key type matches is an
//   error (a "-" list is not checked);
// - kex-names.c kex_assemble_names: "+" appends to the default list, "-" removes the names (or
//   patterns) from it, "^" puts them in front of it, anything else replaces it; patterns expand to
//   the supported names they match, in the supported list's order, and no name comes twice;
// - sshconnect2.c ssh_kex2 + order_hostkeyalgs: when the list is the default, or was given with
//   "+" or "-", the algorithms of the key types known_hosts lists for the host are asked for first
//   (kept verbatim when the first one's type is already known); a list given outright or with "^"
//   is offered as written.
// "Supported" and "default" are ssh2's lists, which are what this proxy can verify.
import type { ServerHostKeyAlgorithm } from 'ssh2';
import { matchList } from './config.js';

/**
 * ssh2's default list, in its order (lib/protocol/constants.js DEFAULT_SERVER_HOST_KEY), without
 * ssh-rsa: RSA signatures over SHA-1, which OpenSSH 8.8 took out of its defaults (myproposal.h
 * KEX_DEFAULT_PK_ALG). An RSA host key is still verified with rsa-sha2-512/256; a host that can
 * sign only with SHA-1 (OpenSSH before 7.2) needs `HostKeyAlgorithms +ssh-rsa`, as with ssh.
 */
export const DEFAULT_HOST_KEY_ALGORITHMS: readonly ServerHostKeyAlgorithm[] = [
  'ssh-ed25519',
  'ecdsa-sha2-nistp256',
  'ecdsa-sha2-nistp384',
  'ecdsa-sha2-nistp521',
  'rsa-sha2-512',
  'rsa-sha2-256',
];
/** What ssh2 can verify (SUPPORTED_SERVER_HOST_KEY): the defaults, ssh-rsa and ssh-dss. */
export const SUPPORTED_HOST_KEY_ALGORITHMS: readonly ServerHostKeyAlgorithm[] = [...DEFAULT_HOST_KEY_ALGORITHMS, 'ssh-rsa', 'ssh-dss'];

export interface HostKeyAlgorithms {
  /** The algorithms to offer, in order, before any known_hosts ordering. */
  list: ServerHostKeyAlgorithm[];
  /** Whether the key types known_hosts lists for the host go first (not for a list given outright or with "^"). */
  knownHostsOrder: boolean;
}

/** The setting for a HostKeyAlgorithms value (undefined: not set); throws an Error saying what is wrong. */
export function parseHostKeyAlgorithms(value: string | undefined): HostKeyAlgorithms {
  if (value === undefined) return { list: [...DEFAULT_HOST_KEY_ALGORITHMS], knownHostsOrder: true };
  if (/\s/.test(value.trim()) || value.trim() === '') throw new Error(`HostKeyAlgorithms takes one comma-separated list, not "${value}"`);
  const prefix = /^[-+^]/.test(value) ? value[0] : '';
  const patterns = value
    .slice(prefix.length)
    .split(',')
    .filter((p) => p !== '');
  let list: ServerHostKeyAlgorithm[];
  if (prefix === '-') {
    list = DEFAULT_HOST_KEY_ALGORITHMS.filter((alg) => !matchList(patterns, alg));
  } else {
    const negated = patterns.filter((p) => p.startsWith('!'));
    if (negated.length > 0) throw new Error(`HostKeyAlgorithms ${value}: "!" negation is only allowed after "-"`);
    const unsupported = patterns.filter((p) => !SUPPORTED_HOST_KEY_ALGORITHMS.some((alg) => matchList([p], alg)));
    if (unsupported.length > 0) {
      throw new Error(
        `HostKeyAlgorithms ${value}: ${unsupported.join(', ')} ${unsupported.length > 1 ? 'are' : 'is'} not supported ` +
          `(host certificates and security keys are not; supported: ${SUPPORTED_HOST_KEY_ALGORITHMS.join(', ')})`,
      );
    }
    const named = patterns.flatMap((p) => SUPPORTED_HOST_KEY_ALGORITHMS.filter((alg) => matchList([p], alg)));
    const all = prefix === '+' ? [...DEFAULT_HOST_KEY_ALGORITHMS, ...named] : prefix === '^' ? [...named, ...DEFAULT_HOST_KEY_ALGORITHMS] : named;
    list = [...new Set(all)];
  }
  if (list.length === 0) throw new Error(`HostKeyAlgorithms ${value} leaves no host key algorithm to offer`);
  return { list, knownHostsOrder: prefix === '+' || prefix === '-' };
}

/**
 * The list to offer a host whose known_hosts entries have these key types (order_hostkeyalgs):
 * as it is when its first algorithm's key type is known (or nothing is known), else the known
 * types' algorithms first, each part in the list's order.
 */
export function orderByKnownKeyTypes(list: readonly ServerHostKeyAlgorithm[], knownTypes: ReadonlySet<string>): ServerHostKeyAlgorithm[] {
  const known = (alg: ServerHostKeyAlgorithm) => knownTypes.has(keyTypeOf(alg));
  if (list.length === 0 || known(list[0]!)) return [...list];
  return [...list.filter(known), ...list.filter((alg) => !known(alg))];
}

/** The key type (as known_hosts writes it) an algorithm verifies: RSA's signature algorithms all use "ssh-rsa" keys. */
function keyTypeOf(alg: ServerHostKeyAlgorithm): string {
  return alg.startsWith('rsa-sha2-') ? 'ssh-rsa' : alg;
}
