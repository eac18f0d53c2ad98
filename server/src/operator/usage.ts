/** A command line the CLI cannot take: it prints the message and its usage, and exits 2. */
export class UsageError extends Error {}
