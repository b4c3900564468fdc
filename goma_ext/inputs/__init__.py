"""Backend input processing: the exact files a ThinLTO backend command reads (clang args, archives,
imports from the index), and `goma-ext inputs`. May import bitcode/.
"""
