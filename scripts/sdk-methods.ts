/**
 * The SDK's resource methods, generated from the contract: `npm run generate` writes
 * sdk/src/generated/operations.ts from spec/generated/openapi.json, one method per operation, so
 * the client cannot drift from the contract (`generate:check` fails when the file is stale).
 *
 * Names: the resource is the operation's tag in camelCase (`Projects` → `projects`); the method is
 * the operationId less the tag's noun at its end, singular or plural (`createProject` → `create`,
 * `listActivity` → `list`), or the whole operationId when it does not end so (`login`), and less a
 * leading `get` when something follows it (`getHealth` → `health`: a method answers, so `get` adds
 * nothing; `getProject` stays `get`). NAMES
 * overrides that rule where it reads poorly or two operations would share a name, and names the
 * operations the generator leaves out. Generation fails on an operation without an operationId or
 * a tag, on two operations with one name, on an override that names no operation, and on a shape
 * it does not know (a body and a query together, a list without pages): a new route becomes a
 * method or an explicit exception, never a silent gap.
 *
 * Arguments: the path parameters in path order, then the body or the query as one object, then
 * the call's options. A method answers a SignalboardPromise of the envelope's `data` (the body
 * itself for the one operation whose answer is no envelope, undefined for 204), whose
 * `withResponse()` adds the answer's head; a list answers a Paginated. A method
 * sends an Idempotency-Key exactly when its operation declares the header: the contract says
 * which writes the service can replay.
 */

/** The parts of an OpenAPI 3.0 document the generator reads. */
interface Schema {
  $ref?: string;
  type?: string;
  enum?: unknown[];
  properties?: Record<string, Schema>;
  allOf?: Schema[];
}
interface Parameter {
  $ref?: string;
  name: string;
  in: 'path' | 'query' | 'header' | 'cookie';
  required?: boolean;
  schema?: Schema;
}
interface Operation {
  operationId?: string;
  tags?: string[];
  summary?: string;
  description?: string;
  parameters?: Parameter[];
  requestBody?: { required?: boolean };
  responses: Record<string, { content?: Record<string, { schema?: Schema }> }>;
  security?: Record<string, string[]>[];
}
export interface OpenApiDocument {
  paths: Record<string, Record<string, unknown>>;
  components: { schemas?: Record<string, Schema>; parameters?: Record<string, Parameter> };
  security?: Record<string, string[]>[];
  tags?: { name: string; description?: string }[];
}

/** `resource.method` for a generated method, or why an operation has none. */
type Naming = `${string}.${string}` | { handWritten: `${string}.${string}`; why: string } | { omitted: string };

const NAMES: Record<string, Naming> = {
  createApiToken: 'tokens.create',
  listApiTokens: 'tokens.list',
  deleteApiToken: 'tokens.delete',
  getCurrentUser: 'users.me',
  publishEvents: 'events.publishBatch', // `publishEvent` is `events.publish`
  countEvents: 'events.counts', // what it answers: counts over time
  identifyEndUser: 'endUsers.identify',
  getEndUser: 'endUsers.get',
  streamEvents: { handWritten: 'events.stream', why: 'a reconnecting stream of Server-Sent Events, not one answer (sdk/src/stream.ts)' },
  stripeWebhook: { omitted: 'called by Stripe, never by a user' },
  // LogSnag's routes exist for LogSnag's own clients; `events` and `insights` cover the same ground.
  logsnagLog: { omitted: "LogSnag compatibility, for LogSnag's clients (the SDK has events.publish)" },
  logsnagSetInsight: { omitted: "LogSnag compatibility, for LogSnag's clients (the SDK has insights.create and insights.update)" },
  logsnagIncrementInsight: { omitted: "LogSnag compatibility, for LogSnag's clients (the SDK has insights.update)" },
  logsnagIdentify: { omitted: "LogSnag compatibility, for LogSnag's clients (the SDK identifies end users on their native route)" },
  createCheckoutSession: 'billing.checkout',
  createPortalSession: 'billing.portal',
  deleteCurrentUser: 'users.deleteMe', // `getCurrentUser` is `users.me`
  updateCurrentUser: 'users.update',
  listSessions: 'sessions.list',
  deleteSession: 'sessions.delete',
  // A webhook endpoint's sub-resources, by what they do (the rest of `webhooks.*` follows the rule).
  rotateWebhookSecret: 'webhooks.rotateSecret',
  listWebhookDeliveries: 'webhooks.deliveries',
  retryWebhookDelivery: 'webhooks.retryDelivery',
};

