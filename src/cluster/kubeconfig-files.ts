// The kubeconfig files kubectl reads and how it merges them (client-go tools/clientcmd/loader.go,
// ClientConfigLoadingRules.Load): --kubeconfig alone; else every file of $KUBECONFIG, where a
// missing file is skipped and an empty one is an empty config; else ~/.kube/config. For clusters,
// users and contexts the first file to name an entry wins (later ones never replace or clash with
// it), and current-context comes from the first file that sets one. client-node's loadFromDefault
// lets the last current-context win and throws "Duplicate user" instead, so we merge here and hand
// client-node the result (loadFromOptions).
import { existsSync, readFileSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import yaml from 'js-yaml';
import { newClusters, newContexts, newUsers, type Cluster, type Context, type User } from '@kubernetes/client-node/dist/config_types.js';
import { checkRegularFile, fileStamp } from '../core/regular-file.js';

type Obj = Record<string, unknown>;
type Named = { name?: unknown } & Obj;

export interface MergedKubeConfig {
  clusters: Cluster[];
  users: User[];
  contexts: Context[];
  currentContext: string;
  /** Each user's entry as written (paths made absolute) and the file that defined it. */
  rawUsers: Map<string, { user: Obj; file: string }>;
  /** The entries left out above as unusable (no server, no cluster): `cluster NAME`, `context NAME`. */
  incomplete: Set<string>;
}

/** The files kubectl would read, in order; `$KUBECONFIG`'s missing files are left out. */
export function kubeconfigFiles(explicit: string | undefined, env: NodeJS.ProcessEnv = process.env): string[] {
  if (explicit) return [explicit];
  // Set at all, even to ":" (every entry empty), KUBECONFIG is the list: client-go then reads no
  // file rather than ~/.kube/config.
  if (env.KUBECONFIG) return env.KUBECONFIG.split(path.delimiter).filter((f) => f && existsSync(f));
  const home = path.join(os.homedir(), '.kube', 'config');
  return existsSync(home) ? [home] : [];
}

/**
 * A kubeconfig's bytes as text the way go-yaml decodes them: UTF-8, or UTF-16 when a byte-order
 * mark says so (Windows PowerShell 5's `kubectl config view --raw > config` writes UTF-16LE).
 */
export function kubeconfigText(bytes: Buffer): string {
  if (bytes[0] === 0xff && bytes[1] === 0xfe) return bytes.subarray(2).toString('utf16le');
  if (bytes[0] === 0xfe && bytes[1] === 0xff)
    return Buffer.from(bytes.subarray(2, bytes.length - (bytes.length % 2)))
      .swap16()
      .toString('utf16le');
  return bytes.toString('utf8');
}

// go-yaml's booleans are YAML 1.1's: `insecure-skip-tls-verify: yes` (or `on`, `y`) is true for
// kubectl, where YAML 1.2 (js-yaml) reads the string "yes" and client-node then verified anyway.
const TRUE = ['y', 'Y', 'yes', 'Yes', 'YES', 'true', 'True', 'TRUE', 'on', 'On', 'ON'];
const FALSE = ['n', 'N', 'no', 'No', 'NO', 'false', 'False', 'FALSE', 'off', 'Off', 'OFF'];
const YAML11_BOOL = new yaml.Type('tag:yaml.org,2002:bool', {
  kind: 'scalar',
  resolve: (data: string) => TRUE.includes(data) || FALSE.includes(data),
  construct: (data: string) => TRUE.includes(data),
  predicate: (o: unknown) => typeof o === 'boolean',
  represent: { lowercase: (o: object) => (o.valueOf() ? 'true' : 'false') },
  defaultStyle: 'lowercase',
});
const KUBECONFIG_SCHEMA = yaml.DEFAULT_SCHEMA.extend({ implicit: [YAML11_BOOL] });

/**
 * A kubeconfig's YAML as client-go reads it (sigs.k8s.io/yaml): its first document, YAML 1.1
 * booleans, and a key given twice in one mapping takes its last value (js-yaml would refuse the
 * file: "duplicated mapping key").
 */
export function loadKubeconfigYaml(text: string): unknown {
  // Only the first document, as go-yaml reads it: a trailing `---` made js-yaml refuse the file.
  const docs = yaml.loadAll(text, null, { json: true, schema: KUBECONFIG_SCHEMA });
  return docs[0];
}

/** YAML kubectl reads back as written: a string such as "yes" stays quoted. */
export function dumpKubeconfigYaml(doc: unknown): string {
  return yaml.dump(doc, { lineWidth: -1, schema: KUBECONFIG_SCHEMA });
}

/** Reads and merges `files` as client-go does (errors: the file's name and the first line). */
export function mergeKubeconfigFiles(files: string[]): MergedKubeConfig {
  const clusters = new Entries();
  const users = new Entries();
  const contexts = new Entries();
  const rawUsers = new Map<string, { user: Obj; file: string }>();
  let currentContext = '';
  for (const file of files) {
    // It is read synchronously: a FIFO would block the whole process (core/regular-file.ts).
    checkRegularFile(file);
    let doc: Obj;
    try {
      doc = (loadKubeconfigYaml(kubeconfigText(readFileSync(file))) ?? {}) as Obj; // an empty file is an empty config
    } catch (err) {
      throw new Error(`error loading config file "${file}": ${(err as Error).message.split('\n')[0]}`, { cause: err });
    }
    if (typeof doc !== 'object' || Array.isArray(doc)) throw new Error(`error loading config file "${file}": not a kubeconfig`);
    const dir = path.dirname(path.resolve(file));
    checkStrings(file, doc);
    for (const key of ['clusters', 'users', 'contexts']) checkUniqueNames(file, key, list(doc[key]));
    for (const c of list(doc.clusters)) clusters.add(c, () => resolveCluster(c, dir));
    for (const u of list(doc.users)) {
      const entry = users.add(u, () => resolveUser(u, dir));
      if (entry) rawUsers.set(String(u.name), { user: (entry.user as Obj | undefined) ?? {}, file });
    }
    for (const c of list(doc.contexts)) contexts.add(c, () => c);
    if (!currentContext && typeof doc['current-context'] === 'string') currentContext = doc['current-context'];
  }
  // kubectl takes a cluster without a server or a context without a cluster (`kubectl config
  // set-context dev --namespace dev` writes one) and fails only when it is used; client-node
  // refused the whole kubeconfig, so one such entry stopped every context.
  const incomplete = new Set<string>();
  const usable = (kind: string, entries: Named[], ok: (e: Named) => unknown) =>
    entries.filter((e) => {
      const named = typeof e.name === 'string' && e.name;
      if (named && !ok(e)) incomplete.add(`${kind} ${e.name}`);
      return named && ok(e);
    });
  const body = (v: unknown) => (v && typeof v === 'object' ? (v as Obj) : {});
  return {
    clusters: newClusters(usable('cluster', clusters.all, (c) => body(c.cluster).server)),
    users: newUsers(usable('user', users.all, () => true)),
    contexts: newContexts(usable('context', contexts.all, (c) => body(c.context).cluster)),
    currentContext,
    rawUsers,
    incomplete,
  };
}

/**
 * What a context's connection is made from — its context, cluster and user entries as the merged
 * kubeconfig has them now — as one string: a reload compares it to keep a route whose kubeconfig
 * did not change, and to make anew one whose server, CA (its file too) or credentials were edited.
 * The OIDC tokens the proxy itself writes back are left out. A kubeconfig that does not load gives
 * its error.
 */
export function contextFingerprint(explicit: string | undefined, context: string): string {
  try {
    const merged = mergedUnlessUnchanged(kubeconfigFiles(explicit));
    const ctx = merged.contexts.find((c) => c.name === context);
    const user = ctx && structuredClone(merged.rawUsers.get(ctx.user)?.user);
    const oidc = (user?.['auth-provider'] as { config?: Obj } | undefined)?.config;
    if (oidc) (delete oidc['id-token'], delete oidc['refresh-token']);
    const cluster = ctx && merged.clusters.find((c) => c.name === ctx.cluster);
    // A CA file rewritten in place (a rotated CA) is an edit too: a managed daemon's copy embeds it.
    return JSON.stringify({ ctx, cluster, caFile: cluster?.caFile && fileStamp(cluster.caFile), user });
  } catch (err) {
    return `unloadable: ${(err as Error).message}`;
  }
}

// The last merge, by the files' identity: each refused route looks every 3 s, and 200 contexts'
// merges (5–40 ms each, synchronous) stalled every stream of the proxy for a second at a time.
// Weakly held: a 2000-context kubeconfig's merge is 10-20 MB, which a proxy need not keep between
// checks; within one synchronous run (a table's loads, a check of every route) it stays.
let lastMerge: { key: string; merged: WeakRef<MergedKubeConfig> } | undefined;

/**
 * mergeKubeconfigFiles, but an unchanged set of files is read and merged once: each route of a
 * table loads its context, and 200 routes of a 2000-context kubeconfig took 7 s to start. A copy,
 * which the caller may change (exec info is added in place).
 */
export function mergedKubeconfig(files: string[]): MergedKubeConfig {
  return structuredClone(mergedUnlessUnchanged(files));
}

function mergedUnlessUnchanged(files: string[]): MergedKubeConfig {
  let key: string | undefined;
  let recent = false;
  try {
    key = JSON.stringify(
      files.map((f) => {
        const st = statSync(f);
        // Written within the last seconds: another write may follow within the same timestamp
        // tick (coarse on most file systems), so this merge is not kept (git's "racily clean").
        recent ||= st.mtimeMs > Date.now() - 2_000;
        return [f, st.dev, st.ino, st.size, st.mtimeMs, st.ctimeMs];
      }),
    );
  } catch {
    /* gone meanwhile: the merge says so */
  }
  const kept = key !== undefined && lastMerge?.key === key ? lastMerge.merged.deref() : undefined;
  if (kept) return kept;
  const merged = mergeKubeconfigFiles(files);
  lastMerge = key === undefined || recent ? undefined : { key, merged: new WeakRef(merged) };
  return merged;
}

/** Entries by name, the first kept. */
class Entries {
  readonly all: Named[] = [];
  private readonly names = new Set<string>();

  add(entry: Named, resolved: () => Named): Named | undefined {
    const name = entry.name;
    if (typeof name === 'string' && name) {
      if (this.names.has(name)) return undefined;
      this.names.add(name);
    }
    const out = resolved();
    this.all.push(out);
    return out;
  }
}

/**
 * One file naming a cluster, user or context twice: client-go refuses the file ("duplicate name
 * in list"); only across files does the first one win.
 */
function checkUniqueNames(file: string, key: string, entries: Named[]): void {
  const seen = new Set<unknown>();
  for (const { name } of entries) {
    if (typeof name === 'string' && seen.has(name)) throw new Error(`error loading config file "${file}": duplicate name "${name}" in ${key}`);
    seen.add(name);
  }
}

// The fields kubectl refuses the whole file for when they are not strings: YAML reads `name: 1.30`
// as a number and `name: no` as false, and the proxy then said context "1.30" was not found.
const STRINGS: Record<string, { body: string; keys: string[] }> = {
  clusters: { body: 'cluster', keys: ['server', 'tls-server-name', 'certificate-authority', 'proxy-url'] },
  users: { body: 'user', keys: ['client-certificate', 'client-key', 'token', 'tokenFile', 'as', 'username', 'password'] },
  contexts: { body: 'context', keys: ['cluster', 'user', 'namespace'] },
};

function checkStrings(file: string, doc: Obj): void {
  const check = (where: string, v: unknown) => {
    if (v === undefined || v === null || typeof v === 'string') return;
    // Not the value: it may be a token or a password.
    const what = typeof v === 'object' ? (Array.isArray(v) ? 'a list' : 'a mapping') : `a ${typeof v}`;
    throw new Error(`error loading config file "${file}": ${where} is ${what} to YAML, not a string (kubectl refuses it too): quote it`);
  };
  check('current-context', doc['current-context']);
  for (const [key, { body, keys }] of Object.entries(STRINGS))
    list(doc[key]).forEach((entry, i) => {
      check(`${key}[${i}].name`, entry.name);
      const inner = entry[body];
      if (inner && typeof inner === 'object') for (const k of keys) check(`${key}[${i}].${body}.${k}`, (inner as Obj)[k]);
    });
}

function list(v: unknown): Named[] {
  return Array.isArray(v) ? v.filter((x): x is Named => !!x && typeof x === 'object') : [];
}

/** client-go's ResolvePaths: a relative path is relative to the kubeconfig that names it. */
function resolveIn(dir: string, obj: Obj | undefined, keys: string[]): Obj | undefined {
  if (!obj || typeof obj !== 'object') return obj;
  const out = { ...obj };
  for (const k of keys) if (typeof out[k] === 'string' && out[k]) out[k] = path.resolve(dir, out[k] as string);
  return out;
}

function resolveCluster(entry: Named, dir: string): Named {
  return { ...entry, cluster: resolveIn(dir, entry.cluster as Obj | undefined, ['certificate-authority']) };
}

function resolveUser(entry: Named, dir: string): Named {
  const user = resolveIn(dir, entry.user as Obj | undefined, ['client-certificate', 'client-key', 'tokenFile', 'token-file']);
  // An exec command with a path separator is a path (GetAuthInfoFileReferences); a bare name stays
  // a PATH look-up. Else `./cred.sh` would run from whatever directory the proxy started in.
  const exec = user?.exec as Obj | undefined;
  if (user && exec && typeof exec.command === 'string' && exec.command.includes(path.sep) && !path.isAbsolute(exec.command))
    user.exec = { ...exec, command: path.join(dir, exec.command) };
  return { ...entry, user };
}
