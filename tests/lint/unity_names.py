#!/usr/bin/env python3
"""Fails when two sources of one CMake target define the same file-local name.

Targets build as unity batches (CMakeLists.txt, HUDDLE_UNITY): several sources of a target are
one translation unit, so two anonymous-namespace or static definitions of one name either stop
the build (same signature) or, worse, become overloads of each other (different signatures),
and a call may silently go to the other file's function. Which sources share a batch changes as
files are added, so the rule is per target, not per batch.

Looks at names defined at the top level of an anonymous namespace (or `static`) in clang-formatted
sources: functions, constants, structs, classes and enums. Aliases (`using X = ...`) are left out:
a conflicting alias is a compile error, never a silent one.

  tests/lint/unity_names.py [ROOT]
"""
import collections
import os
import re
import sys

TARGET = re.compile(r'(?:huddle_module|huddle_test|huddle_fuzz_target|add_executable|add_library)'
                    r'\(\s*(\w+)(.*?)\)\s*$', re.S | re.M)
SOURCE = re.compile(r'([\w./${}-]+\.cpp)\b')
FUNCTION = re.compile(r'^(?:(?:static|inline|constexpr|\[\[\w+\]\])\s+)*[\w:<>,*&\s]+?[\s*&](\w+)\s*\([^;]*$')
CONSTANT = re.compile(r'^(?:static\s+)?(?:inline\s+)?(?:constexpr|const)\s+[\w:<>,\s]+?\s(\w+)\s*(?:=|\{|\[)')
TYPE = re.compile(r'^(?:struct|class|enum(?:\s+class)?)\s+(\w+)\b(?!;)')
NOT_NAMES = {'operator', 'if', 'for', 'while', 'return', 'switch', 'TEST', 'TEST_P', 'TEST_F',
             'INSTANTIATE_TEST_SUITE_P', 'TYPED_TEST', 'TYPED_TEST_SUITE'}


def targets(root):
    for directory, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(('.', 'build'))]
        if 'CMakeLists.txt' not in files:
            continue
        text = open(os.path.join(directory, 'CMakeLists.txt')).read()
        for m in TARGET.finditer(text):
            paths = []
            for s in SOURCE.findall(m.group(2)):
                s = s.replace('${PROJECT_SOURCE_DIR}', root)
                path = os.path.normpath(s if os.path.isabs(s) else os.path.join(directory, s))
                if os.path.exists(path):
                    paths.append(path)
            if len(paths) > 1:
                yield m.group(1), paths


def local_names(path):
    anonymous = False
    for line in open(path):
        if line.startswith('namespace {'):
            anonymous = True
        elif anonymous and line.startswith('}  // namespace'):
            anonymous = False
        if not (anonymous or line.startswith('static ')) or line[:1] in (' ', '}', '#', '/'):
            continue
        for pattern in (TYPE, CONSTANT, FUNCTION):
            m = pattern.match(line)
            if m and m.group(1) not in NOT_NAMES:
                yield m.group(1)
                break


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), '..', '..'))
    clashes = []
    for target, paths in targets(root):
        where = collections.defaultdict(set)
        for path in paths:
            for name in local_names(path):
                where[name].add(os.path.relpath(path, root))
        clashes += [f'{target}: {name} in {", ".join(sorted(files))}'
                    for name, files in sorted(where.items()) if len(files) > 1]
    for c in clashes:
        print(c)
    if clashes:
        print(f'{len(clashes)} file-local name(s) defined twice in one target: rename one, or share '
              'it through a header (unity batches put them in one translation unit)')
        return 1
    print('no file-local name is defined twice in one target')
    return 0


if __name__ == '__main__':
    sys.exit(main())
