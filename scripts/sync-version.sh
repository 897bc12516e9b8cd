#!/bin/sh
# scripts/sync-version.sh: copy the one version of SkillPilot
# (internal/version/VERSION, which the binaries embed) into the Python
# package (pyproject.toml, skillpilot/__init__.py) and the Tcl package
# (pkgIndex.tcl, skillpilot.tcl). TestVersionsAgree fails until it is run.
set -eu
cd "$(dirname "$0")/.."
v=$(tr -d ' \n' < internal/version/VERSION)
sed -i "s/^version = \".*\"/version = \"$v\"/" clients/python/pyproject.toml
sed -i "s/^__version__ = \".*\"/__version__ = \"$v\"/" clients/python/skillpilot/__init__.py
sed -i "s/^package ifneeded skillpilot [0-9.]* /package ifneeded skillpilot $v /; s/package provide skillpilot [0-9.]*\$/package provide skillpilot $v/" clients/tcl/skillpilot/pkgIndex.tcl
sed -i "s/^    variable release .*/    variable release $v/" clients/tcl/skillpilot/skillpilot.tcl
echo "version $v"
