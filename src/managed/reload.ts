// `reload [ID]`: make a managed daemon's routing table again from what it was connected with
// (the config file, --context…, the user's kubeconfig), hand it the result, and wait for its
// verdict: the daemon starts the new routes and swaps the table in only when all of them answer
// and sync; otherwise nothing changes and the error comes back here.
import { testHookPause } from '../core/test-hooks.js';
import { StartupError, errorMessage } from '../core/errors.js';
import { controlRequest } from './control.js';
import { stateDirExists, type StateLayout } from '../state/paths.js';
import { withLockFile, withStateLock } from '../state/lock.js';
import { ElsewhereError, inspect, inspectAll, type Inspected } from './registry.js';
import { UnknownIdError } from './stop.js';
import { bestEffortWrite, controlSocketOf, updateEntry } from './store.js';
import {
  credentialIdentity,
  removeRouteKubeconfigsExcept,
  resolveManagedTable,
  routeKubeconfigFiles,
  routeKubeconfigsFor,
  writeRouteKubeconfigs,
  writeTableFile,
} from './table.js';
import type { RoutingTable } from '../routing/table-spec.js';
import { currentContextServed } from '../config/load.js';
import { contextFingerprint } from '../cluster/kubeconfig-files.js';
import type { CredentialSource } from '../proxy/credential-reload.js';

/** Test hook (core/test-hooks.ts testHookPause): hold a reload between making its table and writing it. */
export const TEST_RELOAD_PAUSE_ENV = 'KUBECTL_PROXYOUT_TEST_RELOAD_PAUSE';

/** A route sync fails after 30 s without headway (routes/guest-cluster/guest-cluster.ts SYNC_STALL_MS); then some slack. */
const RELOAD_TIMEOUT_MS = 45_000;
/** Said with the way a foreground proxy reloads: one running in another terminal is the likely one meant. */
const NONE_RUNNING = 'no managed proxy is running (a foreground proxy re-reads its routing table on SIGHUP: kill -HUP PID)';

export interface Reloaded {
  id: string;
  table: RoutingTable;
  /** The config file's port mappings, when they differ from those the proxy listens on (which a reload keeps). */
  mappingsKept?: { running: string[]; file: string[] };
}

export async function reloadProxy(l: StateLayout, id?: string, opts: { onWait?: () => void } = {}): Promise<Reloaded> {
  // The same checks as the other commands: a state directory others may write is refused.
  if (!stateDirExists(l)) throw id === undefined ? new StartupError(NONE_RUNNING) : new UnknownIdError(id);
  const first = await findProxy(l, id);
  if (!first) throw new UnknownIdError(id!);
  const named = first.entry.id;
  // One reload of a proxy at a time, from before its table is made: two at once (an IDE task on
  // save, a shell) left the one that made its table first, from the file as it was, applied last.
  return withLockFile(l.reloadLock(named), async () => reloadFound(l, named, await findProxy(l, named)), {
    waitMs: RELOAD_TIMEOUT_MS + 15_000,
    busy: () => new StartupError(`another reload of proxy ${named} has been under way for over a minute; nothing was reloaded: try again`),
    gone: () => new UnknownIdError(named),
    onWait: opts.onWait,
  });
}

/** The proxy to reload: the one named, or the only one running. */
function findProxy(l: StateLayout, id: string | undefined): Promise<Inspected | undefined> {
  // Under the lock: inspect() counts an entry whose daemon has not recorded its pid yet (a
  // `connect` under way) as dead and removes its files; connect holds the lock until it has.
  return withStateLock(l, () => {
    if (id === undefined) {
      const running = inspectAll(l).filter((x) => x.state === 'running');
      if (running.length !== 1)
        throw new StartupError(running.length === 0 ? NONE_RUNNING : `${running.length} managed proxies are running: name one (see \`status\`)`);
      return running[0]!;
    }
    return inspect(l, id);
  });
}

