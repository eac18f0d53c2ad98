/**
 * The service as a process: read the configuration, start the service, stop it cleanly on SIGINT or
 * SIGTERM. Run by main.ts (`npm start`) and by the package's `start` command (cli.ts).
 */
import { ConfigError, loadConfig } from './config.js';
import { createLogger } from './logger.js';
import { startServer } from './server.js';

/** Resolves once the service is ready; the process then lives until a signal, and exits from its handler. */
export async function runService(): Promise<void> {
  const started = performance.now();
  let config;
  try {
    config = loadConfig();
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    console.error(`Configuration error: ${error.message}`);
    process.exit(1);
  }
  const logger = createLogger(config.logLevel, config.logFormat);

  try {
    const server = await startServer(config, logger);
    logger.info({ ms: Math.round(performance.now() - started) }, 'ready');
    let stopping = false;
    const stop = async (signal: NodeJS.Signals): Promise<void> => {
      if (stopping) return;
      stopping = true;
      logger.info({ signal }, 'shutting down');
      // The drain has its own deadline; this one covers what follows it (closing the database).
      const force = setTimeout(() => process.exit(1), config.http.shutdownTimeoutMs + 10_000).unref();
      let code = 0;
      try {
        await server.close();
        logger.info('closed');
      } catch (error) {
        logger.error({ error: { type: (error as Error).name, message: (error as Error).message } }, 'shutdown incomplete');
        code = 1;
      }
      clearTimeout(force);
      process.exit(code);
    };
    // `stop` never rejects: every failure is caught and ends in an exit code.
    for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, (received) => void stop(received));
  } catch (error) {
    // Not under `err`: pino's error serializer would replace `type` with the object's constructor name.
    logger.fatal({ error: { type: (error as Error).name, message: (error as Error).message } }, 'could not start');
    process.exit(1);
  }
}
