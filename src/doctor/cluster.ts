// Per cluster route: does the kubeconfig load, does the API server answer these credentials, which
// port-forward protocols does it offer, and does RBAC allow what the proxy does. Each failure
// says what to do.
import { loadKubeConfig, type LoadedKubeConfig } from '../cluster/kubeconfig.js';
import { ApiConnection, ApiStatusError, CredentialError } from '../cluster/api.js';
import { IMPERSONATION_FIX, refusesImpersonation } from '../cluster/impersonation.js';
import type { EgressOptions } from '../cluster/egress-proxy.js';
import { ProxyRefusedError } from '../cluster/proxy-failures.js';
import { errorMessage } from '../core/errors.js';
import { shellQuote } from '../core/escape.js';
import { findExecutable } from './exec-path.js';
import { checkProtocols } from './port-forward.js';
import type { Check } from './report.js';
import { namedGrants, type ResourceRule } from './named-rights.js';
import { postJson } from './post-json.js';

export interface ClusterCheckOptions {
  kubeconfig?: string;
  /** undefined: the kubeconfig's current context. */
  context?: string;
  /** -n: the namespace to check in instead of the context's (the proxy's default route takes it). */
  namespace?: string;
  /** The route's name, for the report. */
  scope: string;
  timeoutMs: number;
  env?: NodeJS.ProcessEnv;
  /**
   * How API connections leave, as the proxy's do (doctor/egress.ts: the extra CA, the route that
   * carries them); rejects when that route cannot start.
   */
  egress?: () => Promise<EgressOptions>;
  /**
   * A konnectivity route's guest cluster: its streams go through the konnectivity server, not
   * pods/portforward, so RBAC is asked only for what the watch cache reads, and this check (of
   * the server, doctor/konnectivity.ts) is made in place of the port-forward protocols'.
   */
  konnectivity?: (api: ApiConnection) => Promise<Check>;
}

export async function checkCluster(o: ClusterCheckOptions): Promise<Check[]> {
  const checks: Check[] = [];
  const add = (c: Omit<Check, 'scope'>) => checks.push({ scope: o.scope, ...c });
  let loaded: LoadedKubeConfig;
  try {
    loaded = loadKubeConfig({ kubeconfig: o.kubeconfig, context: o.context, namespace: o.namespace });
  } catch (err) {
    add({
      name: 'kubeconfig',
      status: 'fail',
      detail: errorMessage(err),
      fix: `check --kubeconfig/$KUBECONFIG and the context name: \`${kubectl(o, undefined, 'config get-contexts')}\``,
    });
    return checks;
  }
  const auth = authKind(loaded, o.env);
  add(
    auth.problem
      ? { name: 'kubeconfig', status: 'fail', detail: auth.detail, fix: auth.problem }
      : auth.warning
        ? { name: 'kubeconfig', status: 'warn', detail: auth.detail, fix: auth.warning }
        : { name: 'kubeconfig', status: 'ok', detail: auth.detail },
  );
  if (auth.problem) return checks;

  let egress: EgressOptions;
  try {
    egress = (await o.egress?.()) ?? {};
  } catch (err) {
    add({
      name: 'api-server',
      status: 'fail',
      detail: `${loaded.server}: ${errorMessage(err)}`,
      fix: 'the ssh route this cluster is reached through (via) cannot start: fix its host in ~/.ssh/config until `ssh HOST` works from here',
    });
    return checks;
  }
  const api = new ApiConnection(loaded.kc, egress);
  const started = Date.now();
  let version: { gitVersion?: string };
  try {
    version = await api.getJson<{ gitVersion?: string }>('/version', o.timeoutMs);
    add({
      name: 'api-server',
      status: 'ok',
      detail: `${loaded.server} answers: ${version.gitVersion ?? 'unknown version'}, ${Date.now() - started} ms round trip, ${egressOf(api, egress)}`,
    });
  } catch (err) {
    const check = kubectl(o, loaded.context, 'get --raw /version');
    add({
      name: 'api-server',
      status: 'fail',
      detail: `${loaded.server} (${egressOf(api, egress)}): ${errorMessage(err)}`,
      fix: apiFix(err, egress, loaded, check, api),
    });
    return checks;
  }
  checks.push(...(await checkRbac(api, loaded, o, portForwardAsks(version.gitVersion))));
  checks.push(await (o.konnectivity ? o.konnectivity(api) : checkProtocols(api, loaded.namespace, o)));
  return checks;
}