const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
const IDENTIFIER = /^[a-z][A-Za-z0-9]*$/;

interface Method {
  operationId: string;
  resource: string;
  name: string;
  httpMethod: string;
  path: string;
  doc: string[];
  /** In path order: the name in the path, the argument's name, and its TypeScript type read from the parameter's schema. */
  pathParams: { param: string; arg: string; type: string }[];
  input: { kind: 'body' | 'query'; required: boolean } | undefined;
  list: boolean;
  envelope: boolean;
  idempotencyKey: boolean;
}

class Generation {
  constructor(private readonly document: OpenApiDocument) {}

  private resolve<T extends { $ref?: string }>(value: T, section: 'schemas' | 'parameters'): T {
    if (!value.$ref) return value;
    const name = value.$ref.replace(`#/components/${section}/`, '');
    const target = this.document.components[section]?.[name] as T | undefined;
    if (!target) throw new Error(`Unresolved reference ${value.$ref}`);
    return this.resolve(target, section);
  }

  /** A schema's properties, through references and allOf. */
  private properties(schema: Schema): Record<string, Schema> {
    const resolved = this.resolve(schema, 'schemas');
    return Object.assign({}, ...(resolved.allOf ?? []).map((part) => this.properties(part)), resolved.properties ?? {}) as Record<
      string,
      Schema
    >;
  }

  method(path: string, httpMethod: string, operation: Operation): Method | undefined {
    const where = `${httpMethod.toUpperCase()} ${path}`;
    const { operationId } = operation;
    if (!operationId) throw new Error(`${where} has no operationId: the SDK cannot name its method.`);
    const naming = NAMES[operationId] ?? this.ruleName(operationId, operation.tags?.[0], where);
    if (typeof naming !== 'string') return undefined;
    const [resource, name] = naming.split('.') as [string, string];
    if (!IDENTIFIER.test(resource) || !IDENTIFIER.test(name)) throw new Error(`${where}: '${naming}' is not a resource.method name.`);

    const parameters = (operation.parameters ?? []).map((p) => this.resolve(p, 'parameters'));
    const pathParams = [...path.matchAll(/\{([^}]+)\}/g)].map(([, param]) => {
      const parameter = parameters.find((p) => p.in === 'path' && p.name === param);
      if (!parameter) throw new Error(`${where}: {${param}} is not a parameter.`);
      const arg = param!.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase());
      return { param: param!, arg, type: this.pathType(parameter.schema, `${where} {${param}}`) };
    });
    const query = parameters.filter((p) => p.in === 'query');
    const success = Object.keys(operation.responses).filter((status) => /^2\d\d$/.test(status));
    if (success.length !== 1) throw new Error(`${where}: the SDK expects one success status, not ${success.length}.`);
    const schema = operation.responses[success[0]!]!.content?.['application/json']?.schema;
    const data = schema && this.properties(schema);
    // No body (204) reads as undefined whatever the flag; only a JSON body that is no envelope is answered whole.
    const envelope = data === undefined || ('success' in data && 'data' in data);
    const page = data?.data ? this.properties(data.data) : {};
    const list = 'items' in page && 'next_cursor' in page;
    if (list !== query.some((p) => p.name === 'cursor'))
      throw new Error(`${where}: a list answers pages (items, next_cursor) and takes a cursor; this one does only one of the two.`);
    if (operation.requestBody && query.length > 0) throw new Error(`${where}: the SDK has no shape for a body and a query together.`);
    const input = operation.requestBody
      ? { kind: 'body' as const, required: operation.requestBody.required === true }
      : query.length > 0
        ? { kind: 'query' as const, required: query.some((p) => p.required) }
        : undefined;

    const idempotencyKey = parameters.some((p) => p.in === 'header' && p.name.toLowerCase() === 'idempotency-key');
    const doc = [operation.summary ? `${operation.summary}.` : '', operation.description ?? '', `\`${where}\``].filter(Boolean);
    return { operationId, resource, name, httpMethod, path, doc, pathParams, input, list, envelope, idempotencyKey };
  }

  /**
   * A path parameter's type as plain TypeScript (`string`, or a union of its values), so that an
   * editor shows it as such; the generated file holds each to the contract's type (PathParamTypes).
   * A path segment is text: a schema of another type has no place in a path the SDK fills.
   */
  private pathType(schema: Schema | undefined, where: string): string {
    const resolved = schema && this.resolve(schema, 'schemas');
    if (resolved?.type !== 'string') throw new Error(`${where}: the SDK fills path parameters with strings, not ${resolved?.type}.`);
    return resolved.enum ? resolved.enum.map((value) => JSON.stringify(value)).join(' | ') : 'string';
  }

  private ruleName(operationId: string, tag: string | undefined, where: string): Naming {
    if (!tag) throw new Error(`${where} (${operationId}) has no tag: the SDK cannot name its resource.`);
    const noun = [tag, tag.replace(/s$/, '')].find((n) => operationId.endsWith(n) && operationId.length > n.length);
    const name = noun ? operationId.slice(0, -noun.length) : operationId;
    // A read names what it reads: `getHealth` is `meta.health`. A bare `get` (`getProject`) stays.
    const read = /^get([A-Z])(.*)$/.exec(name);
    return `${resourceOf(tag)}.${read ? read[1]!.toLowerCase() + read[2]! : name}`;
  }
}

