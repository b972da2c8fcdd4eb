// What `doctor` found: one check per line, grouped by route (or "local"), each failure with its fix.
import { escapeControls } from '../core/escape.js';

export type CheckStatus = 'ok' | 'warn' | 'fail' | 'skip';

export interface Check {
  /** The cluster route it is about, or "local". */
  scope: string;
  /** Short name: kubeconfig, api-server, port-forward, rbac, listen, state-dir, daemon. */
  name: string;
  status: CheckStatus;
  /** What was found, one line. */
  detail: string;
  /** What to do about it (warnings and failures). */
  fix?: string;
}

/** Exit status: non-zero exactly when any check failed. */
export function exitCodeOf(checks: readonly Check[]): number {
  return checks.some((c) => c.status === 'fail') ? 1 : 0;
}

const MARK: Record<CheckStatus, string> = { ok: 'ok  ', warn: 'WARN', fail: 'FAIL', skip: 'skip' };

/** Human lines: "[route] FAIL rbac: …" then an indented "fix: …". Everything escaped for the terminal. */
export function renderChecks(checks: readonly Check[]): string {
  const lines: string[] = [];
  let scope: string | undefined;
  for (const c of checks) {
    if (c.scope !== scope) {
      scope = c.scope;
      lines.push(scope === 'local' ? 'local:' : `route ${escapeControls(scope)}:`);
    }
    lines.push(`  ${MARK[c.status]} ${c.name}: ${escapeControls(c.detail)}`);
    if (c.fix && c.status !== 'ok') lines.push(`       fix: ${escapeControls(c.fix)}`);
  }
  const failed = checks.filter((c) => c.status === 'fail').length;
  const warned = checks.filter((c) => c.status === 'warn').length;
  lines.push(failed > 0 ? `${failed} check(s) failed${warned ? `, ${warned} warning(s)` : ''}` : `all checks passed${warned ? ` (${warned} warning(s))` : ''}`);
  return lines.join('\n');
}
