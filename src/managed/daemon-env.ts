// The environment a managed daemon starts with: the caller's, less what must not live all day in
// a background process. NODE_OPTIONS=--inspect (a developer debugging a Node app in that shell)
// would open the V8 inspector for the daemon's whole life: any local user who reaches its port
// can run code as this user (docs/security.md). The foreground proxy is the user's own choice.
import { PROGRAM_THREADPOOL_SIZE } from '../core/threadpool.js';
import { allocatorEnv } from './allocator-env.js';

/** NODE_OPTIONS flags that open a debugger (node's `--inspect*` and the older `--debug*`). */
const INSPECTOR = /^--(inspect|inspect-brk|inspect-wait|inspect-port|debug|debug-brk|debug-port)(=.*)?$/;
/** Those that take their value as the next word when it is not given with `=`. */
const VALUE_NEXT = /^--(inspect-port|debug-port)$/;

/**
 * A flag's name as node reads it: `_` and `-` are the same in option names (`--inspect_brk`
 * opens the inspector as `--inspect-brk` does).
 */
function nodeFlag(word: string): string {
  const eq = word.indexOf('=');
  const name = eq < 0 ? word : word.slice(0, eq);
  return `${name.replace(/_/g, '-')}${eq < 0 ? '' : word.slice(eq)}`;
}

/** NODE_OPTIONS without its inspector flags; undefined when nothing else is left. */
export function withoutInspector(nodeOptions: string | undefined): string | undefined {
  if (nodeOptions === undefined) return undefined;
  const kept: string[] = [];
  const words = nodeOptions.split(/\s+/).filter(Boolean);
  for (let i = 0; i < words.length; i++) {
    const flag = nodeFlag(words[i]!);
    if (!INSPECTOR.test(flag)) kept.push(words[i]!);
    // `--inspect-port 9229`: node takes the next word as its value; it goes with the flag.
    else if (VALUE_NEXT.test(flag)) i++;
  }
  return kept.join(' ') || undefined;
}

export function daemonEnv(env: NodeJS.ProcessEnv, extra: Record<string, string | undefined>, platform: NodeJS.Platform = process.platform): NodeJS.ProcessEnv {
  return {
    ...env,
    ...allocatorEnv(env),
    NODE_OPTIONS: withoutInspector(env.NODE_OPTIONS),
    // On Windows the bin script cannot size libuv's threadpool in-process (libuv#4887): the
    // daemon is started with the variable, as before the bin script sized it.
    ...(platform === 'win32' && env.UV_THREADPOOL_SIZE === undefined ? { UV_THREADPOOL_SIZE: String(PROGRAM_THREADPOOL_SIZE) } : {}),
    ...extra,
  };
}