function authKind(l: LoadedKubeConfig, env: NodeJS.ProcessEnv = process.env): { detail: string; problem?: string; warning?: string } {
  const user = l.kc.getCurrentUser()!;
  const as = user.impersonateUser ? ` as ${user.impersonateUser}` : '';
  const where = `context ${l.context} (namespace ${l.namespace}), user ${user.name}${as}`;
  // A token, password or client certificate beside `exec` is sent as it is: the plugin never runs (as in kubectl).
  const otherAuth = !!(l.tokenFile || user.token || user.username || ((user.certData || user.certFile) && (user.keyData || user.keyFile)));
  if (user.exec && !otherAuth) {
    const command = String((user.exec as { command?: string }).command ?? '');
    const found = command ? findExecutable(command, env) : undefined;
    if (!found)
      return {
        detail: `${where}, auth: exec plugin "${command}" not found`,
        problem: `install "${command}" or put it on PATH (the exec plugin of user ${user.name}), or fix users[].user.exec.command`,
      };
    return { detail: `${where}, auth: exec plugin ${found}` };
  }
  if (user.authProvider) return { detail: `${where}, auth: auth-provider ${user.authProvider.name}` };
  // kube-apiserver asks the client certificate before any token: with both, the certificate says who.
  const cert = !!((user.certData || user.certFile) && (user.keyData || user.keyFile));
  const token = l.tokenFile ? `token file ${l.tokenFile}` : user.token ? 'bearer token' : undefined;
  if (cert && token) return { detail: `${where}, auth: client certificate (the ${token} beside it counts only if the API server refuses the certificate)` };
  if (token) return { detail: `${where}, auth: ${token}` };
  if (user.certData || user.certFile) return { detail: `${where}, auth: client certificate` };
  // kube-apiserver dropped basic auth in v1.19: the header is ignored, the request anonymous.
  if (user.username)
    return {
      detail: `${where}, auth: basic (username/password), which API servers ignore since v1.19: requests go as system:anonymous`,
      warning: 'use a token, a client certificate or an exec plugin for this user (`kubectl config set-credentials`)',
    };
  return { detail: `${where}, auth: none (anonymous)` };
}

/** How the API requests went: the proxy or route that carried them (no userinfo), the extra CA trusted. */
function egressOf(api: ApiConnection, egress: EgressOptions): string {
  const e = api.egress;
  const how = !e?.proxy ? 'no proxy' : e.source === 'via' ? `through ${e.proxy}` : `via proxy ${e.proxy} (${e.source})`;
  return egress.extraCA ? `${how}, extra CA ${egress.extraCA.file}` : how;
}

/**
 * A kubectl line for what doctor checked, to paste as is: the route's context and the kubeconfig
 * doctor read (kubectl's current context may be another user's, and its answer another's).
 */
function kubectl(o: ClusterCheckOptions, context: string | undefined, args: string): string {
  const file = o.kubeconfig ? ` --kubeconfig ${shellQuote(o.kubeconfig)}` : '';
  return `kubectl${file}${context === undefined ? '' : ` --context ${shellQuote(context)}`} ${args}`;
}

