/**
 * Case builders for what every route of a kind must do: 401 to a credential that is no credential,
 * 415 to a body that is not JSON, 413 to a body over 1 MiB, 400 to a page size out of range, 403 to
 * an API token on a session-only route.
 */
import { randomToken, unknownUuid, type CaseContext, type CaseDef } from '../case.js';
import type { Operation } from '../contract.js';
import type { Request } from '../http.js';

/** A path built when the case runs (it needs namespaces and ids earlier cases made). */
export type PathOf = (t: CaseContext) => string;

/**
 * A case of one request whose answer must have the status, and the error code, that `expect` names
 * (`'404 not_found'`, `'204'`); an invalid_request must also list its details.
 */
export function oneRequest(group: string, op: string, expect: string, title: string, request: (t: CaseContext) => Request): CaseDef {
  const [status, code] = expect.split(' ');
  return {
    group,
    op,
    expect,
    title,
    run: async (t) => {
      const exchange = await t.send(request(t));
      t.expect(exchange, Number(status), code);
      if (code === 'invalid_request') expectDetails(t, exchange.json);
    },
  };
}

/**
 * The operation's path with `namespace` in it and a value that passes the contract for every other
 * parameter; `known` names existing ids where the caller needs them (a webhook endpoint's).
 */
export function concretePath(op: Operation, namespace: string, known: Record<string, string | undefined> = {}): string {
  const values: Record<string, string> = {
    namespace,
    feed: 'general',
    username: 'conformance',
    insight_id: unknownUuid(),
    id: unknownUuid(),
    webhook_id: known.webhook_id ?? unknownUuid(),
    delivery_id: known.delivery_id ?? unknownUuid(),
  };
  return op.path.replace(/\{([^}]+)\}/g, (_, name: string) => values[name] ?? 'conformance');
}

/** 1 MiB and a bit: past the documented body limit. */
export function oversizedBody(): string {
  return `{"conformance":"${'x'.repeat(1024 * 1024 + 16)}"}`;
}

export function unauthenticated(group: string, op: string, path: PathOf, options: { method?: string; json?: unknown } = {}): CaseDef {
  const method = options.method ?? op.split(' ')[0]!;
  return {
    group,
    op,
    expect: '401 unauthenticated',
    title: 'a token no one was given is refused, with a Bearer challenge',
    run: async (t) => {
      const exchange = await t.send({
        method,
        path: path(t),
        token: randomToken(),
        ...(options.json !== undefined ? { json: options.json } : {}),
      });
      t.expect(exchange, 401, 'unauthenticated');
      t.check(exchange.headers.get('www-authenticate') !== null, 'a 401 carries WWW-Authenticate', exchange);
    },
  };
}

export function unsupportedMediaType(group: string, op: string, path: PathOf, token: (t: CaseContext) => string | undefined): CaseDef {
  return {
    group,
    op,
    expect: '415 unsupported_media_type',
    title: 'a body that is not application/json is refused',
    run: async (t) => {
      const exchange = await t.send({
        method: op.split(' ')[0]!,
        path: path(t),
        token: token(t),
        raw: { body: 'conformance=1', contentType: 'application/x-www-form-urlencoded' },
      });
      t.expect(exchange, 415, 'unsupported_media_type');
    },
  };
}

export function payloadTooLarge(group: string, op: string, path: PathOf, token: (t: CaseContext) => string | undefined): CaseDef {
  return {
    group,
    op,
    expect: '413 payload_too_large',
    title: 'a body over 1 MiB is refused',
    run: async (t) => {
      const exchange = await t.send({
        method: op.split(' ')[0]!,
        path: path(t),
        token: token(t),
        raw: { body: oversizedBody(), contentType: 'application/json' },
      });
      t.expect(exchange, 413, 'payload_too_large');
    },
  };
}

export function badPageSize(group: string, op: string, path: PathOf, token: (t: CaseContext) => string | undefined, limit = 0): CaseDef {
  return {
    group,
    op,
    expect: '400 invalid_request',
    title: `a page size of ${limit} (outside 1–100) is refused, with details`,
    run: async (t) => {
      const base = path(t);
      const exchange = await t.send({ method: 'GET', path: `${base}${base.includes('?') ? '&' : '?'}limit=${limit}`, token: token(t) });
      t.expect(exchange, 400, 'invalid_request');
      expectDetails(t, exchange.json);
    },
  };
}

export function sessionRequired(group: string, op: string, path: PathOf, options: { json?: unknown } = {}): CaseDef {
  return {
    group,
    op,
    expect: '403 session_required',
    title: 'an API token is refused on this session-only route',
    run: async (t) => {
      const token = t.need(t.state.apiToken, 'an API token').token;
      const exchange = await t.send({
        method: op.split(' ')[0]!,
        path: path(t),
        token,
        ...(options.json !== undefined ? { json: options.json } : {}),
      });
      t.expect(exchange, 403, 'session_required');
    },
  };
}

/** `invalid_request` answers list what was wrong: `details` with a JSON pointer and a message each. */
export function expectDetails(t: CaseContext, body: any): void {
  const details = body?.error?.details;
  t.check(
    Array.isArray(details) && details.length > 0,
    `an invalid_request answer lists details (got ${JSON.stringify(body?.error ?? body).slice(0, 200)})`,
  );
}

export function sessionOf(who: 'a' | 'b'): (t: CaseContext) => string {
  return (t) => t.need(t.state[who].session, `a session of user ${who.toUpperCase()}`);
}

export const ns = (t: CaseContext, which: 'p1' | 'p2' = 'p1'): string => t.need(t.state[which], `project ${which.toUpperCase()}`);

export function newestFirst(t: CaseContext, items: { created_at: string }[], what: string): void {
  for (let i = 1; i < items.length; i++) {
    t.check(Date.parse(items[i - 1]!.created_at) >= Date.parse(items[i]!.created_at), `${what} are newest first`);
  }
}
