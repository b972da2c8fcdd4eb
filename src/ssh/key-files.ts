// One IdentityFile read as ssh reads it: its public half found as authfile.c sshkey_load_public
// finds it — the file itself when it is a public key, else FILE.pub, else the public key a
// private key file carries — and its private half used only when it needs no passphrase. The
// OpenSSH private key format keeps its public keys unencrypted ahead of the encrypted private part
// (OpenSSH PROTOCOL.key), so an encrypted key's public half is known without a passphrase; a PEM
// file has no such part, and without FILE.pub its public half is unknown (as to ssh).
import { readFileSync } from 'node:fs';
import type { ParsedKey } from 'ssh2';
import { ssh2 } from './ssh2-lib.js';

export interface IdentityFile {
  /** The public key, base64 of its SSH wire form; undefined when it cannot be known. */
  publicKey?: string;
  /** The private key file's bytes, when it is a private key that needs no passphrase. */
  privateKey?: Buffer;
  /** A private key that needs a passphrase (an agent may hold it). */
  encrypted: boolean;
  /** Why the file could not be used, when it exists but is no key we can read. */
  unreadable?: string;
}

/** Reads `file` (a missing file is no key; its FILE.pub may still name one). */
export function readIdentityFile(file: string): IdentityFile {
  const besidePublic = () => readPublicKey(`${file}.pub`);
  let data: Buffer;
  try {
    data = readFileSync(file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return { publicKey: besidePublic(), encrypted: false, ...(code === 'ENOENT' ? {} : { unreadable: `${file} (${code ?? (err as Error).message})` }) };
  }
  const parsed = firstKey(ssh2().utils.parseKey(data));
  if (parsed instanceof Error) {
    if (!/passphrase/i.test(parsed.message)) return { publicKey: besidePublic(), encrypted: false, unreadable: `${file} (${parsed.message})` };
    return { publicKey: besidePublic() ?? openSshPublicKey(data), encrypted: true };
  }
  if (!parsed.isPrivateKey()) return { publicKey: wire(parsed), encrypted: false };
  return { publicKey: besidePublic() ?? wire(parsed), privateKey: data, encrypted: false };
}

function readPublicKey(file: string): string | undefined {
  let data: Buffer;
  try {
    data = readFileSync(file);
  } catch {
    return undefined;
  }
  const parsed = firstKey(ssh2().utils.parseKey(data));
  return parsed instanceof Error ? undefined : wire(parsed);
}

const ARMOR = /-----BEGIN OPENSSH PRIVATE KEY-----([\s\S]*?)-----END OPENSSH PRIVATE KEY-----/;
const MAGIC = Buffer.from('openssh-key-v1\0', 'latin1');

/**
 * The first public key of an OpenSSH-format private key file, read without decrypting anything
 * (PROTOCOL.key: magic, string ciphername, string kdfname, string kdfoptions, uint32 N, then N
 * public key strings); undefined for any other format or a malformed file.
 */
export function openSshPublicKey(data: Buffer): string | undefined {
  const armored = ARMOR.exec(data.toString('latin1'));
  if (!armored) return undefined;
  const blob = Buffer.from(armored[1]!.replace(/\s+/g, ''), 'base64');
  if (!blob.subarray(0, MAGIC.length).equals(MAGIC)) return undefined;
  let offset = MAGIC.length;
  const string = (): Buffer | undefined => {
    if (offset + 4 > blob.length) return undefined;
    const length = blob.readUInt32BE(offset);
    if (offset + 4 + length > blob.length) return undefined;
    const value = blob.subarray(offset + 4, offset + 4 + length);
    offset += 4 + length;
    return value;
  };
  for (let i = 0; i < 3; i++) if (string() === undefined) return undefined; // ciphername, kdfname, kdfoptions
  if (offset + 4 > blob.length || blob.readUInt32BE(offset) < 1) return undefined;
  offset += 4;
  const publicKey = string();
  return publicKey && publicKey.length > 0 ? publicKey.toString('base64') : undefined;
}

function firstKey(parsed: ParsedKey | ParsedKey[] | Error): ParsedKey | Error {
  return Array.isArray(parsed) ? (parsed[0] ?? new Error('no key in the file')) : parsed;
}

function wire(key: ParsedKey): string {
  return key.getPublicSSH().toString('base64');
}
