// Host key checking against known_hosts files, as OpenSSH's hostfile.c reads them (sshd(8)
// "SSH_KNOWN_HOSTS FILE FORMAT"): comma-separated patterns with "!" negation and wildcards,
// "[host]:port" for ports other than 22, hashed names "|1|base64(salt)|base64(HMAC-SHA1(salt,
// name))", and the @revoked marker (@cert-authority lines are skipped: no certificate support).
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { appendFileSync, mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { matchList } from './config.js';

export type HostKeyVerdict =
  | { status: 'known'; file: string; line: number }
  | { status: 'unknown' }
  | { status: 'changed'; file: string; line: number }
  | { status: 'revoked'; file: string; line: number };

/** "SHA256:…" as ssh-keygen -l and ssh print it (base64 without padding). */
export function fingerprint(keyBlob: Buffer): string {
  return `SHA256:${createHash('sha256').update(keyBlob).digest('base64').replace(/=+$/, '')}`;
}

/** The key type written inside an SSH public key blob (RFC 4253 §6.6: string type, then fields). */
export function keyType(keyBlob: Buffer): string {
  if (keyBlob.length < 4) return 'unknown';
  const len = keyBlob.readUInt32BE(0);
  return keyBlob.subarray(4, 4 + len).toString('latin1');
}

/** The name a host's key is stored under: "host" on port 22, else "[host]:port" (hostfile.c put_host_port). */
export function knownHostsName(host: string, port: number): string {
  // ssh looks names up in lower case (ssh.c lowercases the host it connects to), and hashed
  // entries are HMACs of that form.
  const name = host.toLowerCase();
  return port === 22 ? name : `[${name}]:${port}`;
}

function hostMatches(field: string, name: string): boolean {
  if (field.startsWith('|1|')) {
    const [, , salt, hash] = field.split('|');
    if (!salt || !hash) return false;
    const mac = createHmac('sha1', Buffer.from(salt, 'base64')).update(name).digest('base64');
    return mac === hash;
  }
  return matchList(field.split(','), name, true); // hostfile.c: match_hostname ignores case
}

/**
 * What the files say about `key` for `name` (as knownHostsName gives it). A revoked key is
 * refused wherever it is listed, in any file, before or after lines that list it as known
 * (OpenSSH checks revocation first: sshconnect.c check_host_key); a key listed for the name is
 * known; another key of the same type listed for the name means the key changed. Other key types
 * for the name leave it unknown (OpenSSH then asks, or with accept-new adds the new type).
 */
export function checkHostKey(files: string[], name: string, key: Buffer): HostKeyVerdict {
  const type = keyType(key);
  const blob = key.toString('base64');
  let known: HostKeyVerdict | undefined;
  let changed: HostKeyVerdict | undefined;
  for (const e of knownHostsEntries(files)) {
    if (e.marker === '@revoked') {
      if (e.blob === blob) return { status: 'revoked', file: e.file, line: e.line };
      continue;
    }
    if (e.marker !== undefined || !hostMatches(e.hosts, name)) continue;
    if (e.blob === blob) known ??= { status: 'known', file: e.file, line: e.line };
    else if (e.type === type) changed ??= { status: 'changed', file: e.file, line: e.line };
  }
  return known ?? changed ?? { status: 'unknown' };
}

/**
 * The key types listed for `name` (plain entries; @revoked and @cert-authority lines name no key
 * the host may use): which host key algorithms to ask the host for first.
 */
export function knownKeyTypes(files: string[], name: string): Set<string> {
  const types = new Set<string>();
  for (const e of knownHostsEntries(files)) if (e.marker === undefined && hostMatches(e.hosts, name)) types.add(e.type);
  return types;
}

interface KnownHostsEntry {
  file: string;
  /** 1-based, for messages. */
  line: number;
  marker: string | undefined;
  hosts: string;
  type: string;
  blob: string;
}

/** Every entry of the files in order ("[@marker] hosts type base64"); unreadable files, comments and short lines skipped. */
function* knownHostsEntries(files: string[]): Generator<KnownHostsEntry> {
  for (const file of files) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    const lines = text.split('\n');
    for (let i = 0; i < lines.length; i++) {
      const fields = lines[i]!.trim().split(/\s+/);
      const marker = fields[0]!.startsWith('@') ? fields.shift() : undefined;
      const [hosts, type, blob] = fields;
      if (!hosts || !type || !blob || hosts.startsWith('#')) continue;
      yield { file, line: i + 1, marker, hosts, type, blob };
    }
  }
}

/** Appends "name type base64" (hashed when HashKnownHosts is on), creating the file as ssh does. */
export function appendHostKey(file: string, name: string, key: Buffer, hash: boolean): void {
  let field = name;
  if (hash) {
    const salt = randomBytes(20);
    field = `|1|${salt.toString('base64')}|${createHmac('sha1', salt).update(name).digest('base64')}`;
  }
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  let prefix = '';
  try {
    const text = readFileSync(file, 'utf8');
    if (text.length > 0 && !text.endsWith('\n')) prefix = '\n';
  } catch {
    // a new file
  }
  appendFileSync(file, `${prefix}${field} ${keyType(key)} ${key.toString('base64')}\n`, { mode: 0o600 });
}
