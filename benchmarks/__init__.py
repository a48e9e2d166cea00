"""The benchmark scripts, each run as a module from the repository root (``python -m benchmarks.<name> --help``);
``python -m benchmarks.report`` renders benchmarks/README.md's tables from benchmarks/recorded/*.json (and
``python -m studies.render`` every generated page at once)."""
