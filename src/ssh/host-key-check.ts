// The host key policy (docs/security.md): a hop's key must be listed for it in known_hosts. An
// unknown key is refused unless the user's config says `StrictHostKeyChecking accept-new`, which
// appends it; a changed or revoked key is always refused. Refusals print the SHA256 fingerprint.
import { describeHop, type SshHop } from './chain.js';
import { HostKeyRefusal, tagHopFailure } from './failures.js';
import type { ServerHostKeyAlgorithm } from 'ssh2';
import { orderByKnownKeyTypes, parseHostKeyAlgorithms } from './host-key-algorithms.js';
import { appendHostKey, checkHostKey, fingerprint, keyType, knownHostsName, knownKeyTypes } from './known-hosts.js';

/**
 * The host key algorithms to offer the hop, in order: HostKeyAlgorithms (ssh2's defaults when
 * unset) with, unless it was given outright or with "^", the algorithms of the key types
 * known_hosts lists for the hop first (host-key-algorithms.ts, as sshconnect2.c ssh_kex2 does it,
 * from the user and global known_hosts files). Without that ordering ssh2 asks for ed25519
 * first, and a host that has one but is known by its RSA or ECDSA key would be refused as
 * unknown (or, with accept-new, get a second key appended).
 */
export function hostKeyAlgorithmsFor(hop: SshHop): ServerHostKeyAlgorithm[] {
  const { list, knownHostsOrder } = hop.hostKeyAlgorithms ?? parseHostKeyAlgorithms(undefined);
  return knownHostsOrder ? orderByKnownKeyTypes(list, knownKeyTypes(knownHostsFiles(hop), knownHostsNameOf(hop))) : [...list];
}

function knownHostsNameOf(hop: SshHop): string {
  return hop.hostKeyAlias ?? knownHostsName(hop.hostName, hop.port);
}

function knownHostsFiles(hop: SshHop): string[] {
  return [...hop.knownHostsFiles, ...hop.globalKnownHostsFiles];
}

/**
 * undefined when the key is accepted; else the refusal to report. `notSaved`: accept-new let a
 * key in that the first UserKnownHostsFile could not take (the login goes on, as ssh's does).
 */
export function verifyHostKey(hop: SshHop, key: Buffer, notSaved?: (file: string, err: Error) => void): HostKeyRefusal | undefined {
  const name = knownHostsNameOf(hop);
  const files = knownHostsFiles(hop);
  const verdict = checkHostKey(files, name, key);
  const shown = `${keyType(key)} ${fingerprint(key)}`;
  const hopName = `ssh hop ${describeHop(hop)}`;
  switch (verdict.status) {
    case 'known':
      return undefined;
    case 'revoked':
      return tagHopFailure(
        new HostKeyRefusal(`${hopName}: host key ${shown} is marked @revoked in ${verdict.file}:${verdict.line}; refusing to connect`),
        hop,
        'host-key-revoked',
      );
    case 'changed':
      return tagHopFailure(
        new HostKeyRefusal(
          `${hopName}: HOST KEY CHANGED: the server offers ${shown}, but ${verdict.file}:${verdict.line} lists another ${keyType(key)} key for ${name}; ` +
            `refusing to connect (someone may be intercepting). If the change is expected, remove the old key: ssh-keygen -R '${name}'`,
        ),
        hop,
        'host-key-changed',
      );
    case 'unknown':
      // accept-new with UserKnownHostsFile none has nowhere to remember the key: refused, as unknown.
      if (hop.hostKeyPolicy === 'accept-new' && hop.knownHostsFiles[0] !== undefined) {
        try {
          appendHostKey(hop.knownHostsFiles[0], name, key, hop.hashKnownHosts);
        } catch (err) {
          // ssh says "Failed to add the host to the list of known hosts" and logs in (sshconnect.c).
          notSaved?.(hop.knownHostsFiles[0], err as Error);
        }
        return undefined;
      }
      return tagHopFailure(
        new HostKeyRefusal(
          `${hopName}: unknown host key ${shown} for ${name} (not in ${files.length ? files.join(', ') : 'any known_hosts file: UserKnownHostsFile and GlobalKnownHostsFile are none'}); refusing to connect. ` +
            `Check the fingerprint and add the key (e.g. connect once with ssh), or set StrictHostKeyChecking accept-new for this host`,
        ),
        hop,
        'host-key-unknown',
      );
  }
}
