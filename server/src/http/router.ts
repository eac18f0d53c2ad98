/**
 * Routing: a request's method and path → the contract's operation, with its path parameters, or
 * 404 `not_found` / 405 `method_not_allowed`. openapi-backend has a matcher of its own, but it
 * builds a regular expression per route on every request, so its cost grows with the contract
 * (about 150 µs a request with this one); this table is built once at start-up and a match costs
 * the same whatever the contract's size.
 *
 * The table is a tree of path segments: a literal child per segment value and one child for a
 * `{param}` segment, so matching walks the path's segments. When several templates match a path,
 * the one with the most literal characters wins (`/invites/mine` over `/invites/{username}`), as a
 * scan of the templates in that order would pick. Every template's parameters are whole segments
 * (`/feeds/{feed}`, never `/{sha}.png`), which the table checks when it is built.
 */
import { MethodNotAllowed, NotFound } from '../errors.js';
import type { ContractOperation } from './contract-operation.js';

/** One path template of the contract, with its operations by method. */
interface Route {
  paramNames: string[];
  /** Rank by literal characters, most first: of several templates matching a path, the lowest wins. */
  order: number;
  byMethod: Map<string, ContractOperation>;
}

interface Node {
  literal: Map<string, Node>;
  param: Node | undefined;
  /** Templates that end at this node. */
  routes: Route[];
}

const newNode = (): Node => ({ literal: new Map(), param: undefined, routes: [] });

export interface RouteMatch {
  op: ContractOperation;
  params: Record<string, string>;
}

interface Found {
  route: Route;
  values: string[];
}

export class RouteTable {
  private readonly tree: Node = newNode();
  /**
   * The templates without parameters, by path. A path equal to one is matched by no other template
   * with as many literal characters (a parameter stands for a whole, non-empty segment), so it is
   * the answer the tree would give, without the walk.
   */
  private readonly literalRoutes = new Map<string, Route>();

  /** Throws if a template has a parameter that is part of a segment. */
  constructor(operations: ContractOperation[]) {
    const byPath = new Map<string, Route>();
    for (const op of operations) {
      let route = byPath.get(op.path);
      if (!route) {
        const segments = op.path.split('/').slice(1);
        const partial = segments.find((segment) => segment.includes('{') && !/^\{[^}]+\}$/.test(segment));
        if (partial !== undefined) throw new Error(`${op.path}: a path parameter must be a whole segment, not part of "${partial}"`);
        const paramNames = segments.filter((segment) => segment.startsWith('{')).map((segment) => segment.slice(1, -1));
        route = { paramNames, order: 0, byMethod: new Map() };
        byPath.set(op.path, route);
      }
      route.byMethod.set(op.method, op);
    }
    const literalLength = (path: string) => path.replace(/\{[^}]+\}/g, '').length;
    [...byPath].sort(([a], [b]) => literalLength(b) - literalLength(a)).forEach(([, route], i) => (route.order = i));
    for (const [path, route] of byPath) {
      if (route.paramNames.length === 0) this.literalRoutes.set(path, route);
      let node = this.tree;
      for (const segment of path.split('/').slice(1)) {
        if (segment.startsWith('{')) node = node.param ??= newNode();
        else {
          let next = node.literal.get(segment);
          if (!next) node.literal.set(segment, (next = newNode()));
          node = next;
        }
      }
      node.routes.push(route);
    }
  }

  /** The operation for a request (HEAD as GET), with its path parameters percent-decoded; or 404 / 405. */
  match(method: string, path: string): RouteMatch {
    const normalized = path.length > 1 && path.endsWith('/') ? path.replace(/\/+$/, '') : path;
    const literal = this.literalRoutes.get(normalized);
    const found = literal
      ? { route: literal, values: [] }
      : normalized.startsWith('/')
        ? this.find(this.tree, normalized.split('/'), 1, [])
        : undefined;
    if (!found) throw new NotFound('No route matches this path.');
    const op = found.route.byMethod.get(method === 'HEAD' ? 'GET' : method);
    if (!op) throw new MethodNotAllowed([...found.route.byMethod.keys()]);
    const params: Record<string, string> = {};
    try {
      found.route.paramNames.forEach((name, i) => (params[name] = decodeURIComponent(found.values[i]!)));
    } catch {
      throw new NotFound('No route matches this path.');
    }
    return { op, params };
  }

  /**
   * Every template matching `segments` from `node` on (a literal branch and a parameter branch may
   * both match); answers the one of lowest `order`, with the values of its parameters in order.
   */
  private find(node: Node, segments: string[], at: number, values: string[]): Found | undefined {
    if (at === segments.length) {
      let best: Route | undefined;
      for (const route of node.routes) if (!best || route.order < best.order) best = route;
      return best && { route: best, values: [...values] };
    }
    const segment = segments[at]!;
    const literal = node.literal.get(segment);
    const byLiteral = literal ? this.find(literal, segments, at + 1, values) : undefined;
    let byParam: Found | undefined;
    if (node.param && segment !== '') {
      values.push(segment);
      byParam = this.find(node.param, segments, at + 1, values);
      values.pop();
    }
    if (!byLiteral) return byParam;
    if (!byParam) return byLiteral;
    return byLiteral.route.order < byParam.route.order ? byLiteral : byParam;
  }
}