/** A tag's resource: its name in camelCase (`Projects` → `projects`). */
function resourceOf(tag: string): string {
  return `${tag[0]!.toLowerCase()}${tag.slice(1).replace(/\W/g, '')}`;
}

/** Every operation of the document in order, as [path, method, operation]. */
function operationsOf(document: OpenApiDocument): [string, string, Operation][] {
  return Object.entries(document.paths).flatMap(([path, item]) =>
    Object.entries(item)
      .filter(([method]) => HTTP_METHODS.includes(method))
      .map(([method, operation]): [string, string, Operation] => [path, method, operation as Operation]),
  );
}

/**
 * The `resource.method` of every operation that is a method of the client, generated or written by
 * hand, by operationId (the tests check each exists).
 */
export function clientMethods(document: OpenApiDocument): Map<string, string> {
  const generation = new Generation(document);
  const names = new Map<string, string>();
  for (const [path, method, operation] of operationsOf(document)) {
    const generated = generation.method(path, method, operation);
    const naming = NAMES[operation.operationId!];
    if (generated) names.set(generated.operationId, `${generated.resource}.${generated.name}`);
    else if (naming && typeof naming === 'object' && 'handWritten' in naming) names.set(operation.operationId!, naming.handWritten);
  }
  return names;
}

const capitalized = (word: string) => word[0]!.toUpperCase() + word.slice(1);

