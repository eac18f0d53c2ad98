#!/usr/bin/env node
/**
 * `npx @signalboard/tools <command> [options]` (the package's bin, `signalboard`): tools for the
 * operator of a Signalboard deployment that need no clone of the repository. In the repository,
 * `npm run conformance -- …` runs the same CLI from source.
 *
 * Exit status: the command's own (conformance: 0 conforms, 1 does not, 2 usage); 2 for no command or
 * an unknown one; 0 for --help and --version.
 */
import { readFileSync } from 'node:fs';
import * as conformance from './conformance/command.js';
import { ContractModel } from './conformance/contract.js';

const COMMANDS = new Map<string, { summary: string; run: (argv: string[]) => Promise<number> }>([
  ['conformance', { summary: conformance.SUMMARY, run: conformance.conformanceCommand }],
]);

const USAGE = `usage: npx @signalboard/tools <command> [options]

commands:
${[...COMMANDS].map(([name, command]) => `  ${name.padEnd(14)}${command.summary}`).join('\n')}

  <command> --help  the command's options
  --version         this package's version and the contract it judges by`;

function version(): string {
  // ../package.json is the package's own from src/cli.ts and from dist/cli.js alike.
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { name: string; version: string };
  return `${pkg.name} ${pkg.version} (contract: ${ContractModel.load().title})`;
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === '--help' || name === '-h' || name === 'help') {
    console.log(USAGE);
    return 0;
  }
  if (name === '--version' || name === '-v') {
    console.log(version());
    return 0;
  }
  if (name === undefined) {
    console.error(USAGE);
    return 2;
  }
  const command = COMMANDS.get(name);
  if (!command) {
    console.error(`unknown command "${name}"\n\n${USAGE}`);
    return 2;
  }
  return command.run(rest);
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    console.error(`signalboard: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    process.exitCode = 1;
  },
);
