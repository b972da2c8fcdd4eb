// The routing-table flags of proxyFlags() (src/cli/flags.ts): --config, repeatable --context, --direct.
import { Errors, Flags } from '@oclif/core';
import type { TableFlags } from '../config/load.js';
import { normalizeHostName } from '../routing/table-spec.js';

export function tableFlagDefinitions() {
  return {
    config: Flags.string({ summary: 'Routing table file (default: config.yaml in your config directory, when no --context is given).', helpValue: '<file>' }),
    context: Flags.string({
      summary: 'Kubeconfig context to serve, as a route named after it; repeat for several (the first is the default route).',
      helpValue: '<name>',
      multiple: true,
      // "--context a b" must not swallow b: each value needs its own --context.
      multipleNonGreedy: true,
    }),
    'extra-ca': Flags.string({
      summary: 'PEM bundle trusted for the API server connections besides the kubeconfig CA (a TLS-intercepting corporate proxy). Config key: extra-ca.',
      helpValue: '<file>',
    }),
    direct: Flags.boolean({ summary: 'Dial destinations no route claims from this machine instead of refusing them (--no-direct: refuse).', allowNo: true }),
  };
}

/** Parsed flag values → TableFlags (currentContext from the kubeconfig, for when no route names a cluster). */
export function tableFlagsFrom(
  flags: { config?: string; context?: string[]; direct?: boolean; 'cluster-domain': string; 'extra-ca'?: string },
  currentContext?: string,
): TableFlags {
  return {
    config: flags.config,
    contexts: flags.context ?? [],
    direct: flags.direct,
    clusterDomain: clusterDomainFrom(flags['cluster-domain']),
    currentContext,
    extraCA: flags['extra-ca'],
  };
}

/**
 * --cluster-domain as every name is compared: lower case, without a trailing dot. `Cluster.Local.`
 * used to be a routing-table suffix no name could match (they went direct, or were refused).
 */
export function clusterDomainFrom(text: string): string {
  const domain = normalizeHostName(text);
  if (!domain) throw new Errors.CLIError(`--cluster-domain: "${text}" is not a DNS domain (e.g. cluster.local)`, { exit: 2 });
  return domain;
}
