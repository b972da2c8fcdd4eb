// What an API server's error answer says, in a line: a Status object's message (cut to a bound), a
// health check's failed checks, a front's HTML page; and its Retry-After.
import { htmlPageMessage } from './foreign-answer.js';

/** Retry-After as whole seconds (the API server sends seconds, never a date); undefined otherwise. */
export function retryAfterSeconds(header: string | string[] | undefined): number | undefined {
  return typeof header === 'string' && /^\d{1,6}$/.test(header.trim()) ? Number(header.trim()) : undefined;
}

/**
 * How much of a Status message is kept: admission webhooks' denials run to several hundred
 * characters; a server's megabyte would flood doctor, status, the log and error bodies.
 */
const STATUS_MESSAGE_MAX = 1000;

/** The message of a Kubernetes Status object, if the text is one; else its first line. */
export function statusMessage(text: string): string | undefined {
  const html = htmlPageMessage(text);
  if (html) return html;
  try {
    const obj = JSON.parse(text) as { kind?: string; message?: string };
    if (obj && obj.kind === 'Status' && typeof obj.message === 'string')
      return obj.message.length > STATUS_MESSAGE_MAX ? `${obj.message.slice(0, STATUS_MESSAGE_MAX)}…` : obj.message;
  } catch {
    const cut = cutStatusMessage(text);
    if (cut !== undefined) return cut;
  }
  const lines = text.trim().split('\n');
  return healthFailure(lines) ?? (lines[0] ? lines[0].slice(0, 300) : undefined);
}

/** The message of a Status cut short (getJson reads only the start of an error), marked as cut. */
function cutStatusMessage(text: string): string | undefined {
  if (!/"kind"\s*:\s*"Status"/.test(text)) return undefined;
  const m = /"message"\s*:\s*"((?:[^"\\]|\\.)*)(")?/s.exec(text);
  if (!m) return undefined;
  let message = m[1]!.replace(/\\(u[0-9a-fA-F]{0,3})?$/, '');
  try {
    message = JSON.parse(`"${message}"`) as string;
  } catch {
    /* kept as written */
  }
  return message.length > STATUS_MESSAGE_MAX || !m[2] ? `${message.slice(0, STATUS_MESSAGE_MAX)}…` : message;
}

/**
 * A failed /readyz or /livez lists every check, passing ones first (`[+]ping ok`), and ends with
 * `readyz check failed`: the checks marked `[-]` are the reason, not the first line.
 */
function healthFailure(lines: string[]): string | undefined {
  const failed = lines.flatMap((l) => /^\[-\](\S+) failed/.exec(l)?.[1] ?? []);
  if (failed.length === 0) return undefined;
  const last = lines[lines.length - 1]!.trim();
  const more = failed.length > 3 ? ` and ${failed.length - 3} more` : '';
  return `${/check failed$/.test(last) ? last : 'checks failed'}: ${failed.slice(0, 3).join(', ')}${more}`;
}
