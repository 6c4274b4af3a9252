#!/usr/bin/env bash
# The reference pages cannot drift from the binaries, and no link in the docs
# points nowhere (issue 36).
#
#   check_docs.sh options BIN_DIR SRC_DIR   every option a binary's --help prints
#       is listed on its page docs/man/<page>.md, and every option listed there
#       is in --help. A page lists an option as a line starting "- `--name";
#       --help's options are every "--name" word it prints outside backquotes. The pages: llmq.md
#       (`llmq --help`), llmq-<command>.md for each command `llmq --help` names,
#       llmq-worker.md, llmq-gateway.md.
#   check_docs.sh links SRC_DIR             every relative link of README.md,
#       CONTRIBUTING.md, docs/**/*.md, examples/README.md and
#       tests/mutation/README.md names a file that exists and, with
#       #anchor, a heading of that file (GitHub's slug of it); and the
#       README's test command is the one .ci/run runs (scripts/test).
# Prints each mismatch and exits 1 when there is one; 0 when all agree.
set -uo pipefail

fail=0
problem() {
    printf '%s\n' "$*" >&2
    fail=1
}

# The options a --help text prints, one per line, sorted, unique: every
# "--name" outside backquotes (a help text quotes another command's options,
# "`llmq enqueue --completion-window 24h`", which are not its own).
help_options() {
    perl -0pe 's/`[^`]*`//g' | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u
}

# The options a page lists ("- `--name" at a line's start), sorted, unique.
page_options() {
    grep -oE -- '^- `--[a-z][a-z0-9-]*' "$1" | sed 's/^- `//' | sort -u
}

# compare WHAT HELP_TEXT PAGE
compare() {
    local what=$1 help=$2 page=$3
    if [ ! -f "$page" ]; then
        problem "$what: no reference page $page"
        return
    fi
    local h p
    h=$(printf '%s\n' "$help" | help_options)
    p=$(page_options "$page")
    if [ -z "$h" ]; then
        problem "$what: --help printed no option"
        return
    fi
    local missing extra
    missing=$(comm -23 <(printf '%s\n' "$h") <(printf '%s\n' "$p"))
    extra=$(comm -13 <(printf '%s\n' "$h") <(printf '%s\n' "$p"))
    [ -z "$missing" ] || problem "$what: in --help but not on ${page#"$src"/}: $(echo $missing)"
    [ -z "$extra" ] || problem "$what: on ${page#"$src"/} but not in --help: $(echo $extra)"
}

check_options() {
    local bin=$1
    local top
    if ! top=$("$bin/llmq" --help); then
        problem "llmq --help failed"
        return
    fi
    compare "llmq" "$top" "$src/docs/man/llmq.md"
    # the commands: the indented words under "Commands:"
    local cmds
    cmds=$(printf '%s\n' "$top" | awk '/^Commands:/ {on = 1; next} on && /^  [a-z]/ {print $1} on && /^$/ {on = 0}')
    [ "$(echo "$cmds" | wc -w)" -ge 10 ] || problem "llmq --help lists too few commands: $cmds"
    local c out
    for c in $cmds; do
        if ! out=$("$bin/llmq" "$c" --help); then
            problem "llmq $c --help failed"
            continue
        fi
        compare "llmq $c" "$out" "$src/docs/man/llmq-$c.md"
    done
    local b
    for b in llmq-worker llmq-gateway; do
        if ! out=$("$bin/$b" --help); then
            problem "$b --help failed"
            continue
        fi
        compare "$b" "$out" "$src/docs/man/$b.md"
    done
    # no page for a command that no longer exists
    local page name
    for page in "$src"/docs/man/llmq-*.md; do
        name=$(basename "$page" .md)
        case $name in llmq-worker | llmq-gateway) continue ;; esac
        echo "$cmds" | grep -qx "${name#llmq-}" || problem "${page#"$src"/}: no such command in llmq --help"
    done
}

# GitHub's anchors of a Markdown file's headings (outside fenced code), one
# per line: lower case, punctuation but '-' and '_' dropped, spaces as '-',
# a repeated one suffixed -1, -2, ...
anchors() {
    awk '
        /^[ \t]*(```|~~~)/ {fence = !fence; next}
        fence {next}
        /^#+[ \t]/ {
            h = $0
            sub(/^#+[ \t]+/, "", h)
            sub(/[ \t]+#*[ \t]*$/, "", h)
            h = tolower(h)
            gsub(/[^a-z0-9 _-]/, "", h)
            gsub(/ /, "-", h)
            if (h in seen) { seen[h]++; print h "-" seen[h] } else { seen[h] = 0; print h }
        }' "$1"
}

# The relative link targets of a Markdown file (outside fenced code and
# inline code), one per line.
link_targets() {
    awk '
        /^[ \t]*(```|~~~)/ {fence = !fence; next}
        fence {next}
        {
            line = $0
            gsub(/`[^`]*`/, "", line)
            while (match(line, /\]\([^) ]+\)/)) {
                print substr(line, RSTART + 2, RLENGTH - 3)
                line = substr(line, RSTART + RLENGTH)
            }
        }' "$1"
}

check_links() {
    declare -A heads # each target's anchors, read once
    local files=("$src/README.md" "$src/CONTRIBUTING.md" "$src/examples/README.md"
        "$src/tests/mutation/README.md")
    local f
    while IFS= read -r f; do files+=("$f"); done < <(find "$src/docs" -name '*.md' | sort)
    local n=0 t path anchor dir target
    for f in "${files[@]}"; do
        [ -f "$f" ] || continue
        dir=$(dirname "$f")
        while IFS= read -r t; do
            case $t in http://* | https://* | mailto:*) continue ;; esac
            n=$((n + 1))
            path=${t%%#*}
            anchor=
            [[ $t == *"#"* ]] && anchor=${t#*#}
            if [ -z "$path" ]; then target=$f; else target=$dir/$path; fi
            if [ ! -e "$target" ]; then
                problem "${f#"$src"/}: link ($t): no file ${target#"$src"/}"
                continue
            fi
            if [ -n "$anchor" ]; then
                if [ -d "$target" ] || [[ $target != *.md ]]; then
                    problem "${f#"$src"/}: link ($t): an anchor into a file that is no Markdown page"
                elif [[ $'\n'${heads[$target]:=$(anchors "$target")}$'\n' != *$'\n'"$anchor"$'\n'* ]]; then
                    problem "${f#"$src"/}: link ($t): no heading #$anchor in ${target#"$src"/}"
                fi
            fi
        done < <(link_targets "$f")
    done
    [ "$n" -ge 20 ] || problem "only $n relative links found: is the link pattern still right?"
    # CI runs "exactly the README's test command" (.ci/run): both say scripts/test
    grep -q '^scripts/test ' "$src/README.md" || problem "README.md: no line starting 'scripts/test' (the test command .ci/run runs)"
    grep -q '^exec scripts/test' "$src/.ci/run" || problem ".ci/run: does not exec scripts/test, the README's test command"
}

case ${1:-} in
options)
    src=$3
    check_options "$2"
    ;;
links)
    src=$2
    check_links
    ;;
*)
    echo "usage: check_docs.sh options BIN_DIR SRC_DIR | links SRC_DIR" >&2
    exit 2
    ;;
esac
exit $fail
