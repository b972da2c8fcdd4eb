// Shell completion through kubectl (≥ 1.26, kubectl/pkg/cmd/plugin: plugin completion): for
// `kubectl proxyout …<TAB>` kubectl runs `kubectl_complete-proxyout WORD… CURRENT` and reads
// Cobra's `__complete` answer (spf13/cobra completions.go): one candidate per line, a tab before
// its description, then `:<directive>`. bin/kubectl_complete-proxyout runs `kubectl-proxyout
// __complete`. Candidates come from the manifest (commands, flags, their options), the kubeconfig
// (contexts, namespaces) and the state directory (connection IDs): nothing reaches a cluster.

import { escapeControls } from '../core/escape.js';

/** cobra ShellCompDirective bits. */
export const DIRECTIVE = { error: 1, noSpace: 2, noFileComp: 4 } as const;

export interface FlagShape {
  char?: string;
  type: 'boolean' | 'option';
  multiple?: boolean;
  options?: readonly string[];
  helpValue?: string | string[];
  summary?: string;
  hidden?: boolean;
}

export interface CommandShape {
  id: string;
  summary?: string;
  hidden?: boolean;
  flags: Record<string, FlagShape>;
  /** Takes a connection ID as its argument. */
  takesId: boolean;
  /** Everything after its flags is another program's command line (`exec`). */
  runsCommand: boolean;
}

/** Where values come from; `kubeconfig` is the --kubeconfig given on the line, if any. */
export interface CompletionSources {
  contexts(kubeconfig: string | undefined): Array<{ name: string; description?: string }>;
  namespaces(kubeconfig: string | undefined): string[];
  connectionIds(): Array<{ name: string; description?: string }>;
  /** IDs with a log (`logs` takes stopped proxies and `exec` too). */
  logIds(): Array<{ name: string; description?: string }>;
}

export interface Completion {
  candidates: Array<{ value: string; description?: string }>;
  directive: number;
}

/** The command a flag-first line runs (argv.ts): the foreground proxy. */
const ROOT = 'serve';

/** Completions for `words` (after `proxyout`), the last being the word under the cursor. */
export function complete(words: readonly string[], commands: readonly CommandShape[], sources: CompletionSources): Completion {
  const current = words.at(-1) ?? '';
  const before = words.slice(0, -1);
  const listed = commands.filter((c) => !c.hidden).map((c) => ({ value: c.id, description: c.summary }));
  if (before.length === 0 && !current.startsWith('-')) return answer([...listed, { value: 'help', description: 'Help for a command.' }], current);
  const first = before[0];
  if (first === 'help') return answer(before.length === 1 ? listed : [], current);
  // A flag-first line (or a flag as the first word) is the foreground proxy's (argv.ts).
  const flagFirst = first === undefined || first.startsWith('-');
  const command = commands.find((c) => c.id === (flagFirst ? ROOT : first));
  if (!command) return answer([], current);
  const rest = flagFirst ? before : before.slice(1);

  let kubeconfig: string | undefined;
  let pending: [string, FlagShape] | undefined;
  const given = new Set<string>();
  let positionals = 0;
  for (const word of rest) {
    if (pending) {
      if (pending[0] === 'kubeconfig') kubeconfig = word;
      pending = undefined;
      continue;
    }
    if (word === '--' || (!word.startsWith('-') && command.runsCommand)) return { candidates: [], directive: 0 };
    if (!word.startsWith('-') || word === '-') {
      positionals++;
      continue;
    }
    const [name, inline] = splitFlag(word);
    const flag = findFlag(command, name);
    if (!flag) continue;
    given.add(flag[0]);
    if (flag[1].type === 'option') {
      if (inline === undefined) pending = flag;
      else if (flag[0] === 'kubeconfig') kubeconfig = inline;
    }
  }
  if (pending) return values(pending, current, '', kubeconfig, sources);
  if (current.startsWith('-')) {
    const [name, inline] = splitFlag(current);
    if (inline !== undefined) {
      const flag = findFlag(command, name);
      return flag && flag[1].type === 'option' ? values(flag, inline, `${name}=`, kubeconfig, sources) : answer([], current);
    }
    const flags = Object.entries(command.flags).filter(([n, f]) => !f.hidden && (f.multiple || !given.has(n)));
    const long = flags.map(([n, f]) => ({ value: `--${n}`, description: f.summary }));
    const short = current.startsWith('--') ? [] : flags.filter(([, f]) => f.char).map(([, f]) => ({ value: `-${f.char}`, description: f.summary }));
    return answer([...long, ...short, { value: '--help', description: 'Show help.' }], current);
  }
  if (command.takesId && positionals === 0)
    return answer(
      (command.id === 'logs' ? sources.logIds() : sources.connectionIds()).map((c) => ({ value: c.name, description: c.description })),
      current,
    );
  return answer([], current);
}

/** Cobra's output: candidates, then the directive. */
export function formatCompletion(c: Completion): string {
  // The shell prints candidates and descriptions as they are: a kubeconfig's name with ESC or 0x9b
  // would reach the terminal on TAB, and a newline or tab would forge a candidate. Such a value is
  // left out (no one types it); a description is escaped.
  const lines = c.candidates
    .filter((x) => escapeControls(x.value) === x.value)
    .map((x) => (x.description ? `${x.value}\t${escapeControls(oneLine(x.description))}` : x.value));
  return [...lines, `:${c.directive}`].join('\n') + '\n';
}

function values([name, flag]: [string, FlagShape], current: string, prefix: string, kubeconfig: string | undefined, sources: CompletionSources): Completion {
  let list: Array<{ value: string; description?: string }> = [];
  if (flag.options) list = flag.options.map((value) => ({ value }));
  else if (name === 'context') list = sources.contexts(kubeconfig).map((c) => ({ value: c.name, description: c.description }));
  else if (name === 'namespace') list = sources.namespaces(kubeconfig).map((value) => ({ value }));
  // A file: the shell's own file completion (directive 0), which knows no `--flag=` prefix.
  else if (helpValues(flag).some((v) => /file|dir|path/i.test(v)) && !prefix) return { candidates: [], directive: 0 };
  return answer(
    list.map((x) => ({ ...x, value: prefix + x.value })),
    prefix + current,
  );
}

function answer(all: Array<{ value: string; description?: string }>, current: string): Completion {
  return { candidates: all.filter((x) => x.value.startsWith(current)), directive: DIRECTIVE.noFileComp };
}

function splitFlag(word: string): [string, string | undefined] {
  // -nshop and -n=shop, as oclif's parser takes them.
  if (!word.startsWith('--') && word.length > 2) return [word.slice(0, 2), word.slice(2).replace(/^=/, '')];
  const eq = word.indexOf('=');
  return eq < 0 ? [word, undefined] : [word.slice(0, eq), word.slice(eq + 1)];
}

function findFlag(command: CommandShape, written: string): [string, FlagShape] | undefined {
  if (written.startsWith('--')) {
    const name = written.slice(2);
    const flag = command.flags[name];
    return flag ? [name, flag] : undefined;
  }
  const char = written.slice(1, 2);
  return Object.entries(command.flags).find(([, f]) => f.char === char);
}

function helpValues(flag: FlagShape): string[] {
  return flag.helpValue === undefined ? [] : Array.isArray(flag.helpValue) ? flag.helpValue : [flag.helpValue];
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}
