// YAML with line numbers for every key and list item, so a config error can say where it is.
//
// js-yaml (already our kubeconfig parser) builds plain objects and keeps no positions, but its
// `listener` load option (typed in @types/js-yaml as LoadOptions.listener) reports every node it
// opens and closes with the parser state. Nesting those events gives a tree in document order:
// a mapping's children are key, value, key, value…; a sequence's are its items. That is all we
// need; the `yaml` package's document API would give the same with a second YAML parser in the
// dependencies, for one feature.
import yaml from 'js-yaml';

interface Frame {
  /** 0-based line where the node starts. */
  line: number;
  /** Where the node starts and ends in the text. */
  position: number;
  end: number;
  result: unknown;
  children: Frame[];
}

export interface Located {
  /** The parsed document (plain objects, arrays and scalars; YAML 1.2 core schema). */
  value: unknown;
  /** 1-based line of a mapping's key, or of the mapping itself when the key is absent or merged. */
  keyLine(mapping: object, key: string): number;
  /** 1-based line of a sequence item. */
  itemLine(sequence: unknown[], index: number): number;
  /** 1-based line where a mapping or sequence starts. */
  lineOf(node: object): number;
}

export class YamlSyntaxError extends Error {
  constructor(
    message: string,
    readonly line: number,
  ) {
    super(message);
    this.name = 'YamlSyntaxError';
  }
}

// js-yaml's own merge type (exported as yaml.types, which @types/js-yaml leaves out).
const MERGE = (yaml as unknown as { types: { merge: yaml.Type } }).types.merge;
const SCHEMA = yaml.CORE_SCHEMA.extend({ implicit: [MERGE] });

export function loadYamlWithLines(text: string): Located {
  // Positions are in the text js-yaml reads: without a byte-order mark.
  const source = text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
  const stack: Frame[] = [{ line: 0, position: 0, end: 0, result: undefined, children: [] }];
  let value: unknown;
  try {
    value = yaml.load(text, {
      // Core schema: booleans, numbers, null and strings only; no timestamps or binary. Plus merge
      // keys (`<<: *common`), which kubectl's YAML reader takes too: without them a shared part is
      // a key "<<" and the route seems to lack what it merged.
      schema: SCHEMA,
      listener(event, state) {
        if (event === 'open') stack.push({ line: state.line, position: state.position, end: state.position, result: undefined, children: [] });
        else {
          const frame = stack.pop()!;
          frame.result = state.result;
          frame.end = state.position;
          stack[stack.length - 1]!.children.push(frame);
        }
      },
    });
  } catch (err) {
    if (err instanceof yaml.YAMLException) {
      throw new YamlSyntaxError(err.reason || err.message, (err.mark?.line ?? 0) + 1);
    }
    throw err;
  }

  const nodeLine = new WeakMap<object, number>();
  const keyLines = new WeakMap<object, Map<string, number>>();
  const itemLines = new WeakMap<object, number[]>();
  const visit = (frame: Frame) => {
    const r = frame.result;
    if (r !== null && typeof r === 'object' && !nodeLine.has(r)) {
      nodeLine.set(r, frame.line + 1);
      if (Array.isArray(r))
        itemLines.set(
          r,
          sequenceLines(source, r, frame).map((l) => l + 1),
        );
      else {
        const keys = new Map<string, number>();
        for (let i = 0; i + 1 < frame.children.length; i += 2) keys.set(String(frame.children[i]!.result), frame.children[i]!.line + 1);
        keyLines.set(r, keys);
      }
    }
    frame.children.forEach(visit);
  };
  stack[0]!.children.forEach(visit);

  const lineOf = (node: object) => nodeLine.get(node) ?? 1;
  return {
    value,
    lineOf,
    keyLine: (mapping, key) => keyLines.get(mapping)?.get(key) ?? lineOf(mapping),
    itemLine: (sequence, index) => itemLines.get(sequence)?.[index] ?? lineOf(sequence),
  };
}

/**
 * The 0-based line of each item of a block sequence. An empty item (a `-` alone) reports no node
 * to the listener: without this it took the next item's line, and every later item the one after.
 */
function sequenceLines(text: string, items: unknown[], frame: Frame): number[] {
  const children = frame.children;
  if (children.length === items.length) return children.map((c) => c.line);
  let missing = items.length - children.length;
  // Which items have a node: an empty item is a null with no node of its own.
  const nodes: Array<Frame | undefined> = [];
  for (let i = 0, j = 0; i < items.length; i++) {
    const c = children[j];
    if (items[i] === null && missing > 0 && (c === undefined || c.result !== null)) {
      nodes.push(undefined);
      missing--;
    } else nodes.push(children[j++]);
  }
  // Backwards: an empty item's `-` is the last line with content before the next item's `-`.
  const lines: number[] = new Array(items.length);
  let following = frame.end;
  for (let i = items.length - 1; i >= 0; i--) {
    const node = nodes[i];
    if (node) {
      lines[i] = node.line;
      // The item's `-` is on its first line, or (a mapping starting on the next line) above it.
      const lineStart = text.lastIndexOf('\n', node.position - 1) + 1;
      following = text.slice(lineStart, node.position).trim() !== '' ? lineStart : lineStartOf(text, contentLineBefore(text, lineStart));
    } else {
      lines[i] = contentLineBefore(text, following);
      following = lineStartOf(text, lines[i]!);
    }
  }
  return lines;
}

/** The 0-based line of the last character before `position` that is neither blank nor in a comment line. */
function contentLineBefore(text: string, position: number): number {
  const lines = text.slice(0, position).split('\n');
  for (let i = lines.length - 1; i >= 0; i--) {
    const content = lines[i]!.trim();
    if (content !== '' && !content.startsWith('#')) return i;
  }
  return 0;
}

/** Where 0-based line `line` starts. */
function lineStartOf(text: string, line: number): number {
  let at = 0;
  for (let i = 0; i < line; i++) at = text.indexOf('\n', at) + 1;
  return at;
}
