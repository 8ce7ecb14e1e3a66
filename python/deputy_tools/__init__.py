"""deputy_tools: run `deputy bench ...` sweeps and turn their JSON into figures and tables.

The C++ benchmarks own the measurement and write one self-describing JSON
document per run (``--out``: config, versions, host, results). Everything
here works from those documents only, so a figure or a table in
docs/PERFORMANCE.md can always be regenerated from files, never retyped.
"""

__version__ = "0.1.0"
