// What is wrong with the kubeconfig's TLS material, said as kubectl says it: which file of which
// cluster or user cannot be read ("unable to read client-cert F for U due to …"), or that a client
// certificate and its key do not fit ("tls: private key does not match public key"). client-node
// throws a bare "ENOENT: …, open 'F'" for the first, and OpenSSL's "error:05800074:x509 certificate
// routines::key values mismatch" for the second only once a connection is made, which read as
// "cannot reach the API server".
import { X509Certificate, createPrivateKey } from 'node:crypto';
import { statSync } from 'node:fs';
import type https from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';
import { fileStamp } from '../core/regular-file.js';

/** A file the current cluster or user names that could not be read (`err` from client-node), said whole. */
export function unreadableFile(kc: KubeConfig, err: unknown): string | undefined {
  const e = err as NodeJS.ErrnoException | null;
  if (!e?.path || !e.code) return undefined;
  const cluster = kc.getCurrentCluster();
  const user = kc.getCurrentUser();
  const owners: Array<[string | undefined, string]> = [
    [cluster?.caFile, `certificate-authority file ${e.path} of cluster "${cluster?.name}"`],
    [user?.certFile, `client-certificate file ${e.path} of user "${user?.name}"`],
    [user?.keyFile, `client-key file ${e.path} of user "${user?.name}"`],
  ];
  const what = owners.find(([file]) => file === e.path)?.[1];
  return what && `cannot read the kubeconfig's ${what}: ${e.code === 'ENOENT' ? 'no such file' : e.code}`;
}

/**
 * A CA, client certificate, key or tokenFile that names a directory: said as kubectl says it ("read
 * F: is a directory"), naming which; it read "the credentials could not be obtained: EISDIR: …".
 */
export function directoryNamed(kc: KubeConfig, tokenFile: string | undefined): string | undefined {
  const cluster = kc.getCurrentCluster();
  const user = kc.getCurrentUser();
  const files: Array<[string | undefined, string]> = [
    [cluster?.caFile, `certificate-authority %s of cluster "${cluster?.name}"`],
    [user?.certFile, `client-certificate %s of user "${user?.name}"`],
    [user?.keyFile, `client-key %s of user "${user?.name}"`],
    [tokenFile, `tokenFile %s of user "${user?.name}"`],
  ];
  for (const [file, what] of files) {
    let dir = false;
    try {
      dir = !!file && statSync(file).isDirectory();
    } catch {
      /* not there or not readable: said as kubectl says it, where it is read */
    }
    if (dir) return `the kubeconfig's ${what.replace('%s', file!)} is a directory: name the file in it`;
  }
  return undefined;
}

/** Whether the client certificate and key request options carry belong together. */
export function clientPairProblem(kc: KubeConfig, opts: https.RequestOptions): string | undefined {
  if (!opts.cert || !opts.key) return undefined;
  const user = `user "${kc.getCurrentUser()?.name}"`;
  // kubectl cannot use a passphrase-protected key either ("tls: failed to parse private key");
  // OpenSSL's own words were "interrupted or cancelled", with a "must be PEM" beside a PEM key.
  if (/-----BEGIN ENCRYPTED PRIVATE KEY-----|^Proc-Type: *4, *ENCRYPTED/m.test(String(pem(opts.key)))) {
    const file = kc.getCurrentUser()?.keyFile;
    return `the client key of ${user} is encrypted (a passphrase protects it), which kubectl cannot use either: write it decrypted, e.g. openssl pkey -in ${file ?? 'KEY'} -out KEY.plain, and name that in client-key`;
  }
  let fits: boolean;
  try {
    // OpenSSL's own check (SSL_CTX_use_certificate) drops a mismatched RSA key without a word.
    fits = new X509Certificate(pem(opts.cert)).checkPrivateKey(createPrivateKey(pem(opts.key)));
  } catch (err) {
    return `the client certificate or client key of ${user} cannot be used (${(err as Error).message}): they must be PEM`;
  }
  return fits ? undefined : `the client certificate and client key of ${user} do not match: give the key that belongs to the certificate`;
}

