"""The emulated network: Mininet hosts and BMv2 switch processes, shaped links, bring-up and teardown.

The topology itself (what is connected to what) is backend-neutral and lives in `topology`."""
