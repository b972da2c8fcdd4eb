// oclif 4 cannot have a runnable root command beside subcommands, yet the plugin's main form is
// `kubectl proxyout [flags]`. So a bare or flag-first invocation is rewritten to the hidden
// `serve` command before oclif sees it. Non-flag first words are never rewritten, which keeps
// real commands working and lets oclif report unknown ones the usual way.

export const SERVE_COMMAND = 'serve';

/** Flags oclif must see at the root: help (root help lists the serve flags) and version. */
const ROOT_FLAGS: ReadonlySet<string> = new Set(['--help', '-h', '--version']);

export function routeArgv(argv: readonly string[]): string[] {
  const [first, ...rest] = argv;
  if (first === undefined) return [SERVE_COMMAND];
  // `help [COMMAND…]` without the help plugin: same output as `[COMMAND…] --help`.
  if (first === 'help') return [...rest, '--help'];
  if (first.startsWith('-') && !ROOT_FLAGS.has(first)) return [SERVE_COMMAND, ...argv];
  return [...argv];
}
