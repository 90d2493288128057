"""gradswitch: the orchestration on top of everything: the command line, experiment specs, runs on BMv2 or ns-3,
comparisons, reports and plots, and the health check."""
