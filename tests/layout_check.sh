#!/bin/sh
# DESIGN.md "Layout": folders say who may include what. Fails, naming the
# line, when the executor includes front or catalog headers, when the
# catalog includes the front's, or when proto/ or client/ reach into the
# daemon.
top=${1:?usage: layout_check.sh SOURCE_DIR}
bad=0
check() { # folder pattern why
  hits=$(grep -rnE "#include \"($2)" "$top/$1" 2>/dev/null)
  if [ -n "$hits" ]; then
    echo "$3:"; echo "$hits"; bad=1
  fi
}
check daemon/exec 'front/|catalog/' "the executor includes front or catalog state"
check daemon/catalog 'front/' "the catalog includes the front"
check daemon/compile 'front/|exec/' "the compile worker includes front or executor state"
check proto 'front/|catalog/|exec/|client_internal' "proto/ depends on daemon or client code"
check client 'front/|catalog/|exec/|channel\.h|log\.h' "client/ includes daemon internals"
[ $bad = 0 ] && echo "layout: every folder includes only what it may"
exit $bad
