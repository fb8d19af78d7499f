#!/usr/bin/env python3
"""The repository's documents carry every contract its files cite.

Reads the files named on standard input (one path a line) and prints one
line for each citation that does not hold:
  - a document outside the repository (DESIGN, TESTING, STYLE, ANCHORS, a
    path through ../shared), which a reader of the repository cannot open;
  - doc/NAME.md that does not exist;
  - doc/NAME.md, "Heading" (or doc/NAME.md ("Heading")) whose file has no
    heading of that text.
A citation may be wrapped over comment lines: each file is read with its
comment markers taken away and its lines joined.  Exit status 1 if any.
"""
import os
import re
import sys

OUTSIDE = re.compile(r'\b(DESIGN(?:\.md| §)|TESTING\.md|STYLE\.md|ANCHORS\.md|\.\./shared/)')
CITE = re.compile(r'\bdoc/([\w.-]+\.md)(?:(?:,\s*|\s*\(\s*)"([^"]{1,120})")?')
MARKER = re.compile(r'^\s*(?:--|//|/\*|\*|#+(?!\w))?\s?')
headings = {}


def heading_set(doc):
    if doc not in headings:
        with open(doc, encoding='utf-8') as f:
            headings[doc] = {re.sub(r'^#+\s*', '', l).strip()
                             for l in f if l.startswith('#')}
    return headings[doc]


def check(path):
    try:
        with open(path, encoding='utf-8') as f:
            lines = f.read().split('\n')
    except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
        return []
    bad = []
    for n, line in enumerate(lines, 1):
        m = OUTSIDE.search(line)
        if m:
            bad.append(f'{path}:{n}: cites {m.group(1)}, outside the repository')
    text = ' '.join(MARKER.sub('', l, count=1).strip() for l in lines)
    for m in CITE.finditer(text):
        doc = 'doc/' + m.group(1)
        if not os.path.isfile(doc):
            bad.append(f'{path}: cites {doc}, which does not exist')
        elif m.group(2) and m.group(2) not in heading_set(doc):
            bad.append(f'{path}: cites {doc}, "{m.group(2)}", not a heading of it')
    return bad


def main():
    bad = []
    for p in sys.stdin.read().split('\n'):
        if p:
            bad += check(p)
    print('\n'.join(bad))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
