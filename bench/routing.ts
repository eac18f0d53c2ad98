/**
 * Routing and validation cost per request, with the full contract and with a contract of one route,
 * measured in-process on the same request (no network, no database): the service's own routing
 * (`Contract.match` over its precompiled table) plus openapi-backend's request validation, and, for
 * comparison, openapi-backend's own router (`matchOperation`), which the service no longer uses.
 */
import type { Document } from 'openapi-backend';
import { Contract, contractDocument } from '../server/src/http/contract.js';

interface Case {
  name: string;
  method: string;
  path: string;
  openapiPath: string;
  body?: unknown;
  headers: Record<string, string>;
}

const CASES: Case[] = [
  {
    name: 'GET /v1/projects/{namespace}',
    method: 'GET',
    path: '/v1/projects/bench-000',
    openapiPath: '/v1/projects/{namespace}',
    headers: { authorization: 'Bearer x' },
  },
  {
    name: 'PATCH /v1/projects/{namespace}',
    method: 'PATCH',
    path: '/v1/projects/bench-000',
    openapiPath: '/v1/projects/{namespace}',
    body: { name: 'Renamed project' },
    headers: { authorization: 'Bearer x', 'content-type': 'application/json' },
  },
  {
    name: 'GET /v1/projects/{namespace}/activity',
    method: 'GET',
    path: '/v1/projects/bench-000/activity',
    openapiPath: '/v1/projects/{namespace}/activity',
    headers: { authorization: 'Bearer x' },
  },
];

function oneRoute(full: Document, path: string, method: string): Document {
  const item = (full.paths as Record<string, Record<string, unknown>>)[path]!;
  return { ...full, paths: { [path]: { [method.toLowerCase()]: item[method.toLowerCase()] } } };
}

/**
 * Microseconds per call of each function: rounds alternate between them (so a burst of load from
 * elsewhere on the machine hits both alike), and each keeps its fastest round, the one least
 * disturbed by anything but its own work.
 */
function timeEach(fns: (() => void)[], iterations: number, rounds = 11): number[] {
  for (const fn of fns) for (let i = 0; i < Math.min(2_000, iterations); i++) fn();
  const best = fns.map(() => Infinity);
  for (let r = 0; r < rounds; r++) {
    fns.forEach((fn, k) => {
      const started = process.hrtime.bigint();
      for (let i = 0; i < iterations; i++) fn();
      best[k] = Math.min(best[k]!, Number(process.hrtime.bigint() - started) / 1e3 / iterations);
    });
  }
  return best.map((us) => Math.round(us * 100) / 100);
}

export interface RoutingResult {
  case: string;
  routes: { full: number; one: number };
  /** The service's routing + validation, µs per request. */
  serviceFull: number;
  serviceOne: number;
  ratio: number;
  /** openapi-backend's own `router.matchOperation`, µs per request (what the service avoids). */
  openapiBackendMatchFull: number;
  openapiBackendMatchOne: number;
}

export async function measureRouting(iterations = 20_000): Promise<RoutingResult[]> {
  const full = structuredClone(contractDocument);
  const fullContract = await Contract.load(full);
  const results: RoutingResult[] = [];
  for (const c of CASES) {
    const one = await Contract.load(oneRoute(full, c.openapiPath, c.method));
    const run = (contract: Contract) => () => {
      const { op, params } = contract.match(c.method, c.path);
      const checked = contract.validate(op, { headers: c.headers, query: {}, body: c.body }, params);
      if (!checked.ok) throw new Error(`${c.name}: ${JSON.stringify(checked.details)}`);
    };
    const backendMatch = (contract: Contract) => {
      const router = contract.backend.router;
      return () => {
        if (!router.matchOperation({ method: c.method, path: c.path, headers: c.headers })) throw new Error('no match');
      };
    };
    const [serviceFull, serviceOne] = timeEach([run(fullContract), run(one)], iterations) as [number, number];
    const [matchFull, matchOne] = timeEach([backendMatch(fullContract), backendMatch(one)], Math.floor(iterations / 10)) as [
      number,
      number,
    ];
    results.push({
      case: c.name,
      routes: { full: fullContract.operations.length, one: one.operations.length },
      serviceFull,
      serviceOne,
      ratio: Math.round((serviceFull / serviceOne) * 100) / 100,
      openapiBackendMatchFull: matchFull,
      openapiBackendMatchOne: matchOne,
    });
  }
  return results;
}
