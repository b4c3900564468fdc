"""The `gn-thinlto` command line: gen, example, explain, report, and the gn/ninja runners they share.

The top stage: may import every other stage and goma_ext.
"""
