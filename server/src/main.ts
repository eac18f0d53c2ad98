/** The service's process, as `npm start` runs it (`node dist/server/src/main.js`): see run.ts. */
import { runService } from './run.js';

await runService();
