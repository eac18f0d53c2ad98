/** The service itself: greeting, contract, health; and what an unknown path or method answers. */
import { randomToken, type CaseDef } from '../case.js';
import { expectDetails, oneRequest } from './common.js';

const group = 'service';

export const serviceCases: CaseDef[] = [
  {
    group,
    op: 'GET /v1',
    expect: '200',
    title: 'greets a caller without a credential',
    run: async (t) => {
      const data = t.expect(await t.send({ method: 'GET', path: '/v1' }), 200);
      t.check(typeof data?.message === 'string' && data.message.length > 0, 'the greeting has a message');
    },
  },
  oneRequest(group, 'GET /v1', '200', 'ignores any Authorization header (here the Token scheme with a token no one was given)', () => ({
    method: 'GET',
    path: '/v1',
    authorization: `Token ${randomToken()}`,
  })),
  {
    group,
    op: 'GET /v1/openapi.json',
    expect: '200',
    title: 'serves this contract: the same operations and documented statuses as the suite reads',
    run: async (t) => {
      const exchange = await t.send({ method: 'GET', path: '/v1/openapi.json' });
      t.expect(exchange, 200);
      const served = exchange.json as
        { openapi?: unknown; paths?: Record<string, Record<string, { responses?: Record<string, unknown> }>> } | undefined;
      t.check(typeof served?.openapi === 'string' && served.openapi.startsWith('3.'), 'the document is OpenAPI 3', exchange);
      const triples = (paths: Record<string, Record<string, { responses?: Record<string, unknown> }>>) =>
        new Set(
          Object.entries(paths).flatMap(([path, item]) =>
            Object.entries(item)
              .filter(([, op]) => op && typeof op === 'object' && 'responses' in op)
              .flatMap(([method, op]) => Object.keys(op.responses ?? {}).map((status) => `${method.toUpperCase()} ${path} ${status}`)),
          ),
        );
      const theirs = triples(served?.paths ?? {});
      const ours = triples(t.contract.document.paths as never);
      const missing = [...ours].filter((x) => !theirs.has(x));
      const extra = [...theirs].filter((x) => !ours.has(x));
      t.check(
        missing.length === 0 && extra.length === 0,
        `the served contract differs from the one the suite judges by (${t.contract.title}): ${missing.length} (operation, status) ` +
          `missing${missing.length ? ` (e.g. ${missing.slice(0, 3).join('; ')})` : ''}, ${extra.length} ` +
          `extra${extra.length ? ` (e.g. ${extra.slice(0, 3).join('; ')})` : ''}`,
      );
    },
  },
  {
    group,
    op: 'GET /healthz',
    expect: '200',
    title: 'liveness answers ok',
    run: async (t) => {
      const data = t.expect(await t.send({ method: 'GET', path: '/healthz' }), 200);
      t.check(data?.status === 'ok', 'status is "ok"');
    },
  },
  {
    group,
    op: 'GET /readyz',
    expect: '200',
    title: 'readiness answers ok (the database answers)',
    run: async (t) => {
      const data = t.expect(await t.send({ method: 'GET', path: '/readyz' }), 200);
      t.check(data?.status === 'ok', 'status is "ok"');
    },
  },
  ...(['/v1', '/v1/openapi.json', '/healthz', '/readyz'] as const).map((path): CaseDef => ({
    group,
    op: `GET ${path}`,
    expect: '400 invalid_request',
    title: 'a query parameter the operation does not define is refused, with details',
    run: async (t) => {
      const exchange = await t.send({ method: 'GET', path: `${path}?conformance=1` });
      t.expect(exchange, 400, 'invalid_request');
      expectDetails(t, exchange.json);
    },
  })),
  {
    group,
    op: 'GET /v1/conformance-no-such-route',
    expect: '404 not_found',
    title: 'a path no operation has is 404 in the error envelope',
    offContract: true,
    run: async (t) => {
      t.expect(await t.send({ method: 'GET', path: `/v1/conformance-no-such-route-${t.state.tag}` }), 404, 'not_found');
    },
  },
  {
    group,
    op: 'DELETE /v1',
    expect: '405 method_not_allowed',
    title: 'a method the path does not have is 405 with Allow',
    offContract: true,
    run: async (t) => {
      const exchange = await t.send({ method: 'DELETE', path: '/v1' });
      t.expect(exchange, 405, 'method_not_allowed');
      t.check(/\bGET\b/.test(exchange.headers.get('allow') ?? ''), 'Allow names GET', exchange);
    },
  },
];
