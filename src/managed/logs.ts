// `logs`: a daemon's JSON log lines, as they are (--json) or one readable line each:
//   2025-11-26 14:03:07.412 INFO  stream closed target=web.shop:8080 via=shop/web-7d9 bytesFromClient=78 …
// Lines that are not JSON (a crash trace on the daemon's stderr) are shown unchanged. Following
// survives rotation: a file moved away is read to its end before the new one; a file emptied in
// place (the daemon's own rotation, logrotate's copytruncate) has the rest read from its copy,
// FILE.1, when that copy holds what was read so far.
import { closeSync, fstatSync, openSync, readSync, statSync } from 'node:fs';
import { escapeControls, escapeJsonControls } from '../core/escape.js';

const LEVELS: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
/** Fields every line has, or that say nothing in a per-proxy log. */
const OMIT = new Set(['level', 'time', 'msg', 'pid', 'hostname', 'id']);
const CHUNK = 1 << 16;
const TAIL_BYTES = 64;

/**
 * One readable line; no control character of the log (client text included) reaches the terminal.
 * withPid: keep the `pid` field, which tells apart the processes that share one log (`logs exec`).
 */
export function formatLogLine(line: string, withPid = false): string {
  return escapeControls(formatFields(line, withPid));
}

/** The line as it is (`logs --json`), with any raw control character escaped (lossless for JSON). */
export function rawLogLine(line: string): string {
  return escapeControls(escapeJsonControls(line));
}

function formatFields(line: string, withPid: boolean): string {
  let obj: Record<string, unknown>;
  try {
    const parsed = JSON.parse(line) as unknown;
    if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) return line;
    obj = parsed as Record<string, unknown>;
  } catch {
    return line;
  }
  const time = typeof obj.time === 'number' ? localTime(new Date(obj.time)) : '-';
  const level = (typeof obj.level === 'number' ? (LEVELS[obj.level] ?? String(obj.level)) : String(obj.level ?? '-')).padEnd(5);
  const fields = Object.entries(obj)
    .filter(([k, v]) => (!OMIT.has(k) || (withPid && k === 'pid')) && v !== undefined)
    .map(([k, v]) => `${k}=${formatValue(v)}`);
  return [time, level, String(obj.msg ?? ''), ...fields].filter((p) => p !== '').join(' ');
}

