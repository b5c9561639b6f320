"""Helpers of bench/torch: daemons, rank processes, hc-perf and the report (bench/README.md)."""
