"""The performance tables (docs/performance.md, and the README's claims), generated from the benchmarks' JSON under
bench/results/: `gradswitch tables [--write | --check]` (gradswitch/cli/tables.py).

Every table of docs/performance.md comes from here, after a line `<!-- table: NAME -->`, and so do the tables of
docs/simulator.md, docs/faults.md and docs/netreduce.md and the README's headline tables (catalogue.README_TABLES);
tests/unit/test_readme_figures.py fails when a copy differs from what the JSON gives (a benchmark was run again and
the document was not). A cell holds a figure of the JSON, a ratio of two of its figures (the column says so), or a
figure's median with [min, max] over the repetitions where the JSON keeps a `spread`; cells.py says what the marks
mean.

  reading.py         a benchmark's JSON: its format checked, the BMv2 build, whether a run was machine-bound
  cells.py           figures, shares, ratios and spreads as cells, and their marks
  testbed.py         one switch and the collectives on BMv2: transport, instructions, forwarding, all-reduce, NetReduce
  training.py        training speed-ups, DLCP, spraying, TensorLights, time to accuracy
  claims.py          the papers' claims beside the testbed's figures (the README's headline)
  crossval.py        the simulator against the testbed
  simulator.py       the simulator's speed, profile, MPI ranks, training at scale, its graph engine
  faults.py          the controller's rerouting, a fault on ns-3, NetReduce's fallback
  goodput.py         the goodput study
  training_graph.py  the training runs as execution graphs on BMv2
  catalogue.py       every table by name and the JSON it needs
  documents.py       the documents that hold the tables: what is stale, writing them
"""