function formatValue(v: unknown): string {
  if (typeof v === 'string') return /^[^\s"=]+$/.test(v) ? v : JSON.stringify(v);
  if (typeof v === 'object' && v !== null) return JSON.stringify(v);
  return String(v);
}

function localTime(d: Date): string {
  const p = (n: number, w = 2) => String(n).padStart(w, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`;
}

/**
 * What `connect` says of a proxy that stopped while it started: the daemon's last error line since
 * `sinceMs` (of process `pid`, when known), when it logged one: one that cannot write its state (a
 * full disk) says why only there.
 */
export function stoppedWhileStarting(file: string, id: string, sinceMs: number, pid: number | undefined): string {
  let text = '';
  try {
    const fd = openSync(file, 'r');
    try {
      const size = fstatSync(fd).size;
      const buf = Buffer.alloc(Math.min(size, CHUNK));
      text = buf.subarray(0, readSync(fd, buf, 0, buf.length, size - buf.length)).toString('utf8');
    } finally {
      closeSync(fd);
    }
  } catch {
    // No log to read: where to look is all there is to say.
  }
  for (const line of text.split('\n').reverse()) {
    let o: { level?: unknown; time?: unknown; msg?: unknown; error?: unknown; pid?: unknown };
    try {
      o = JSON.parse(line) as typeof o;
    } catch {
      continue;
    }
    if (typeof o?.level !== 'number' || o.level < 50 || typeof o.time !== 'number' || o.time < sinceMs) continue;
    if (pid !== undefined && o.pid !== pid) continue;
    const why = `${String(o.msg ?? '')}${typeof o.error === 'string' ? ` (${o.error})` : ''}`;
    return escapeControls(`proxy ${id} stopped while it started: ${why}`);
  }
  return `proxy ${id} was stopped while it started; see \`kubectl proxyout logs ${id}\``;
}

/** Reads a growing file line by line from where it last stopped. */
export class LogReader {
  private fd?: number;
  private ino?: number;
  private pos = 0;
  private partial = '';
  /** The last bytes read (up to TAIL_BYTES), to recognise them in the copy of a file emptied in place. */
  private tail = Buffer.alloc(0);

  constructor(private readonly file: string) {}

  /** Complete lines added since the last call (all of them the first time). */
  readLines(): string[] {
    this.reopenIfRotated();
    if (this.fd === undefined) return [];
    const size = fstatSync(this.fd).size;
    let lines: string[] = [];
    if (size < this.pos || !this.stillOurs(this.fd)) {
      // Emptied in place (and perhaps grown again past where we were): the rest from the copy,
      // then this file from its start.
      lines = this.restOfCopy().concat(this.rest());
      this.pos = 0;
      this.tail = Buffer.alloc(0);
    }
    // concat, not push(...): a whole file's lines as arguments overflow the stack (~125k lines).
    return lines.concat(this.readFrom(this.fd, size));
  }

  /** Lines of fd from pos up to `size`, the incomplete last one kept in partial. */
  private readFrom(fd: number, size: number): string[] {
    const lines: string[] = [];
    const buf = Buffer.alloc(CHUNK);
    while (this.pos < size) {
      const n = readSync(fd, buf, 0, Math.min(CHUNK, size - this.pos), this.pos);
      if (n <= 0) break;
      this.pos += n;
      const got = buf.subarray(0, n);
      this.tail = Buffer.concat([this.tail, got.subarray(Math.max(0, n - TAIL_BYTES))]).subarray(-TAIL_BYTES);
      const parts = (this.partial + got.toString('utf8')).split('\n');
      this.partial = parts.pop() ?? '';
      for (const part of parts) lines.push(part);
    }
    return lines;
  }

  /** Whether fd still has the bytes we last read where we read them. */
  private stillOurs(fd: number): boolean {
    if (this.tail.length === 0) return true;
    const check = Buffer.alloc(this.tail.length);
    return readSync(fd, check, 0, check.length, this.pos - this.tail.length) === check.length && check.equals(this.tail);
  }

  /** What FILE.1 has past our position, when it is the copy of what we read (its bytes there are ours). */
  private restOfCopy(): string[] {
    let fd: number;
    try {
      fd = openSync(`${this.file}.1`, 'r');
    } catch {
      return [];
    }
    try {
      const size = fstatSync(fd).size;
      return size >= this.pos && this.stillOurs(fd) ? this.readFrom(fd, size) : [];
    } finally {
      closeSync(fd);
    }
  }

  /** What is left without a final newline (the daemon is gone, nothing will complete it). */
  rest(): string[] {
    const rest = this.partial;
    this.partial = '';
    return rest === '' ? [] : [rest];
  }

  close(): void {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }

  private reopenIfRotated(): void {
    let ino: number;
    try {
      ino = statSync(this.file).ino;
    } catch {
      return; // moved away and not recreated yet: keep reading the old one
    }
    if (this.fd !== undefined && ino === this.ino) return;
    if (this.fd !== undefined) {
      // Rotated: finish the old file first, the next call switches.
      const before = this.pos;
      if (fstatSync(this.fd).size > before) return;
      this.close();
    }
    this.fd = openSync(this.file, 'r');
    this.ino = ino;
    this.pos = 0;
    this.partial = '';
    this.tail = Buffer.alloc(0);
  }
}

/**
 * Emits the whole log, then (follow) new lines as they come, until isDone() says the daemon is
 * gone or stop() is called.
 */
export async function streamLog(
  file: string,
  emit: (line: string) => void,
  opts: { follow: boolean; isDone: () => Promise<boolean>; pollMs?: number; signal?: AbortSignal },
): Promise<void> {
  const reader = new LogReader(file);
  try {
    for (const line of reader.readLines()) emit(line);
    if (!opts.follow) {
      for (const line of reader.rest()) emit(line);
      return;
    }
    let checked = Date.now();
    while (!opts.signal?.aborted) {
      await new Promise((r) => setTimeout(r, opts.pollMs ?? 200));
      for (const line of reader.readLines()) emit(line);
      if (Date.now() - checked >= 1_000) {
        checked = Date.now();
        if (await opts.isDone()) {
          for (const line of [...reader.readLines(), ...reader.rest()]) emit(line);
          return;
        }
      }
    }
  } finally {
    reader.close();
  }
}
