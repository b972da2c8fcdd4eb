// The shape of every `--json` output: one object with apiVersion and kind, as kubectl's `-o json`
// objects have, whatever the arguments. A list is always a List (`status ID` is a list of one).
// A change that is not purely additive gets a new apiVersion.
export const API_VERSION = 'kubectl-proxyout/v1';

export type JsonKind = 'ConnectResult' | 'DoctorReport' | 'ProxyStatusList';

export function jsonObject<T extends object>(kind: JsonKind, body: T): { apiVersion: string; kind: JsonKind } & T {
  return { apiVersion: API_VERSION, kind, ...body };
}

export function jsonList<T>(kind: JsonKind, items: readonly T[]): { apiVersion: string; kind: JsonKind; items: readonly T[] } {
  return { apiVersion: API_VERSION, kind, items };
}

export function printJson(value: unknown): string {
  return JSON.stringify(value, null, 2);
}
