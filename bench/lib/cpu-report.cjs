// Preloaded into the measured process (node --require): prints its CPU time on exit, so the
// benchmark can tell the start-up work apart from the wait for a loaded machine's scheduler.
process.on("exit", () => {
  const { user, system } = process.cpuUsage();
  process.stderr.write(`cpu-report ${Math.round((user + system) / 1000)}\n`);
});
