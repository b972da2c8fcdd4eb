// Text that came from a client (Host headers, names, URLs) may hold terminal control sequences:
// ESC and the other C0 controls, DEL, and the C1 controls U+0080–U+009F, of which U+009B is the
// 8-bit CSI that many terminals obey like "ESC [". Such text must not reach a terminal raw
// through a log line or an error body. Node decodes header bytes as Latin-1, so any byte
// 0x80–0x9F a client sends (valid UTF-8 or not) arrives as one of these C1 code points.

/** C0, DEL, C1, and UTF-16 surrogates that are not part of a pair (they have no UTF-8 form). */
const CONTROLS = /[\u0000-\u001f\u007f-\u009f]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

const hex = (code: number, width: number): string => code.toString(16).padStart(width, '0');

/** `text` with every control character written as a visible escape (`\x1b`, `\x9b`, `\ud800`). */
export function escapeControls(text: string): string {
  return text.replace(CONTROLS, (c) => {
    const code = c.charCodeAt(0);
    return code <= 0xff ? `\\x${hex(code, 2)}` : `\\u${hex(code, 4)}`;
  });
}

/** `text` escaped as by `escapeControls`, its line ends kept: for output of several lines. */
export function escapeControlsKeepingLines(text: string): string {
  return text.split('\n').map(escapeControls).join('\n');
}

/**
 * A word a POSIX shell reads as the text itself: bare when it has nothing special, else
 * single-quoted (double quotes would still run a `$(…)` in a name the kubeconfig chose).
 */
export const shellQuote = (s: string): string => (/^[A-Za-z0-9_./:@%+=,-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);

/**
 * A serialized JSON line with DEL and the C1 controls written as `\u00XX` escapes. JSON already
 * escapes C0 controls and lone surrogates but leaves these raw; the escaped line parses to the
 * same values, so nothing is lost, and it can be printed to a terminal as it is.
 */
export function escapeJsonControls(line: string): string {
  return line.replace(/[\u007f-\u009f]/g, (c) => `\\u${hex(c.charCodeAt(0), 4)}`);
}
