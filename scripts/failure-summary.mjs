// A node:test reporter (https://nodejs.org/api/test.html#custom-reporters) that writes only the
// failed tests: scripts/test.mjs prints them after the TAP stream, so a log's tail names them.
// Parents failing because a subtest failed, and failing `todo` tests, are left out.

const MAX_ERROR_LINES = 25;

function errorText(error) {
  const cause = error?.cause ?? error;
  const text = cause instanceof Error ? (cause.stack ?? cause.message) : String(cause);
  // Node's own frames say nothing about the failure; the test's frames stay.
  const lines = text.split('\n').filter((line) => !/\(?node:(internal|async_hooks)/.test(line));
  return lines.length > MAX_ERROR_LINES ? [...lines.slice(0, MAX_ERROR_LINES), `… (${lines.length - MAX_ERROR_LINES} more lines)`] : lines;
}

export default async function* failureSummary(source) {
  const ancestors = [];
  for await (const event of source) {
    if (event.type === 'test:start') ancestors[event.data.nesting] = event.data.name;
    if (event.type !== 'test:fail') continue;
    const { data } = event;
    if (data.todo !== undefined && data.todo !== false) continue;
    if (data.details?.error?.failureType === 'subtestsFailed') continue;
    const path = [...ancestors.slice(0, data.nesting), data.name].join(' › ');
    const where = data.file ? `${data.file}${data.line ? `:${data.line}` : ''}` : '(unknown file)';
    yield `not ok: ${path}\n  at ${where}\n${errorText(data.details?.error)
      .map((line) => `  | ${line}`)
      .join('\n')}\n\n`;
  }
}
