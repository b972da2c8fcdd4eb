// `kubectl-proxyout __complete WORD…` (complete.ts): the commands as the manifest describes them
// (oclif's Config loads no command module for it), values read from the kubeconfig and the state
// directory. A completion never fails loudly: whatever cannot be read adds no candidates.
import { Config, type Interfaces } from '@oclif/core';
import { kubeconfigFiles, mergeKubeconfigFiles } from '../cluster/kubeconfig-files.js';
import { describeTarget, listIds, NewerEntryError, readEntry } from '../managed/store.js';
import { readdirSync } from 'node:fs';
import { EXEC_LOG_ID, layout } from '../state/paths.js';
import { complete, DIRECTIVE, formatCompletion, type CommandShape, type CompletionSources } from './complete.js';

export async function runCompletion(words: readonly string[], load: Interfaces.LoadOptions): Promise<void> {
  let out: string;
  try {
    const config = await Config.load(load);
    const commands: CommandShape[] = config.commands.map((c) => ({
      id: c.id,
      summary: c.summary ?? c.description?.split('\n')[0],
      hidden: c.hidden,
      flags: c.flags as CommandShape['flags'],
      takesId: 'id' in (c.args ?? {}),
      runsCommand: c.strict === false,
    }));
    out = formatCompletion(complete(words, commands, localSources));
  } catch {
    out = `:${DIRECTIVE.error}\n`;
  }
  process.stdout.write(out);
}

const localSources: CompletionSources = {
  contexts(kubeconfig) {
    return quietly(() =>
      mergeKubeconfigFiles(kubeconfigFiles(kubeconfig)).contexts.map((c) => ({
        name: c.name,
        description: [c.cluster && `cluster ${c.cluster}`, c.namespace && `namespace ${c.namespace}`].filter(Boolean).join(', '),
      })),
    );
  },
  namespaces(kubeconfig) {
    const named = quietly(() => mergeKubeconfigFiles(kubeconfigFiles(kubeconfig)).contexts.map((c) => c.namespace ?? 'default'));
    return [...new Set(named)].sort();
  },
  connectionIds() {
    const l = layout();
    return quietly(() => listIds(l)).map((id) => {
      try {
        const entry = readEntry(l, id);
        return { name: id, description: entry ? describeTarget(entry) : undefined };
      } catch (err) {
        // One entry this version cannot read takes no ID from the list.
        return { name: id, description: err instanceof NewerEntryError ? 'started by a newer kubectl-proxyout' : undefined };
      }
    });
  },
  logIds() {
    const l = layout();
    const running = new Map(localSources.connectionIds().map((c) => [c.name, c.description]));
    return quietly(() => readdirSync(l.logsDir))
      .filter((f) => f.endsWith('.log'))
      .map((f) => f.slice(0, -'.log'.length))
      .sort()
      .map((id) => ({
        name: id,
        description: id === EXEC_LOG_ID ? "exec's temporary proxies" : running.has(id) ? running.get(id) : 'stopped',
      }));
  },
};

function quietly<T>(read: () => T[]): T[] {
  try {
    return read();
  } catch {
    return [];
  }
}
