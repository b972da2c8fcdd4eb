// Public-key authentication as ssh does it without a terminal: the agent's keys first
// (SSH_AUTH_SOCK or IdentityAgent), then each IdentityFile that can be read without a
// passphrase. A proxy running as a daemon never prompts: an encrypted key with no agent to hold
// it is an error that says so, found at start rather than at the first connection.
import { statSync } from 'node:fs';
import { ssh2 } from './ssh2-lib.js';
import type { AnyAuthMethod, AuthenticationType, BaseAgent, ParsedKey } from 'ssh2';
import type { Logger } from '../core/log.js';
import type { SshHop } from './chain.js';
import { SshConfigError } from './config.js';
import { readIdentityFile } from './key-files.js';

export interface HopCredentials {
  agentSocket?: string;
  /**
   * The public keys (base64 SSH wire form) of the IdentityFiles — also of an encrypted one without
   * a .pub beside it (key-files.ts): the agent offers these first, and with IdentitiesOnly only these.
   */
  identityKeys: Set<string>;
  identitiesOnly: boolean;
  /** Unencrypted private keys, by file, with their public key when known. */
  keys: Array<{ file: string; key: Buffer; publicKey?: string }>;
  /** Key files we cannot use without a passphrase (the agent may hold them). */
  encrypted: string[];
}

/** Reads the hop's keys; throws when there is nothing to log in with, saying why. */
export function loadCredentials(hop: SshHop): HopCredentials {
  const agentSocket = hop.agentSocket && socketExists(hop.agentSocket) ? hop.agentSocket : undefined;
  const keys: HopCredentials['keys'] = [];
  const encrypted: string[] = [];
  const unreadable: string[] = [];
  const publicKeys = new Set<string>();
  for (const file of hop.identityFiles) {
    const identity = readIdentityFile(file);
    if (identity.publicKey) publicKeys.add(identity.publicKey);
    if (identity.privateKey) keys.push({ file, key: identity.privateKey, publicKey: identity.publicKey });
    if (identity.encrypted) encrypted.push(file);
    if (identity.unreadable) unreadable.push(identity.unreadable);
  }
  if (agentSocket || keys.length > 0) return { agentSocket, keys, encrypted, identityKeys: publicKeys, identitiesOnly: hop.identitiesOnly };
  const who = `${hop.user}@${hop.alias}`;
  const agentNote = hop.agentSocket ? `the ssh-agent socket ${hop.agentSocket} does not exist` : 'no ssh-agent (SSH_AUTH_SOCK is not set)';
  if (encrypted.length > 0) {
    throw new SshConfigError(
      `cannot log in to ${who}: the key ${encrypted.join(', ')} is encrypted and ${agentNote}; add the key to an ssh-agent (ssh-add) — the proxy never asks for a passphrase`,
    );
  }
  const tried = hop.identityFilesConfigured ? hop.identityFiles.join(', ') : 'the default keys in ~/.ssh';
  throw new SshConfigError(
    `cannot log in to ${who}: ${agentNote} and no usable IdentityFile (tried ${tried}${unreadable.length ? `; unreadable: ${unreadable.join(', ')}` : ''})`,
  );
}

/**
 * ssh2's authHandler: agent, then each key, then give up (never password or keyboard-interactive).
 * `trying` is told the IdentityFile of each key as it is tried (undefined for the agent).
 */
export function authHandler(
  user: string,
  credentials: HopCredentials,
  trying: (identityFile: string | undefined) => void = () => undefined,
): (left: AuthenticationType[], partial: boolean, next: (m: AnyAuthMethod | false) => void) => void {
  const queue: Array<{ method: AnyAuthMethod; file?: string; publicKey?: string }> = [];
  /** The keys the agent listed: a file key among them was offered by the agent already. */
  const listed = new Set<string>();
  if (credentials.agentSocket) {
    const agent = orderedAgent(credentials.agentSocket, credentials.identityKeys, credentials.identitiesOnly, listed);
    queue.push({ method: { type: 'agent', username: user, agent } });
  }
  for (const { file, key, publicKey } of credentials.keys) queue.push({ method: { type: 'publickey', username: user, key }, file, publicKey });
  return (_left, _partial, next) => {
    let method = queue.shift();
    while (method?.publicKey !== undefined && listed.has(method.publicKey)) method = queue.shift();
    trying(method?.file);
    next(method?.method ?? false);
  };
}

