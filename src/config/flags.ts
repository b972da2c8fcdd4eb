// The routing-table flags of proxyFlags() (src/cli/flags.ts): --config, repeatable --context, --direct.
import { Flags } from '@oclif/core';
import type { TableFlags } from './load.js';

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
      summary: 'PEM bundle trusted for the API server connections besides the kubeconfig CA (a TLS-intercepting corporate proxy). Config key: extraCA.',
      helpValue: '<file>',
    }),
    direct: Flags.boolean({ summary: 'Dial destinations no route claims from this machine instead of refusing them (--no-direct: refuse).', allowNo: true }),
  };
}

/** Parsed flag values → TableFlags (currentContext from the kubeconfig, for when no route names a cluster). */
export function tableFlagsFrom(flags: { config?: string; context?: string[]; direct?: boolean; 'cluster-domain': string; 'extra-ca'?: string }, currentContext?: string): TableFlags {
  return { config: flags.config, contexts: flags.context ?? [], direct: flags.direct, clusterDomain: flags['cluster-domain'], currentContext, extraCA: flags['extra-ca'] };
}
