// Node writes process warnings to stderr in a shape of its own — "(node:PID) [DEP0123]
// DeprecationWarning: …" — which is not a log line: a JSON-lines consumer (a log shipper, the
// daemon's log file, `logs ID`) gets a line it cannot parse, and a user a message about a
// dependency they can do nothing about. (@grpc/grpc-js sets TLS servername to the konnectivity
// server's IP when it is dialled by address: DEP0123.) Warnings go into the log instead, each once:
// deprecations at debug, anything else (a MaxListenersExceededWarning is a leak) as a warning.
import type { Logger } from './log.js';

export function logProcessWarnings(log: Logger, proc: NodeJS.Process = process): void {
  // Node's own writer is a 'warning' listener (lib/internal/process/warning.js onWarning).
  proc.removeAllListeners('warning');
  const seen = new Set<string>();
  proc.on('warning', (warning: Error & { code?: string }) => {
    const key = `${warning.name} ${warning.code ?? warning.message}`;
    if (seen.has(key)) return;
    seen.add(key);
    const fields = { warning: warning.name, ...(warning.code ? { code: warning.code } : {}) };
    if (warning.name === 'DeprecationWarning') log.debug(fields, warning.message);
    else log.warn(fields, warning.message);
  });
}
