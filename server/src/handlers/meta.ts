import type { Handler } from '../http/handler-types.js';

export const getRoot: Handler<'getRoot'> = async () => ({
  status: 200,
  data: { message: 'Hello from Signalboard. The API reference is at /v1/openapi.json.' },
});

export const getOpenApi: Handler<'getOpenApi'> = async ({ services }) => ({
  status: 200,
  raw: services.contract.document as unknown as Record<string, unknown>,
});

export const getHealth: Handler<'getHealth'> = async () => ({ status: 200, data: { status: 'ok' } });

export const getReadiness: Handler<'getReadiness'> = async ({ em }) => {
  await em.getConnection().execute('select 1');
  return { status: 200, data: { status: 'ok' } };
};
