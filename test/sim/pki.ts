// Simulated cluster PKI: a throw-away CA, the API server's serving certificate and client
// certificates, the way kubeadm lays them out (CA with keyCertSign, serving cert with IP/DNS SANs,
// client certs whose CommonName is the user name, as the x509 authenticator in
// staging/src/k8s.io/apiserver/pkg/authentication/request/x509/x509.go reads them).
// RSA keys come from node:crypto (fast, native); node-forge builds and signs the X.509 certs.
import { generateKeyPairSync, randomBytes, X509Certificate } from 'node:crypto';
import { isIP } from 'node:net';
import forge from 'node-forge';

export interface KeyAndCert {
  keyPem: string;
  certPem: string;
}

interface ForgeKeys {
  keyPem: string;
  privateKey: forge.pki.rsa.PrivateKey;
  publicKey: forge.pki.rsa.PublicKey;
}

function newRsaKeys(): ForgeKeys {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs1', format: 'pem' },
  });
  return {
    keyPem: privateKey,
    privateKey: forge.pki.privateKeyFromPem(privateKey) as forge.pki.rsa.PrivateKey,
    publicKey: forge.pki.publicKeyFromPem(publicKey) as forge.pki.rsa.PublicKey,
  };
}

// The certificates a CA issues share one key pair per process: RSA key generation is ~0.4 s of
// CPU, and the suite's simulated clusters, konnectivity servers and proxies issued hundreds of
// them. Each certificate is still its own (serial, subject, issuer, signature); each CA keeps a
// key of its own, so two CAs never vouch for each other's certificates (tests of trust
// failures rely on it). Nothing here checks that two leaf certificates hold different keys.
let leafKeys: ForgeKeys | undefined;
const sharedLeafKeys = (): ForgeKeys => (leafKeys ??= newRsaKeys());

// Go (kubectl) refuses negative serial numbers: keep the top bit of the first byte clear. And DER
// wants the shortest encoding: a first byte 0x00 before one below 0x80 is "illegal padding" to
// OpenSSL 3 (it was 1 in 32 certificates with a random first nibble). First byte 0x01–0x7f.
function serialNumber(): string {
  const bytes = randomBytes(16);
  bytes[0] = 1 + (bytes[0]! % 127);
  return bytes.toString('hex');
}

function validity(cert: forge.pki.Certificate, years: number): void {
  const now = Date.now();
  cert.validity.notBefore = new Date(now - 60 * 60 * 1000);
  cert.validity.notAfter = new Date(now + years * 365 * 24 * 60 * 60 * 1000);
}

export class SimPki {
  readonly caPem: string;
  private readonly caCert: forge.pki.Certificate;
  private readonly caKeys: ForgeKeys;
  private readonly caKeyId: string;

  constructor() {
    this.caKeys = newRsaKeys();
    const cert = forge.pki.createCertificate();
    cert.publicKey = this.caKeys.publicKey;
    cert.serialNumber = serialNumber();
    validity(cert, 10);
    const subject = [{ name: 'commonName', value: 'kubernetes-sim-ca' }];
    cert.setSubject(subject);
    cert.setIssuer(subject);
    cert.setExtensions([
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
      { name: 'subjectKeyIdentifier' },
    ]);
    cert.sign(this.caKeys.privateKey, forge.md.sha256.create());
    this.caCert = cert;
    this.caKeyId = cert.generateSubjectKeyIdentifier().getBytes();
    this.caPem = forge.pki.certificateToPem(cert);
  }

  private issue(commonName: string, organization: string | undefined, extensions: object[]): KeyAndCert {
    const keys = sharedLeafKeys();
    const cert = forge.pki.createCertificate();
    cert.publicKey = keys.publicKey;
    cert.serialNumber = serialNumber();
    validity(cert, 2);
    const subject: forge.pki.CertificateField[] = [{ name: 'commonName', value: commonName }];
    if (organization) subject.push({ name: 'organizationName', value: organization });
    cert.setSubject(subject);
    cert.setIssuer(this.caCert.subject.attributes);
    cert.setExtensions([
      { name: 'basicConstraints', cA: false, critical: true },
      { name: 'authorityKeyIdentifier', keyIdentifier: this.caKeyId },
      ...extensions,
    ]);
    cert.sign(this.caKeys.privateKey, forge.md.sha256.create());
    return { keyPem: keys.keyPem, certPem: forge.pki.certificateToPem(cert) };
  }

  /** Serving certificate for the API server: SAN IP 127.0.0.1, ::1, DNS localhost (+ extra host). */
  servingCert(extraHost?: string): KeyAndCert {
    const altNames: Array<{ type: number; ip?: string; value?: string }> = [
      { type: 7, ip: '127.0.0.1' },
      { type: 7, ip: '::1' },
      { type: 2, value: 'localhost' },
      { type: 2, value: 'kubernetes' },
      { type: 2, value: 'kubernetes.default.svc' },
    ];
    if (extraHost && !['127.0.0.1', '::1', 'localhost'].includes(extraHost)) {
      altNames.push(isIP(extraHost) ? { type: 7, ip: extraHost } : { type: 2, value: extraHost });
    }
    return this.issue('kube-apiserver', undefined, [
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      { name: 'subjectAltName', altNames },
    ]);
  }

  /**
   * Extension: a serving certificate for host names (SAN DNS entries, "*.x" wildcards allowed),
   * as cert-manager or an ingress controller's default certificate would hold.
   */
  hostCert(hosts: string[], commonName = hosts[0] ?? 'ingress'): KeyAndCert {
    return this.issue(commonName, undefined, [
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      { name: 'subjectAltName', altNames: hosts.map((value) => ({ type: 2, value })) },
    ]);
  }

  /** Client certificate: CN is the user name, O the group (as the x509 authenticator reads them). */
  clientCert(user: string, group = 'system:masters'): KeyAndCert {
    return this.issue(user, group, [
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
      { name: 'extKeyUsage', clientAuth: true },
    ]);
  }
}

/** Reads the CommonName of a PEM certificate (for diagnostics and tests). */
export function commonNameOf(certPem: string): string | undefined {
  const subject = new X509Certificate(certPem).subject;
  const line = subject.split('\n').find((l) => l.startsWith('CN='));
  return line?.slice(3);
}
