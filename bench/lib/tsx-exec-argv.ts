/**
 * Node flags for a child process that runs TypeScript: tsx's loader by absolute URL, so the child
 * works whatever the current directory, and whether the parent runs under tsx or vitest.
 */
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

export const TSX_EXEC_ARGV: readonly string[] = [
  "--import",
  pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href,
];