/**
 * The cluster's CA must hold PEM certificates: kubectl refuses one that does not ("unable to load
 * root certificates"); Node ignored it, and the handshake then failed as "unable to verify the
 * first certificate", blaming the server. A bundle with some certificates that cannot be read is
 * used without them, as kubectl uses it (Go's AppendCertsFromPEM skips them): OpenSSL stopped at
 * the first and dropped every certificate after it, so `opts.ca` is set to the readable ones.
 * Nor does Go take other blocks, such as TRUSTED CERTIFICATE, which OpenSSL trusts as a CA: they
 * are dropped too, so the proxy trusts no CA kubectl does not.
 */
export function caProblem(kc: KubeConfig, opts: https.RequestOptions): string | undefined {
  if (!opts.ca) return undefined;
  const cluster = kc.getCurrentCluster();
  const field = cluster?.caFile ? `certificate-authority file ${cluster.caFile}` : 'certificate-authority-data';
  const blocks = String(pem(opts.ca)).match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  let firstError = 'no PEM certificate in it';
  const readable = blocks.filter((block) => {
    try {
      new X509Certificate(block);
      return true;
    } catch (err) {
      if (blocks.length > 0 && firstError === 'no PEM certificate in it') firstError = (err as Error).message;
      return false;
    }
  });
  if (readable.length === 0) return `the kubeconfig's ${field} of cluster "${cluster?.name}" cannot be used: ${firstError}`;
  const allBlocks = String(pem(opts.ca)).match(/-----BEGIN [^-\n]*-----/g)?.length ?? 0;
  if (readable.length < allBlocks) opts.ca = `${readable.join('\n')}\n`;
  return undefined;
}

/**
 * A client certificate outside its validity (`at`, ms since the epoch): what the API server refuses
 * with a bare 401, as it refuses kubectl (kubeadm's admin.conf lapses after a year; tools that log
 * in by writing short-lived certificates lapse within hours). Undefined when none or valid.
 */
export function clientCertValidity(cert: unknown, at = Date.now()): string | undefined {
  if (!cert) return undefined;
  let x509: X509Certificate;
  try {
    x509 = new X509Certificate(pem(cert));
  } catch {
    return undefined; // said by clientPairProblem
  }
  const iso = (d: string) => new Date(d).toISOString().replace(/\.\d{3}Z$/, 'Z');
  if (Date.parse(x509.validTo) <= at) return `the client certificate expired at ${iso(x509.validTo)}`;
  if (Date.parse(x509.validFrom) > at) return `the client certificate is valid only from ${iso(x509.validFrom)} (is this machine's clock right?)`;
  return undefined;
}

/** The first of what client-node hands over (a Buffer, a string, or a list of them). */
function pem(value: unknown): string | Buffer {
  const first: unknown = Array.isArray(value) ? value[0] : value;
  return Buffer.isBuffer(first) ? first : String(first);
}

/** The kubeconfig's CA file as it is now (core/regular-file.ts fileStamp); undefined without one. */
export function caFileStamp(kc: KubeConfig): string | undefined {
  const file = kc.getCurrentCluster()?.caFile;
  return file ? fileStamp(file) : undefined;
}

/**
 * A server certificate Node would not accept, at start: said as such, with what to do (the
 * kubeconfig's CA, or --extra-ca behind a TLS-intercepting proxy), not as "cannot reach". Else undefined.
 */
export function untrustedServer(err: unknown, { cluster, extraCA }: { cluster?: string; extraCA?: string }): string | undefined {
  const e = err as { code?: string; message?: string } | null;
  const code = e?.code ?? '';
  // Behind an egress proxy the message already says what to trust (api.ts withEgress, proxy-failures.ts).
  if (!/CERT|SELF_SIGNED|UNABLE_TO_(GET|VERIFY)/.test(code) || /--extra-ca/.test(e?.message ?? '')) return undefined;
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID')
    return `its certificate does not name this address (${e?.message}): give the kubeconfig a server address (or tls-server-name) that the certificate names`;
  const signer = `the CA the kubeconfig gives for cluster "${cluster}" (certificate-authority or certificate-authority-data)`;
  const why = extraCA ? `signed neither by ${signer} nor by the extra CA ${extraCA}` : `not signed by ${signer}`;
  const fix = extraCA
    ? ` check that ${extraCA} holds the CA of the proxy that intercepts TLS`
    : ', if a corporate proxy intercepts TLS, trust its CA with --extra-ca FILE (config: extra-ca)';
  return `its certificate is ${why} (${e?.message}): get a current kubeconfig for the cluster (its CA may have changed), or${fix}`;
}