async function reloadFound(l: StateLayout, id: string, found: Inspected | undefined): Promise<Reloaded> {
  if (!found) throw new UnknownIdError(id);
  if (found.state === 'elsewhere') throw new ElsewhereError(found.entry, 'reload it');
  if (found.state !== 'running') throw new StartupError(`proxy ${id} is ${found.state}, not running`);
  const { options, namespace } = found.entry;
  const { managed, credentials } = withKubeconfigEnv(options.kubeconfigEnv, () => {
    const made = resolveManagedTable({
      kubeconfig: options.kubeconfigSource,
      contexts: options.contexts ?? [found.entry.context],
      currentContext: currentContextServed(options.table),
      config: options.config,
      defaultConfig: options.defaultConfig,
      direct: options.direct,
      clusterDomain: options.clusterDomain,
      extraCA: options.extraCA,
      namespace,
    });
    // Whose credentials the new default route uses (connect recorded them): an edited kubeconfig
    // may name another identity, and a later `connect` compares with what is recorded.
    return { managed: made, credentials: made.primary && credentialIdentity(made.primary, options.kubeconfigSource) };
  });
  const createdAt = found.entry.createdAt;
  await testHookPause(TEST_RELOAD_PAUSE_ENV);
  const before = await withStateLock(l, () => {
    // The table was made without the lock (from the user's config file and kubeconfig): the
    // daemon may have been disconnected meanwhile, or replaced by another `connect` for this ID,
    // whose files and socket these now are.
    assertSameDaemon(found, inspect(l, id));
    const existing = routeKubeconfigFiles(l, id);
    try {
      writeRouteKubeconfigs(l, id, managed);
      writeTableFile(l, id, managed.table);
    } catch (err) {
      // A full or read-only disk: one line naming where (the daemon was asked nothing), not a bare errno.
      const syscall = (err as NodeJS.ErrnoException).syscall ?? '';
      if (!['open', 'write', 'rename', 'chmod', 'close'].includes(syscall)) throw err;
      bestEffortWrite(() => removeRouteKubeconfigsExcept(l, id, existing));
      throw new StartupError(`cannot write the new routing table in ${l.proxyDir(id)}: ${errorMessage(err)}; nothing was reloaded`, { cause: err });
    }
    return existing;
  });
  let answer;
  try {
    // createdAt again: a daemon that replaced ours after the files were written refuses the request.
    answer = await controlRequest(controlSocketOf(l, found.entry), { cmd: 'reload', createdAt }, RELOAD_TIMEOUT_MS);
  } catch (err) {
    throw new StartupError(`proxy ${id} did not answer the reload: ${errorMessage(err)}`);
  }
  // Credentials on disk only for routes the daemon has: a removed route's go once the new table is
  // in force; a refused table's new routes' go at once.
  const keep = answer.ok ? Object.values(routeKubeconfigsFor(l, id, managed.table)) : before;
  await withStateLock(l, () => {
    if (!sameDaemon(found, inspect(l, id))) return;
    removeRouteKubeconfigsExcept(l, id, keep);
    // What `status` names as the proxy's cluster: the new table's default route (the file may
    // have made another context the default), or none without a cluster route.
    const primary = managed.primary;
    if (answer.ok)
      updateEntry(l, id, (e) =>
        Object.assign(
          e,
          primary
            ? { server: primary.server, context: primary.context, namespace: primary.namespace, credentials }
            : { server: '', context: '', namespace: '', credentials: undefined },
        ),
      );
  }).catch(() => undefined);
  if (!answer.ok) throw new StartupError(`proxy ${id} kept its routing table: ${answer.error}`);
  const running = options.table?.forwards ?? [];
  const file = managed.table.forwards ?? [];
  const same = running.length === file.length && running.every((f, i) => f === file[i]);
  return { id, table: managed.table, ...(same ? {} : { mappingsKept: { running, file } }) };
}

/**
 * Runs `fn` with $KUBECONFIG as `connect` had it: `reload` runs from any shell, whose own may name
 * other files (another team's, where a context of the same name is another cluster) or none.
 */
function withKubeconfigEnv<T>(recorded: string | undefined, fn: () => T): T {
  if (recorded === undefined) return fn(); // --kubeconfig, or an entry from before it was recorded
  const saved = process.env.KUBECONFIG;
  if (recorded) process.env.KUBECONFIG = recorded;
  else delete process.env.KUBECONFIG;
  try {
    return fn();
  } finally {
    if (saved === undefined) delete process.env.KUBECONFIG;
    else process.env.KUBECONFIG = saved;
  }
}

function sameDaemon(before: Inspected, now: Inspected | undefined): boolean {
  const { createdAt, pid, procIdentity } = before.entry;
  return now?.state === 'running' && now.entry.createdAt === createdAt && now.entry.pid === pid && now.entry.procIdentity === procIdentity;
}

/** The daemon a reload was prepared for is still the one that runs under its ID (call under the lock). */
function assertSameDaemon(before: Inspected, now: Inspected | undefined): void {
  const { id, createdAt, pid, procIdentity } = before.entry;
  if (!now || now.state === 'dead') throw new StartupError(`proxy ${id} stopped while its new routing table was made; nothing was reloaded`);
  if (now.entry.createdAt !== createdAt || now.entry.pid !== pid || now.entry.procIdentity !== procIdentity) {
    throw new StartupError(
      `proxy ${id} was replaced (disconnected and connected again) while its new routing table was made; nothing was reloaded: run reload again`,
    );
  }
  if (now.state !== 'running') throw new StartupError(`proxy ${id} is ${now.state}, not running`);
}

/**
 * A daemon's credentials come from the user's kubeconfig, behind the copy it runs from: refused
 * ones that the user renewed there (`oc login`) are taken by reloading itself, as `reload ID` would.
 */
export function userKubeconfigSource(l: StateLayout, id: string, kubeconfigSource: string | undefined, table: () => RoutingTable): CredentialSource {
  const inForce = new Map<string, string>();
  const now = (context: string) => contextFingerprint(kubeconfigSource, context);
  const record = () => {
    for (const spec of table().routes) if ('context' in spec) inForce.set(spec.name, now(spec.context));
  };
  record();
  return {
    now: (spec) => now(spec.context),
    inForce: (spec) => inForce.get(spec.name),
    renew: async () => {
      await reloadProxy(l, id);
      record();
    },
  };
}
