"""One module per command line verb: parse its arguments' meaning, call the stages,
print, return the exit code. monitor.cli imports a verb's module only when it runs."""