function comment(lines: string[], indent: string): string {
  const text = lines.join('\n\n').replace(/\*\//g, '*\\/').split('\n');
  return [`${indent}/**`, ...text.map((line) => (line ? `${indent} * ${line}` : `${indent} *`)), `${indent} */`].join('\n');
}

function signature(m: Method): { params: string[]; args: string[]; returns: string } {
  const id = `'${m.operationId}'`;
  const params = m.pathParams.map(({ arg, type }) => `${arg}: ${type}`);
  const args = m.pathParams.map(({ arg }) => arg);
  if (m.input) {
    params.push(`${m.input.kind}${m.input.required ? '' : '?'}: ${m.input.kind === 'body' ? 'Body' : 'Query'}<${id}>`);
    args.push(m.input.kind);
  }
  params.push('options?: RequestOptions');
  args.push('options');
  return { params, args, returns: m.list ? `Paginated<Data<${id}>>` : `SignalboardPromise<Data<${id}>>` };
}

function implementation(m: Method): string {
  const { args } = signature(m);
  const operation = [
    `method: '${m.httpMethod.toUpperCase()}'`,
    `path: '${m.path}'`,
    ...(m.idempotencyKey ? ['idempotencyKey: true'] : []),
    ...(m.envelope ? [] : ['envelope: false']),
  ];
  const input = [
    ...(m.pathParams.length > 0
      ? [`path: { ${m.pathParams.map(({ param, arg }) => (param === arg ? param : `${param}: ${arg}`)).join(', ')} }`]
      : []),
    ...(m.input ? [m.input.kind] : []),
  ];
  const call = `caller.${m.list ? 'paginate' : 'call'}({ ${operation.join(', ')} }, { ${input.join(', ')} }, options)`;
  return `      ${m.name}: (${args.join(', ')}) =>\n        ${call.replace('{  }', '{}')},`;
}

/** The source of sdk/src/generated/operations.ts. */
export function sdkOperationsSource(document: OpenApiDocument): string {
  const generation = new Generation(document);
  const resources = new Map<string, Method[]>();
  const seen = new Map<string, string>();
  for (const [path, httpMethod, operation] of operationsOf(document)) {
    const method = generation.method(path, httpMethod, operation);
    if (!method) continue;
    const key = `${method.resource}.${method.name}`;
    const clash = seen.get(key);
    if (clash) throw new Error(`${clash} and ${method.operationId} are both ${key}: add one of them to NAMES in scripts/sdk-methods.ts.`);
    seen.set(key, method.operationId);
    resources.set(method.resource, [...(resources.get(method.resource) ?? []), method]);
  }
  const ids = new Set(operationsOf(document).map(([, , operation]) => operation.operationId));
  const unknown = Object.keys(NAMES).filter((id) => !ids.has(id));
  if (unknown.length > 0) throw new Error(`scripts/sdk-methods.ts names operations the contract lacks: ${unknown.join(', ')}.`);

  const interfaces = [...resources].map(([resource, methods]) => {
    const members = methods.map((m) => {
      const { params, returns } = signature(m);
      return `${comment(m.doc, '  ')}\n  ${m.name}(${params.join(', ')}): ${returns};`;
    });
    return `export interface ${capitalized(resource)}Resource {\n${members.join('\n\n')}\n}`;
  });
  const described = new Map((document.tags ?? []).map((tag) => [resourceOf(tag.name), tag.description]));
  const fields = [...resources.keys()].map((resource) => {
    const description = described.get(resource);
    return `${description ? `${comment([description], '  ')}\n` : ''}  readonly ${resource}: ${capitalized(resource)}Resource;`;
  });
  const assignments = [...resources].map(
    ([resource, methods]) => `    this.${resource} = {\n${methods.map(implementation).join('\n')}\n    };`,
  );
  const pathTypes = [...resources.values()]
    .flat()
    .flatMap((m) => m.pathParams.map(({ param, type }) => `  Expect<Equal<${type}, PathParam<'${m.operationId}', '${param}'>>>,`));
  const apart = Object.entries(NAMES).flatMap(([id, naming]) =>
    typeof naming === 'string'
      ? []
      : [`// - ${id}: ${'handWritten' in naming ? `${naming.handWritten}, written by hand: ${naming.why}` : naming.omitted}.`],
  );
  return [
    '// Generated by scripts/generate.ts (scripts/sdk-methods.ts) from spec/generated/openapi.json. Do not edit.',
    '//',
    '// Every operation of the contract is a method here, but:',
    ...apart,
    '',
    "import type { Caller, RequestOptions } from '../caller.js';",
    "import type { Body, Data, Equal, Expect, PathParam, Query } from '../contract.js';",
    "import type { Paginated } from '../pagination.js';",
    "import type { SignalboardPromise } from '../response.js';",
    '',
    ...interfaces.flatMap((text) => [text, '']),
    '/** Every operation of the contract as a method, grouped by resource. */',
    'export class Resources {',
    ...fields,
    '',
    '  protected constructor(caller: Caller) {',
    ...assignments,
    '  }',
    '}',
    '',
    '/**',
    " * The path parameters' plain types above, each held to the contract's (spec/generated/openapi.ts):",
    ' * a type that drifts from it fails to compile on its line here.',
    ' */',
    'export type PathParamTypes = [',
    ...pathTypes,
    '];',
    '',
  ].join('\n');
}

/** The source of sdk/src/generated/version.ts, from sdk/package.json's version. */
export function sdkVersionSource(version: string): string {
  return [
    '// Generated by scripts/generate.ts from sdk/package.json. Do not edit.',
    '',
    "/** This package's version, sent in the User-Agent (read at build time: no JSON import, so it works in ESM, CommonJS and bundles). */",
    `export const VERSION = '${version}';`,
    '',
  ].join('\n');
}
