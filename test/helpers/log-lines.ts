// Checks on the proxy's JSON log lines that JSON.parse cannot make: a key written twice in one
// object (pino writes a child logger's bindings and the call's fields side by side, so a field the
// logger is already bound with appears twice). JSON.parse keeps the last silently; log shippers
// differ (Elasticsearch refuses the document: "Duplicate field").

/** The keys that appear more than once in one object of a JSON text, nested objects included. */
export function duplicateKeys(json: string): string[] {
  const stack: Array<Set<string> | undefined> = [];
  const dups: string[] = [];
  let i = 0;
  while (i < json.length) {
    const c = json[i]!;
    if (c === '"') {
      let j = i + 1;
      while (j < json.length && json[j] !== '"') j += json[j] === '\\' ? 2 : 1;
      const text = json.slice(i, j + 1);
      i = j + 1;
      while (json[i] === ' ') i++;
      const keys = stack[stack.length - 1];
      if (json[i] === ':' && keys) {
        const key = JSON.parse(text) as string;
        if (keys.has(key)) dups.push(key);
        keys.add(key);
      }
      continue;
    }
    if (c === '{') stack.push(new Set());
    else if (c === '[') stack.push(undefined);
    else if (c === '}' || c === ']') stack.pop();
    i++;
  }
  return dups;
}
