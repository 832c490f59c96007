"""samsa's benchmarks. ``python -m bench [--quick]`` runs every scenario against samsa
and the Tansu peer with machine limits in the same run (bench/runner.py); the
bench_*.py files beside it are older standalone scripts for single packages."""
