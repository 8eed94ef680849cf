#!/usr/bin/env python3
"""Writes the toggles P/T net of tests/common (toggles_pnml) to stdout: K independent
toggles, exactly 2^K markings and K * 2^K transitions, BFS level d holding C(K, d) markings.
Used for the README's picture of a run (docs/run.svg):

    python3 tools/toggles.py 22 > toggles-22.pnml
"""
import sys

k = int(sys.argv[1]) if len(sys.argv) > 1 else 22
out = [
    '<?xml version="1.0" encoding="UTF-8"?>\n<pnml xmlns="http://www.pnml.org/version-2009/grammar/pnml">\n'
    '<net id="toggles" type="http://www.pnml.org/version-2009/grammar/ptnet">\n<page id="page">\n'
]
for i in range(k):
    out.append(f'<place id="a{i}"><initialMarking><text>1</text></initialMarking></place>\n<place id="b{i}"/>\n')
    out.append(f'<transition id="t{i}"/>\n<transition id="u{i}"/>\n')
    out.append(f'<arc id="ta{i}" source="a{i}" target="t{i}"/><arc id="tb{i}" source="t{i}" target="b{i}"/>\n')
    out.append(f'<arc id="ub{i}" source="b{i}" target="u{i}"/><arc id="ua{i}" source="u{i}" target="a{i}"/>\n')
out.append("</page>\n</net>\n</pnml>\n")
sys.stdout.write("".join(out))
