/**
 * What the request pipeline knows of one operation of the contract, read once at start-up
 * (contract.ts `readOperation`). A module of its own below contract.ts, so that the router and the
 * validation, which contract.ts builds, can name it without importing what builds them.
 */
import type { Operation } from 'openapi-backend';
import type { TokenScope } from '../policies/project.js';

export interface ContractOperation {
  operationId: string;
  method: string;
  path: string;
  operation: Operation;
  /**
   * Anonymous callers allowed (an empty requirement `{}` in the operation's `security`): the route
   * checks credentials itself, if at all.
   */
  isPublic: boolean;
  /** `x-session-only`: an API token is refused with 403 `session_required`. */
  sessionOnly: boolean;
  /**
   * `x-scope`: what an API token needs to call it (policies/project.ts `permitScope`). An operation
   * an API token may call but the contract does not mark needs `all`: a new route stays closed to
   * narrowed tokens until spec/scopes.tsp lists it (the contract test fails meanwhile).
   */
  scope: TokenScope;
  /** Its path names a project (`{namespace}`), whose reach a token limited to projects is checked for (domain/access.ts). */
  namesProject: boolean;
  /** `x-cors`: answers CORS to the allowed origins (http/security.ts); no other operation does. */
  cors: boolean;
  hasBody: boolean;
  /** `x-raw-body`: the handler reads the body's bytes itself; the pipeline neither reads nor parses them. */
  rawBody: boolean;
  /** Request headers the operation declares (e.g. `Last-Event-ID`). */
  headerNames: string[];
  /** Query parameters that are lists (`tag=a&tag=b`): one given once is still a list of one. */
  listQuery: string[];
  /** Declares `Idempotency-Key`: a write the pipeline makes safe to retry (http/idempotency.ts). */
  takesIdempotencyKey: boolean;
  /**
   * `x-secret` (spec/secrets.tsp): where its success answers hold a secret shown once, each a path
   * of property names from the body's root (`*` for every item of a list). An answer recorded for
   * an `Idempotency-Key` is recorded without them (http/idempotency.ts).
   */
  secretFields: string[][];
  /** `x-logsnag`: a LogSnag compatibility route, whose 400s also carry LogSnag's `validation` (envelope.ts). */
  logsnag: boolean;
}