/**
 * The agent, offering the IdentityFiles' keys first, then its others unless IdentitiesOnly
 * (sshconnect2.c pubkey_prepare): with many keys in the agent, the configured one is tried before
 * sshd's MaxAuthTries runs out. Every key it lists goes into `listed`.
 */
function orderedAgent(socket: string, preferred: Set<string>, only: boolean, listed: Set<string>): BaseAgent {
  const agent = new (ssh2().OpenSSHAgent)(socket);
  const all = agent.getIdentities.bind(agent);
  agent.getIdentities = (cb) =>
    all((err, keys) => {
      if (err) return cb(err);
      const named = (keys ?? []).map((k) => ({ key: k, wire: (k as ParsedKey).getPublicSSH().toString('base64') }));
      for (const { wire } of named) listed.add(wire);
      const first = named.filter((k) => preferred.has(k.wire));
      const rest = only ? [] : named.filter((k) => !preferred.has(k.wire));
      cb(
        undefined,
        [...first, ...rest].map((k) => k.key),
      );
    });
  return agent;
}

/**
 * What a route has said about the ways it logs in that failed it: an ssh-agent that cannot be used
 * (a dead agent's socket left behind), an IdentityFile that could not sign, a known_hosts file
 * that could not take a host key accept-new let in. Each is warned about
 * once, not at every login: a chain that keeps reconnecting would repeat the same warning at each
 * attempt. Later failures go to the debug log; the first login that finds it working again says
 * so, and a failure after that is warned about again.
 */
export class AuthNotices {
  private readonly failing = new Set<string>();

  constructor(private readonly log: Logger | undefined) {}

  agentFailed(hop: string, socket: string, err: Error): void {
    this.failed(
      `agent ${socket}`,
      { hop, agent: socket, err: err.message },
      'ssh-agent not usable; trying the IdentityFiles',
      'ssh-agent still not usable; trying the IdentityFiles',
    );
  }

  agentWorked(hop: string, socket: string): void {
    this.worked(`agent ${socket}`, { hop, agent: socket }, 'ssh-agent usable again');
  }

  keyFailed(hop: string, file: string, err: Error): void {
    this.failed(
      `key ${file}`,
      { hop, identityFile: file, err: err.message },
      'an IdentityFile could not sign; trying the next',
      'an IdentityFile still cannot sign; trying the next',
    );
  }

  /** accept-new let a host key in that known_hosts could not take: it is asked for again at the next login. */
  hostKeyNotSaved(hop: string, file: string, err: Error): void {
    this.failed(
      `known_hosts ${file}`,
      { hop, knownHosts: file, err: err.message },
      'new host key accepted (StrictHostKeyChecking accept-new) but not saved: cannot write known_hosts',
      'new host key accepted again, still not saved',
    );
  }

  keyWorked(hop: string, file: string): void {
    this.worked(`key ${file}`, { hop, identityFile: file }, 'IdentityFile signs again');
  }

  private failed(what: string, fields: object, warning: string, again: string): void {
    if (this.failing.has(what)) return this.log?.debug(fields, again);
    this.failing.add(what);
    this.log?.warn(fields, `${warning} (not repeated until it works again)`);
  }

  private worked(what: string, fields: object, message: string): void {
    if (this.failing.delete(what)) this.log?.info(fields, message);
  }
}

function socketExists(file: string): boolean {
  try {
    return statSync(file).isSocket();
  } catch {
    return false;
  }
}
