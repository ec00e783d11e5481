#!/usr/bin/env bash
# A `run` call on the lent GPU machine sends every tracked and untracked-not-ignored file of the checkout, at most
# 64 MiB with the carried paths; the checkpoints in assets/ alone are over that, and training needs only
# assets/discrete/tokenizer.json of them. Run in the checkout that the calls send (the session's own):
#   bash scripts/device/travel_light.sh on [CARRY ...]   untrack the rest of assets/ in the index only (the files stay
#                                                        on disk, ignored through info/exclude), then print the size
#   bash scripts/device/travel_light.sh off              track them again (index entries from HEAD), drop the lines
#   bash scripts/device/travel_light.sh size [CARRY ...] bytes that would travel: files as git lists them, plus CARRY
# Turn it off right after the calls: while it is on, a pre-commit hook refuses every commit (one would delete the
# checkpoints).
set -euo pipefail
cd "$(dirname "$0")/../.."
KEEP=assets/discrete/tokenizer.json
LIMIT=$((64 * 1024 * 1024))
EXCLUDE=$(git rev-parse --git-path info/exclude)
HOOK=$(git rev-parse --git-path hooks/pre-commit)
BEGIN="# travel_light: assets left behind (scripts/device/travel_light.sh off removes this block)"
END="# travel_light end"

size() {
  local listed carried=0 path
  listed=$(git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2> /dev/null \
    | awk '{s += $1} END {print s + 0}')
  for path in "$@"; do
    carried=$((carried + $(du -sb "$path" | cut -f1)))
  done
  local total=$((listed + carried))
  echo "would travel: $listed bytes of the checkout + $carried carried = $total (limit $LIMIT)"
  [ "$total" -le "$LIMIT" ] || { echo "over the limit: leave more behind or carry less"; return 1; }
}

on() {
  if grep -qxF "$BEGIN" "$EXCLUDE" 2> /dev/null; then
    echo "already on"
  else
    git diff --cached --quiet -- assets || { echo "staged changes under assets/: commit or unstage them first"; exit 1; }
    local leave
    mapfile -t leave < <(git ls-files assets | grep -vxF "$KEEP")
    printf '%s\n' "${leave[@]}" | git rm -q --cached --pathspec-from-file=-
    { echo "$BEGIN"; printf '/%s\n' "${leave[@]}"; echo "$END"; } >> "$EXCLUDE"
    [ ! -e "$HOOK" ] || { echo "a pre-commit hook exists ($HOOK): the guard below would replace it"; off; exit 1; }
    mkdir -p "$(dirname "$HOOK")"
    printf '%s\n' '#!/bin/sh' 'echo "travel_light is on: bash scripts/device/travel_light.sh off before committing" >&2' \
      'exit 1' > "$HOOK"
    chmod +x "$HOOK"
    echo "left behind ${#leave[@]} files under assets/ (kept $KEEP); turn it off after the calls"
  fi
  size "$@"
}

off() {
  git reset -q -- assets
  if [ -f "$HOOK" ] && grep -q travel_light "$HOOK"; then rm -f "$HOOK"; fi
  if grep -qxF "$BEGIN" "$EXCLUDE" 2> /dev/null; then
    awk -v begin="$BEGIN" -v end="$END" '$0 == begin {skip = 1} !skip {print} $0 == end {skip = 0}' "$EXCLUDE" \
      > "$EXCLUDE.new"
    mv "$EXCLUDE.new" "$EXCLUDE"
  fi
  git status --short -- assets
  echo "assets/ tracked again"
}

case "${1:-}" in
  on | off | size) "$@" ;;
  *) sed -n '2,9p' "$0"; exit 2 ;;
esac
