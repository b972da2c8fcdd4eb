// What kubectl refuses in the context it uses (client-go tools/clientcmd/validation.go,
// ConfirmUsable) and client-node would use anyway, each differently from what kubectl says it
// would do: the same kubeconfig must not reach the API server as someone else, or trusting
// something else, through the proxy than through kubectl.
import { StartupError } from '../core/errors.js';

interface ClusterLike {
  name: string;
  caFile?: string;
  caData?: string;
}

interface UserLike {
  name: string;
  certFile?: string;
  certData?: string;
  keyFile?: string;
  keyData?: string;
}

/**
 * A CA, client certificate or key given both as a file and as `-data`: kubectl refuses the pair
 * (saying the data would override), client-node read the file and dropped the data.
 */
export function checkDataBesideFile(cluster: ClusterLike, user: UserLike): void {
  const pairs: Array<[string, string | undefined, string | undefined, string]> = [
    ['certificate-authority', cluster.caFile, cluster.caData, `cluster "${cluster.name}"`],
    ['client-certificate', user.certFile, user.certData, `user "${user.name}"`],
    ['client-key', user.keyFile, user.keyData, `user "${user.name}"`],
  ];
  for (const [key, file, data, owner] of pairs) {
    if (!file || !data) continue;
    throw new StartupError(`${owner} sets both ${key} and ${key}-data: kubectl refuses that pair too (${key}-data would override); keep one of them`);
  }
}

/**
 * A token beside a username or password: kubectl refuses the user ("more than one authentication
 * method"); client-node sent the basic credentials, which API servers since v1.19 ignore, so the
 * proxy ran as system:anonymous while doctor said "bearer token".
 */
export function checkOneAuthMethod(user: UserLike & { token?: string; username?: string; password?: string }, tokenFile?: string): void {
  if (!(user.username || user.password)) return;
  if (user.token)
    throw new StartupError(
      `user "${user.name}" sets a token and a username/password: kubectl refuses that too (more than one authentication method, only one is allowed); remove username and password`,
    );
  // Past validation, client-go's transport refuses a tokenFile beside them as well.
  if (tokenFile)
    throw new StartupError(
      `user "${user.name}" sets a tokenFile and a username/password: kubectl refuses that too (username/password or bearer token may be set, but not both); remove username and password`,
    );
}

/**
 * `as-groups`, `as-uid` or `as-user-extra` without `as`: kubectl refuses the user; the proxy
 * dropped them and ran as the user itself, with its own rights instead of the ones asked for.
 */
export function checkImpersonatesUser(name: string, raw: Record<string, unknown> | undefined): void {
  if (!raw || (typeof raw.as === 'string' && raw.as)) return;
  const set = (v: unknown) => (Array.isArray(v) ? v.length > 0 : typeof v === 'string' ? !!v : !!v && typeof v === 'object' && Object.keys(v).length > 0);
  const keys = ['as-groups', 'as-uid', 'as-user-extra'].filter((k) => set(raw[k]));
  if (keys.length === 0) return;
  throw new StartupError(
    `user "${name}" sets ${keys.join(', ')} without as: kubectl refuses that too (requesting uid, groups or user-extra without impersonating a user); add as: USER or remove ${keys.length > 1 ? 'them' : 'it'}`,
  );
}

/**
 * A client certificate without its key: kubectl refuses the user; client-node left the
 * certificate out, so the proxy reached the API server anonymously, saying "client certificate".
 */
export function checkClientKey(user: UserLike): void {
  if (!(user.certFile || user.certData) || user.keyFile || user.keyData) return;
  throw new StartupError(
    `user "${user.name}" sets a client certificate without its key: kubectl refuses that too (client-key-data or client-key must be specified); add client-key`,
  );
}

/**
 * An exec plugin kubectl would not run: beside an auth-provider (client-node sent the
 * auth-provider's token while doctor said "exec plugin"), or without its command or apiVersion.
 */
export function checkExec(user: { name: string; exec?: { command?: unknown; apiVersion?: unknown }; authProvider?: unknown }): void {
  const { exec, name } = user;
  if (!exec) return;
  const problem = user.authProvider
    ? 'an exec plugin and an auth-provider: kubectl refuses that too (authProvider cannot be provided in combination with an exec plugin); keep one of them'
    : !exec.command
      ? 'an exec plugin without its command: kubectl refuses that too (command must be specified); add exec.command'
      : !exec.apiVersion
        ? 'an exec plugin without its apiVersion: kubectl refuses that too (apiVersion must be specified); add exec.apiVersion, e.g. client.authentication.k8s.io/v1'
        : undefined;
  if (problem) throw new StartupError(`user "${name}" sets ${problem}`);
}
