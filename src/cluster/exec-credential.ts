// client-node's exec credential plugin runner (dist/exec_auth.js, ExecAuth) keeps a plugin's
// ExecCredential until its expirationTimestamp, whatever the API server says of it. client-go
// (plugin/pkg/client/auth/exec/exec.go, roundTripper + maybeRefreshCreds) runs the plugin again
// once the server answers 401 to the credential it gave: a token revoked, a cluster re-created,
// a user who logged in again — kubectl then works at once, so the proxy must too, not an hour
// later. ExecAuth is reached through the KubeConfig's authenticators (not public API).
import type { KubeConfig } from '@kubernetes/client-node';

interface ExecAuthLike {
  tokenCache: Record<string, unknown>;
  execFn: unknown;
}

/** The KubeConfig's exec authenticator (shared by every KubeConfig made from it with Object.create). */
export function execAuthOf(kc: KubeConfig): ExecAuthLike | undefined {
  const list = (kc as unknown as { authenticators?: unknown[] }).authenticators;
  return list?.find((a): a is ExecAuthLike => !!a && typeof a === 'object' && 'tokenCache' in a && 'execFn' in a);
}

/** Forget every cached exec credential, so the next request runs the plugin again (after a 401). */
export function expireExecCredentials(kc: KubeConfig): void {
  const auth = execAuthOf(kc);
  if (auth) auth.tokenCache = {};
}
