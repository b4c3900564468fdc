"""The naive distributed-ThinLTO ninja file (pure): every backend edge lists all of its link's objects as inputs.

This is the shape of the experiment in Chromium's design discussion: without dyndep or restat-driven
imports, a backend may import from any object of its link, so each backend edge depends on all of them.
Per link: one thin-link edge (all objects in, one index per object out), one backend per object (its object,
its index and every object of the link as implicit inputs), one final link. Compile edges are shared.
The commands are never run (the benchmark marks the directory built), only parsed and stat'ed by ninja.
"""

from __future__ import annotations

from collections.abc import Iterable

from bench.subjects.synth import Link
from gn_thinlto.steps.ninja_syntax import build, raw, rule

RULES = "\n".join([
    rule("cc", {"command": raw("clang++ -flto=thin -O2 -c $in -o $out")}),
    rule("thin_link", {"command": raw("ld.lld --thinlto-index-only -o $out.unused $in")}),
    rule("backend", {"command": raw("clang++ -O2 -x ir $in -fthinlto-index=$index -c -o $out")}),
    rule("link", {"command": raw("clang++ -fuse-ld=lld -o $out $in")}),
])


def obj_path(source: str) -> str:
    return "obj/" + source.rsplit(".", 1)[0] + ".o"


def ninja_text(links: Iterable[Link], source_prefix: str) -> str:
    """The whole naive build.ninja; SOURCE_PREFIX leads from the build directory to the sources."""
    links = list(links)
    out = [RULES]
    for source in sorted({s for link in links for s in link.objects}):
        out.append(build(obj_path(source), "cc", source_prefix + source))
    for link in links:
        objs = [obj_path(s) for s in link.objects]
        index = {o: f"{link.name}/idx/{o}.thinlto.bc" for o in objs}
        native = {o: f"{link.name}/nat/{o}" for o in objs}
        out.append(build([index[o] for o in objs], "thin_link", objs))
        for o in objs:  # its object, its index and every object of the link
            out.append(build(native[o], "backend", o, implicit=[index[o], *objs], variables={"index": index[o]}))
        out.append(build(f"{link.name}/{link.name}", "link", [native[o] for o in objs]))
    return "\n".join(out) + "\n"


def backend_edges(links: Iterable[Link]) -> int:
    return sum(len(link.objects) for link in links)
