"""What a finished build holds, for the commands that look back at one: where its time went (build_log,
build_report, build_html), what ninja's graph says with dyndep (graph_query), and whether two builds' binaries hold
the same code (elf_summary, parity). Below the command line, above the hook."""
