// The environment a managed daemon starts with: the caller's, less what must not live all day in
// a background process. NODE_OPTIONS=--inspect (a developer debugging a Node app in that shell)
// would open the V8 inspector for the daemon's whole life: any local user who reaches its port
// can run code as this user (docs/security.md). The foreground proxy is the user's own choice.
import { allocatorEnv } from './allocator-env.js';

/** NODE_OPTIONS flags that open a debugger (node's `--inspect*` and the older `--debug*`). */
const INSPECTOR = /^--(inspect|inspect-brk|inspect-wait|inspect-port|debug|debug-brk|debug-port)(=.*)?$/;

/** NODE_OPTIONS without its inspector flags; undefined when nothing else is left. */
export function withoutInspector(nodeOptions: string | undefined): string | undefined {
  if (nodeOptions === undefined) return undefined;
  const kept = nodeOptions
    .split(/\s+/)
    .filter((flag) => flag && !INSPECTOR.test(flag))
    .join(' ');
  return kept || undefined;
}

export function daemonEnv(env: NodeJS.ProcessEnv, extra: Record<string, string | undefined>): NodeJS.ProcessEnv {
  return { ...env, ...allocatorEnv(env), NODE_OPTIONS: withoutInspector(env.NODE_OPTIONS), ...extra };
}
