"""Does an object define or reference any real symbol? (thinlto_base.elf reads it.)

Used on the regular-LTO object lld writes with --lto-obj-path: without a regular LTO part (no CFI or split
LTO unit) it is an empty object holding only a FILE symbol, and is left out of the final link.
"""

from __future__ import annotations

import os

from gn_thinlto.errors import GnThinltoError, reason
from thinlto_base.elf import ElfFile, ElfFormatError
from thinlto_base.elf_layout import SectionType, SymbolType


def has_real_symbols(path: str | os.PathLike[str]) -> bool:
    """True when the object's .symtab holds a symbol other than the null, FILE and SECTION entries."""
    try:
        with ElfFile.open(path) as elf:
            sections = elf.sections()
            return any(sym.info & 0xF not in (SymbolType.FILE, SymbolType.SECTION)
                       for table in sections if table.type == SectionType.SYMTAB
                       for _name, sym in elf.symbols(sections, table))
    except ElfFormatError as e:
        raise GnThinltoError(f"{os.fspath(path)}: {e}") from e
    except OSError as e:
        raise GnThinltoError(f"{os.fspath(path)}: {reason(e)}") from e
