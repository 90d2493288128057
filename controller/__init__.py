"""gradswitch controller: P4Runtime control of every BMv2 switch of a topology, and the CLI."""