/** `check`: the kubectl line that asks what doctor asked. */
function apiFix(err: unknown, egress: EgressOptions, loaded: LoadedKubeConfig, check: string, api: ApiConnection): string {
  // No request left: the exec plugin, the OIDC refresh or the token file failed, not the network.
  if (err instanceof CredentialError)
    return `user ${loaded.kc.getCurrentUser()!.name} has no credentials now, the network is not at fault: do what the message says (log in again, renew the token), then check with \`${check}\``;
  if (err instanceof ApiStatusError && err.statusCode === 401) return `the API server rejects these credentials: ${api.refusalAdvice()} (try \`${check}\`)`;
  if (err instanceof ApiStatusError && err.statusCode === 403 && refusesImpersonation(err.message))
    return `the credentials are valid but user ${loaded.kc.getCurrentUser()!.name} may not impersonate whom it names: ${IMPERSONATION_FIX}`;
  if (err instanceof ApiStatusError && err.statusCode === 403)
    return 'the credentials are valid but may not read /version: ask for the system:public-info-viewer role';
  if (err instanceof ApiStatusError) return `the API server answered with an error: see the message, and try \`${check}\``;
  if (err instanceof ProxyRefusedError) return err.fix;
  if (egress.via)
    return `the API server cannot be reached through route ${egress.via.route}: check that its ssh chain works (\`ssh HOST\`) and that the server address answers from its last hop`;
  const message = errorMessage(err);
  // Node's words for a chain no trusted CA signs: a wrong kubeconfig CA, or a proxy that intercepts TLS.
  if (/unable to (get|verify)|self[- ]signed|UNABLE_TO_(GET|VERIFY)|SELF_SIGNED/i.test(message)) {
    const cluster = loaded.kc.getCurrentCluster()?.name ?? loaded.context;
    const kubeconfigCA = `the CA the kubeconfig gives for cluster ${cluster} (certificate-authority or certificate-authority-data)`;
    const renew = 'get a current kubeconfig for the cluster (its CA may have changed)';
    if (egress.extraCA)
      return `TLS verification failed: the server's certificate is signed neither by ${kubeconfigCA} nor by the extra CA ${egress.extraCA.file}: ${renew}, or check that ${egress.extraCA.file} holds the CA of the proxy that intercepts TLS`;
    return `TLS verification failed: the server's certificate is not signed by ${kubeconfigCA}: ${renew}, or, if a corporate proxy intercepts TLS, trust its CA with --extra-ca FILE (config: extra-ca)`;
  }
  if (/CERT|certificate/i.test(message))
    return 'TLS verification failed: see the message; if a corporate proxy intercepts TLS, trust its CA with --extra-ca FILE (config: extra-ca), as the proxy would need too';
  return 'the API server cannot be reached: check the network/VPN, the server address and any proxy-url in the kubeconfig';
}

/**
 * What the proxy reads: Services and EndpointSlices are watched; Pods only looked up, by IP (a
 * list with a field selector) or by name (cluster/pod-lookup.ts), so they need list and get.
 */
const READ: Array<{ resource: string; group: string; label: string; verbs: string[] }> = [
  { resource: 'services', group: '', label: 'services', verbs: ['list', 'watch'] },
  { resource: 'endpointslices', group: 'discovery.k8s.io', label: 'endpointslices.discovery.k8s.io', verbs: ['list', 'watch'] },
  { resource: 'pods', group: '', label: 'pods', verbs: ['list', 'get'] },
];

export interface Ask {
  verb: string;
  resource: string;
  group: string;
  subresource?: string;
  label: string;
}

const READ_ASKS: Ask[] = READ.flatMap((r) => r.verbs.map((verb) => ({ verb, resource: r.resource, group: r.group, label: `${verb} ${r.label}` })));

/**
 * Every transport the proxy uses upgrades a GET to a WebSocket, authorized as `get` on
 * pods/portforward; from 1.35 the API server also checks `create` for it
 * (AuthorizePodWebsocketUpgradeCreatePermission). An unknown version is taken as new.
 */
export function portForwardAsks(gitVersion: string | undefined): Ask[] {
  const minor = /^v?1\.(\d+)\./.exec(gitVersion ?? '')?.[1];
  const verbs = minor !== undefined && Number(minor) < 35 ? ['get'] : ['get', 'create'];
  return verbs.map((verb) => ({ verb, resource: 'pods', group: '', subresource: 'portforward', label: `${verb} pods/portforward` }));
}

