// oclif 4 cannot have a runnable root command beside subcommands, yet the plugin's main form is
// `kubectl proxyout [flags]`. So a bare or flag-first invocation is rewritten to the hidden
// `serve` command before oclif sees it. Non-flag first words are never rewritten, which keeps
// real commands working and lets oclif report unknown ones the usual way.

export const SERVE_COMMAND = 'serve';

/** The command whose arguments are another program's command line. */
const EXEC_COMMAND = 'exec';

/** Flags oclif must see at the root: help (root help lists the serve flags) and version. */
const ROOT_FLAGS: ReadonlySet<string> = new Set(['--help', '-h', '--version']);

/** What routing needs of a flag: whether the next word is its value. */
export interface FlagSpelling {
  type: 'boolean' | 'option';
  char?: string;
  aliases?: readonly string[];
}

/** `execFlags`: exec's flags (from the manifest), to find where its CMD starts. */
export function routeArgv(argv: readonly string[], execFlags?: Readonly<Record<string, FlagSpelling>>): string[] {
  const [first, ...rest] = argv;
  if (first === undefined) return [SERVE_COMMAND];
  // `help [COMMAND…]` without the help plugin: same output as `[COMMAND…] --help`.
  if (first === 'help') return [...rest, '--help'];
  if (first.startsWith('-') && !ROOT_FLAGS.has(first)) return [SERVE_COMMAND, ...argv];
  if (first === EXEC_COMMAND && execFlags) return [first, ...separateCommand(rest, execFlags)];
  return [...argv];
}

/**
 * exec's CMD starts at `--`, else at the first word that is neither one of exec's flags nor a
 * flag's value, as env(1), sudo and timeout read theirs and as completion (complete.ts) reads the
 * line: a `--` goes there, so that oclif takes none of CMD's flags (`exec kubectl get pods -n
 * shop` served namespace shop and ran `kubectl get pods`; `exec curl --help` showed exec's help).
 */
function separateCommand(words: readonly string[], flags: Readonly<Record<string, FlagSpelling>>): string[] {
  for (let i = 0; i < words.length; i++) {
    const word = words[i]!;
    if (word === '--') break;
    if (!word.startsWith('-') || word === '-') return [...words.slice(0, i), '--', ...words.slice(i)];
    if (takesNextWord(word, flags)) i++;
  }
  return [...words];
}

/** `--context` or `-n` without `=` or an attached value; an unknown flag is left to oclif's error. */
function takesNextWord(word: string, flags: Readonly<Record<string, FlagSpelling>>): boolean {
  const all = Object.entries(flags);
  if (word.startsWith('--')) {
    if (word.includes('=')) return false;
    const name = word.slice(2);
    return all.some(([n, f]) => (n === name || f.aliases?.includes(name)) && f.type === 'option');
  }
  return word.length === 2 && all.some(([, f]) => f.char === word[1] && f.type === 'option');
}
