/** The Koa app: middleware in order, nothing else. */
import Koa, { type Context, type Middleware, type Next } from 'koa';
import { handlers } from './handlers/index.js';
import { dropUnreadBodies } from './http/body.js';
import { cdn } from './http/cdn.js';
import { consoleSite, isConsolePath } from './http/console-assets.js';
import { dispatch, type Pipeline } from './http/dispatch.js';
import { docs } from './http/docs.js';
import { envelope } from './http/envelope.js';
import type { Metrics } from './http/metrics.js';
import { representations } from './http/representation.js';
import { requestLog } from './http/request-log.js';
import { cors, securityHeaders } from './http/security.js';
import type { Services } from './services.js';

export function createApp(services: Services, pipeline: Pipeline, metrics?: Metrics): Koa {
  // Client addresses (rate limits, session devices) come from X-Forwarded-For only when configured,
  // and then from the right-most address no trusted proxy added: Koa keeps the last `maxIpsCount`
  // entries and takes the first of those.
  const hops = services.config.trustProxy;
  const app = new Koa({ proxy: hops > 0, maxIpsCount: hops });
  app.silent = true; // errors are logged once, by the envelope middleware
  // Outermost: what it does to an answer happens last, right before Koa writes it.
  app.use(dropUnreadBodies());
  app.use(requestLog(services.logger));
  if (metrics) app.use(metrics.observe());
  app.use(securityHeaders());
  // Outside the envelope and every mount, to tag and compress what they wrote; inside the log and
  // the metrics, which see the status sent (a 304).
  app.use(representations());
  app.use(envelope());
  if (metrics) app.use(metrics.endpoint(services.config.metrics.token));
  const allowOrigins = cors(services.config.corsOrigins, pipeline.contract);
  if (allowOrigins) app.use(allowOrigins);
  const site = consoleSite(services.config.consoleDir, services.logger, () => services.icons.baseUrl());
  app.use(routes(cdn(services.icons, pipeline.rateLimits), docs(), dispatch(pipeline, handlers, services), site));
  return app;
}

type Mount = (ctx: Context, next: Next) => Promise<unknown>;

/**
 * The icon CDN, the web console (when built), the API reference, then the contract, as middleware
 * in that order would be, without passing every request through the first ones: the CDN answers
 * only under `/cdn/`, the console only under `/assets/` and at its pages (a browser's navigation;
 * it hands other requests on), the reference only at `/` and under `/docs`, so other paths go
 * straight to the contract.
 */
function routes(icons: Mount, reference: Mount, api: Mount, site: Mount | undefined): Middleware {
  return (ctx, next) => {
    const path = ctx.path;
    if (path.startsWith('/cdn/')) return icons(ctx, () => api(ctx, next));
    if (site && isConsolePath(path)) {
      return site(ctx, () => (path === '/' ? reference(ctx, () => api(ctx, next)) : api(ctx, next)));
    }
    if (path === '/' || path.startsWith('/docs')) return reference(ctx, () => api(ctx, next));
    return api(ctx, next);
  };
}
