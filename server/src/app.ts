/** The Koa app: middleware in order, nothing else. */
import Koa from 'koa';
import { handlers } from './handlers/index.js';
import { cdn } from './http/cdn.js';
import { dispatch } from './http/dispatch.js';
import { envelope } from './http/envelope.js';
import { requestLog } from './http/request-log.js';
import type { Services } from './services.js';

export function createApp(services: Services): Koa {
  const app = new Koa({ proxy: false });
  app.silent = true; // errors are logged once, by the envelope middleware
  app.use(requestLog(services.logger));
  app.use(envelope());
  app.use(cdn(services.icons));
  app.use(dispatch(services.contract, handlers, services));
  return app;
}