/** RBAC by SelfSubjectAccessReview: cluster-wide first, else in the route's namespace. */
async function checkRbac(api: ApiConnection, { namespace, context }: LoadedKubeConfig, o: ClusterCheckOptions, portForward: Ask[]): Promise<Check[]> {
  const base = { scope: o.scope, name: 'rbac' };
  const asks = o.konnectivity ? READ_ASKS : [...READ_ASKS, ...portForward];
  let clusterWide: boolean[];
  try {
    clusterWide = await Promise.all(asks.map((a) => canI(api, a, '', o.timeoutMs)));
  } catch (err) {
    return [
      {
        ...base,
        status: 'fail',
        detail: `SelfSubjectAccessReview failed: ${errorMessage(err)}`,
        fix: 'the API server must allow creating selfsubjectaccessreviews.authorization.k8s.io (every authenticated user may, by default)',
      },
    ];
  }
  if (clusterWide.every(Boolean)) return [{ ...base, status: 'ok', detail: `cluster-wide: ${asks.map((a) => a.label).join(', ')}` }];
  const inNamespace = await Promise.all(asks.map((a, i) => (clusterWide[i] ? true : canI(api, a, namespace, o.timeoutMs))));
  const missing = asks.filter((_, i) => !inNamespace[i]);
  const wideMissing = asks.filter((_, i) => !clusterWide[i]).map((a) => a.label);
  if (missing.length === 0) {
    return [
      { ...base, status: 'ok', detail: `in namespace ${namespace} only (not cluster-wide: ${wideMissing.join(', ')}); names in other namespaces are refused` },
    ];
  }
  if (missing.every((a) => a.subresource === 'portforward')) {
    const named = await namedPortForward(api, namespace, missing, o.timeoutMs);
    if (named.length > 0) {
      const first = missing[0]!;
      const yes = kubectl(o, context, `auth can-i ${first.verb} pods/${named[0]} --subresource=portforward -n ${shellQuote(namespace)}`);
      const no = kubectl(o, context, `auth can-i ${first.verb} pods --subresource=portforward -n ${shellQuote(namespace)}`);
      return [
        {
          ...base,
          status: 'warn',
          detail: `in namespace ${namespace}: ${missing.map((a) => a.label).join(', ')} only on pods ${named.join(', ')} (a Role's resourceNames); other pods are refused`,
          fix: `Services and Pod IPs served by other pods are refused: ask for ${missing.map((a) => a.verb).join('/')} on pods/portforward for every pod in ${namespace}; check with: ${yes} (yes) and ${no} (no)`,
        },
      ];
    }
  }
  // kubectl auth can-i reads TYPE/NAME: `pods/portforward` would ask about a pod named "portforward".
  const canIs = missing.map((a) =>
    kubectl(
      o,
      context,
      `auth can-i ${a.verb} ${a.subresource ? `${a.resource} --subresource=${a.subresource}` : a.group ? `${a.resource}.${a.group}` : a.resource} -n ${shellQuote(namespace)}`,
    ),
  );
  return [
    {
      ...base,
      status: 'fail',
      detail: `not allowed in namespace ${namespace} nor cluster-wide: ${missing.map((a) => a.label).join(', ')}`,
      fix: `ask your cluster admin for a Role in ${namespace} (or a ClusterRole) granting list/watch on services and endpointslices.discovery.k8s.io, list/get on pods${o.konnectivity ? '' : ` and ${portForward.map((a) => a.verb).join('/')} on pods/portforward`}; check with: ${canIs[0]}`,
    },
  ];
}

/**
 * The pods a Role's resourceNames grant every one of these port-forward rights on, each confirmed
 * by a SelfSubjectAccessReview that names it (what `kubectl auth can-i get pods/NAME` asks).
 */
async function namedPortForward(api: ApiConnection, namespace: string, asks: Ask[], timeoutMs: number): Promise<string[]> {
  try {
    const review = { kind: 'SelfSubjectRulesReview', apiVersion: 'authorization.k8s.io/v1', spec: { namespace } };
    const answer = await postJson<{ status?: { resourceRules?: ResourceRule[] } }>(
      api,
      '/apis/authorization.k8s.io/v1/selfsubjectrulesreviews',
      review,
      timeoutMs,
    );
    const names = namedGrants(
      answer.status?.resourceRules ?? [],
      'pods/portforward',
      asks.map((a) => a.verb),
    ).slice(0, 20);
    const allowed = await Promise.all(names.map(async (n) => (await Promise.all(asks.map((a) => canI(api, a, namespace, timeoutMs, n)))).every(Boolean)));
    return names.filter((_, i) => allowed[i]);
  } catch {
    return []; // no rules review: the verdict without names stands
  }
}

async function canI(api: ApiConnection, a: Ask, namespace: string, timeoutMs: number, name?: string): Promise<boolean> {
  const attributes = { namespace, verb: a.verb, group: a.group, resource: a.resource, ...(a.subresource ? { subresource: a.subresource } : {}) };
  const review = {
    kind: 'SelfSubjectAccessReview',
    apiVersion: 'authorization.k8s.io/v1',
    spec: { resourceAttributes: { ...attributes, ...(name ? { name } : {}) } },
  };
  const answer = await postJson<{ status?: { allowed?: boolean } }>(api, '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', review, timeoutMs);
  return answer.status?.allowed === true;
}
