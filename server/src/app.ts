/** The Koa app: middleware in order, nothing else. */
import Koa from 'koa';
import { handlers } from './handlers/index.js';
import { cdn } from './http/cdn.js';
import { dispatch, type Pipeline } from './http/dispatch.js';
import { docs } from './http/docs.js';
import { envelope } from './http/envelope.js';
import type { Metrics } from './http/metrics.js';
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
  app.use(requestLog(services.logger));
  if (metrics) app.use(metrics.observe());
  app.use(securityHeaders());
  app.use(envelope());
  if (metrics) app.use(metrics.endpoint(services.config.metrics.token));
  app.use(cors(services.config.corsOrigins));
  app.use(cdn(services.icons));
  app.use(docs());
  app.use(dispatch(pipeline, handlers, services));
  return app;
}
