#!/usr/bin/env bash
# Keeps the help texts in docs/cli.md true to the `sluice` program.
#
#   scripts/cli_docs.sh --check build/test/tools/sluice   # exit 1 if they differ
#   scripts/cli_docs.sh --write build/test/tools/sluice   # rewrite them
#
# The block between the two markers in docs/cli.md is `sluice --help`, then
# `sluice COMMAND --help` for each command `sluice --help` lists. The
# cli_docs test runs --check, so a changed option or text fails the build
# until the docs are rewritten.
set -euo pipefail
mode="${1:-}"
bin="${2:-}"
if [[ "$mode" != --check && "$mode" != --write ]] || [[ ! -x "$bin" ]]; then
  echo "usage: $0 --check|--write PATH_TO_SLUICE" >&2
  exit 2
fi
doc="$(dirname "$0")/../docs/cli.md"
begin='<!-- BEGIN GENERATED HELP (scripts/cli_docs.sh --write) -->'
end='<!-- END GENERATED HELP -->'

help_block() {  # $1: title, then the command
  local title="$1"
  shift
  printf '### %s\n\n```text\n' "$title"
  "$@"
  printf '```\n\n'
}

generate() {
  help_block "sluice --help" "$bin" --help
  # The command names: the first word of each line under "Subcommands:".
  "$bin" --help | sed -n '/^Subcommands:/,$p' | sed -n 's/^  \([a-z-]*\) .*/\1/p' |
    while read -r command; do
      help_block "sluice $command --help" "$bin" "$command" --help
    done
}

fresh="$(mktemp)"
trap 'rm -f "$fresh" "$fresh.doc"' EXIT
generate >"$fresh"

if [[ "$mode" == --write ]]; then
  awk -v begin="$begin" -v end="$end" -v fresh="$fresh" '
    $0 == begin { print; while ((getline line < fresh) > 0) print line; skip = 1; next }
    $0 == end { skip = 0 }
    !skip { print }' "$doc" >"$fresh.doc"
  mv "$fresh.doc" "$doc"
  echo "rewrote the help texts in $doc"
  exit 0
fi

awk -v begin="$begin" -v end="$end" '
  $0 == end { inside = 0 } inside { print } $0 == begin { inside = 1 }' \
  "$doc" >"$fresh.doc"
if ! diff -u "$fresh.doc" "$fresh" >&2; then
  echo "docs/cli.md does not match \`sluice --help\`: run scripts/cli_docs.sh --write $bin" >&2
  exit 1
fi
echo "docs/cli.md matches the help of every command"
